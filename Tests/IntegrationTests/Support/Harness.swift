import Crypto
import Events
import Foundation
@testable import HTTP
import Identity
import Models
import Postgres
import Runtime
@testable import ServiceKit
import XCTest

/// One service in this test process, without a socket, a broker or auth: its routes called with a constructed
/// `Request` (through the pipeline every request takes: request id, errors, the route's own checks), on a database
/// of the test's own, copied from one migrated once per service and process. Tokens are signed with a key of the
/// harness's, which the service's verifier takes instead of auth's; events go to the outbox, read back typed, and
/// events of other services are handed to the service's consumers as its consumer groups would.
///
/// `@unchecked Sendable`: what it holds is set in `init` and only read after, and requests may come from several
/// threads at once as to a server.
final class Harness: @unchecked Sendable {
    /// A person the service knows: their id and a token signed with the test key.
    struct Person: Sendable { let id: String; let token: String; let username: String }

    let app: ServiceApp
    let database: TestDatabase
    private let routes: Router
    var schema: String { app.config.service }

    /// `make` is the service's `makeApp(environment:)`, `service` its name; `settings` go beyond the database and the
    /// media settings.
    init(_ service: String, _ make: (Environment) throws -> ServiceApp, settings: [String: String] = [:]) throws {
        // The broker is the tests' own, for what a service publishes without the outbox (chat's typing), never a stack's.
        var values = ["LOG_LEVEL": "warn", "MEDIA_URL_KEYS": TestEnvironment.mediaURLKeys, "MEDIA_STORE": TestEnvironment.mediaStore,
                      "KAFKA_BROKERS": TestEnvironment.brokers]
        for (k, v) in settings { values[k] = v }
        database = try TestDatabase(template: try Self.template(service, make, values))
        values["DATABASE_URL"] = database.url
        app = try make(Environment(values))
        app.testTokenKeys = [Self.keyID: Self.key.publicKey]
        routes = try app.setup(app)
    }

    /// Closes the service's connections and drops the database.
    func close() {
        app.pool.close()
        database.drop()
    }

    // MARK: - Requests

    /// Answers a request as the service's server would: `json` is encoded (an `Encodable`, or what JSONSerialization
    /// takes), else `raw` is the body; `as` signs it as that person.
    func send(_ method: String, _ path: String, json: Any? = nil, raw: [UInt8]? = nil, as person: Person? = nil,
              headers: [String: String] = [:]) throws -> APIResponse {
        var headers = headers
        var body = raw ?? []
        if let json {
            body = try Self.encode(json)
            headers["Content-Type"] = headers["Content-Type"] ?? "application/json"
        }
        if let person { headers["Authorization"] = "Bearer \(person.token)" }
        let (pathPart, query) = path.firstIndex(of: "?").map { (String(path[..<$0]), Parser.parseQuery(path[path.index(after: $0)...].utf8)) }
            ?? (path, [:])
        let request = Request(method: method, path: pathPart, query: query, headers: headers, body: body)
        var match = routes.match(method: method, path: pathPart)
        // The server's check of the credentials before it reads a body.
        if case .found(let route, _) = match, let refusal = route.checkHead?(request) { match = .refused(refusal) }
        let response = app.respond(request, match)
        return APIResponse(status: response.status, headers: Dictionary(response.headers.map { ($0.0.lowercased(), $0.1) }) { a, _ in a },
                           body: response.body)
    }

    /// A request whose answer is decoded as `V`; throws, with the answer, when its body is not one.
    func send<V: Decodable>(_ method: String, _ path: String, json: Any? = nil, as person: Person?,
                            _ type: V.Type = V.self) throws -> (status: Int, view: V) {
        let r = try send(method, path, json: json, as: person)
        return (r.status, try r.decode(V.self))
    }

    func get<V: Decodable>(_ path: String, as person: Person?, _ type: V.Type = V.self) throws -> (status: Int, view: V) {
        try send("GET", path, as: person, type)
    }

    func post<V: Decodable>(_ path: String, _ json: Any = [String: String](), as person: Person?, _ type: V.Type = V.self) throws -> (status: Int, view: V) {
        try send("POST", path, json: json, as: person, type)
    }

    func patch<V: Decodable>(_ path: String, _ json: Any, as person: Person?, _ type: V.Type = V.self) throws -> (status: Int, view: V) {
        try send("PATCH", path, json: json, as: person, type)
    }

    private static func encode(_ value: Any) throws -> [UInt8] {
        if let value = value as? any Encodable { return Array(try JSONEncoder().encode(value)) }
        return Array(try JSONSerialization.data(withJSONObject: value))
    }

    // MARK: - People and events

    /// A person signed up at auth: a token of theirs, and `user.registered` handed to the service's consumers.
    func person(_ username: String = "p" + UUID().uuidString.prefix(10).lowercased().replacingOccurrences(of: "-", with: ""),
                fullName: String? = nil) throws -> Person {
        let id = UUID()
        try deliver(UserRegistered(userId: id, username: username, email: "\(username)@example.com", fullName: fullName ?? "Test \(username)",
                                   avatarMediaId: nil, createdAt: Date()), subject: id.lowercased, source: "/auth")
        return Person(id: id.lowercased, token: try Self.token(for: id), username: username)
    }

    /// Hands an event another service published (a new one, or `id` again for a redelivery) to every consumer of the
    /// service that reads its topic, each in a transaction that records its id as the consumer does (so a redelivery
    /// is skipped). Returns the event id.
    @discardableResult
    func deliver<P: EventPayload>(_ payload: P, subject: String, source: String, id: String? = nil) throws -> String {
        let row = try Outbox(schema: schema, source: source).row(payload, subject: subject)
        let text = id.map { row.payload.replacingOccurrences(of: row.id.lowercased, with: $0) } ?? row.payload
        let event = try XCTUnwrap(ReceivedEvent(Array(text.utf8)))
        for consumer in app.consumerHandlers where consumer.topics.contains(P.type) {
            try app.pool.withTransaction { c in
                let fresh = try c.execute("""
                    INSERT INTO \(unescaped: schema).processed_events (event_id, topic) VALUES (\(event.id)::uuid, \(P.type)) ON CONFLICT DO NOTHING
                    """)
                if fresh == 1 { try consumer.handler(event, c) }
            }
        }
        return event.id
    }

    /// The events of type `P` the service wrote to its outbox, oldest first, with their subjects.
    func events<P: EventPayload>(_ type: P.Type) throws -> [(subject: String, payload: P)] {
        try outbox(P.type).map { ($0.subject, try XCTUnwrap(ReceivedEvent(Array($0.event.utf8))).decode(P.self)) }
    }

    /// The events of `topic` in the outbox, oldest first: their subjects, and each whole as it is published.
    func outbox(_ topic: String) throws -> [(subject: String, event: String)] {
        try database.connect().rows("SELECT key, payload FROM \(unescaped: schema).outbox WHERE topic = \(topic) ORDER BY id").map { row in
            (try row["key", as: String.self], try row["payload", as: String.self])
        }
    }

    /// Rows of a table in the service's schema matching `condition`.
    func count(_ table: String, _ condition: String = "true") throws -> Int {
        try database.connect().first("SELECT count(*) AS n FROM \(unescaped: schema).\(unescaped: table) WHERE \(unescaped: condition)")!["n"]
    }

    // MARK: - The key and the templates

    static let keyID = "harness"
    static let key = try! Ed25519PrivateKey()

    /// An access token for `user` in a new session, signed with the test key.
    static func token(for user: UUID) throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        return try JWT.sign(AccessClaims(sub: user.lowercased, sid: UUID().lowercased, iat: now, exp: now + JWT.maxLifetime), key: key, kid: keyID)
    }

    nonisolated(unsafe) private static var templates: [String: TestDatabase] = [:]
    private static let templatesLock = NSLock()

    /// The name of a database the service's migrations were applied to, made the first time a test asks in this
    /// process and dropped when the tests are done.
    private static func template(_ service: String, _ make: (Environment) throws -> ServiceApp, _ values: [String: String]) throws -> String {
        templatesLock.lock()
        defer { templatesLock.unlock() }
        if let known = templates[service] { return known.name }
        let database = try TestDatabase()
        var values = values
        values["DATABASE_URL"] = database.url
        let app = try make(Environment(values))
        _ = try app.prepareDatabase()
        app.pool.close()
        if templates.isEmpty { XCTestObservationCenter.shared.addTestObserver(DropTemplates()) }
        templates[service] = database
        return database.name
    }

    private final class DropTemplates: NSObject, XCTestObservation {
        func testBundleDidFinish(_ testBundle: Bundle) {
            Harness.templatesLock.lock()
            defer { Harness.templatesLock.unlock() }
            Harness.templates.values.forEach { $0.drop() }
            Harness.templates = [:]
        }
    }
}

extension APIResponse {
    /// The body decoded as `V`; throws, naming the status and the body, when it is not one.
    func decode<V: Decodable>(_ type: V.Type = V.self) throws -> V {
        do { return try JSONDecoder().decode(V.self, from: Data(body)) } catch {
            throw TestFailure("\(status) \(String(decoding: body, as: UTF8.self).prefix(500)) is not a \(V.self): \(error)")
        }
    }
}

/// A case with one service in-process (`Harness`): subclasses name the service's `makeApp`.
class HarnessTestCase: XCTestCase {
    typealias Person = Harness.Person
    var service: Harness!

    /// The service's name and its `makeApp(environment:)`.
    var serviceName: String { fatalError("override serviceName") }
    var make: (Environment) throws -> ServiceApp { fatalError("override make") }
    /// Its settings beyond the database and media.
    var settings: [String: String] { [:] }

    override func setUpWithError() throws { service = try Harness(serviceName, make, settings: settings) }
    override func tearDown() { service?.close() }

    func person(_ username: String = "p" + UUID().uuidString.prefix(10).lowercased().replacingOccurrences(of: "-", with: "")) throws -> Person {
        try service.person(username)
    }
}
