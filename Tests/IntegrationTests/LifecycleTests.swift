import AuthCore
import ChatCore
import CurationCore
import DispatchCore
import Foundation
import HTTP
import Models
import NotifyCore
import Runtime
import StoriesCore
import WireClient
import XCTest

/// Every service runs in-process from its core library, and stops gracefully.
final class InProcessTests: XCTestCase {
    func testEveryServiceRunsInProcessAndStopsWhenAsked() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let prefix = "t" + UUID().uuidString.prefix(8).lowercased() + "-"
        let started = Date()
        let auth = try InProcessService(AuthService.makeApp, settings: ["DATABASE_URL": database.url])
        let common = ["DATABASE_URL": database.url, "KAFKA_GROUP_PREFIX": prefix,
                      "AUTH_JWKS_URL": "http://127.0.0.1:\(auth.port)/v1/auth/jwks"]
        let stories = try InProcessService(StoriesService.makeApp, settings: common)
        let chat = try InProcessService(ChatService.makeApp, settings: common)
        let curation = try InProcessService(CurationService.makeApp, settings: common)
        let dispatch = try InProcessService(DispatchService.makeApp, settings: common.merging([
            "FLEET_FEED": "off", "OPERATOR_TOKEN": "op-" + UUID().uuidString + UUID().uuidString]) { $1 })
        let notify = try InProcessService(NotifyService.makeApp, settings: common)
        print("six services ready in-process in \(Int(Date().timeIntervalSince(started) * 1000)) ms")

        let person = try APIClient(port: auth.port).signup()
        XCTAssertEqual(person.status, 201)
        let group = try APIClient(port: stories.port).post("/v1/groups", ["name": "In process"], token: person.accessToken)
        XCTAssertEqual(group.status, 201, String(decoding: group.body, as: UTF8.self))
        let courier = try APIClient(port: dispatch.port).post("/v1/couriers/me", ["vehicle": "bike", "capacity": 1],
                                                              token: person.accessToken)
        XCTAssertEqual(courier.status, 201, String(decoding: courier.body, as: UTF8.self))

        // The event catalogue (docs/events.md) names what each service reads; dispatch's fleet consumer is off here.
        var read: [String: Set<EventCatalogue.Reader>] = [:]
        for service in [auth, stories, chat, dispatch, curation, notify] {
            for (topic, reader) in service.app.readers { read[topic, default: []].insert(reader) }
        }
        XCTAssertTrue(Set(read.keys).isSubset(of: Set(EventCatalogue.topics.map(\.name))), "a topic read that the catalogue lacks")
        for topic in EventCatalogue.topics {
            let expected = Set(topic.readers).subtracting([EventCatalogue.Reader(service: "dispatch", name: "fleet", isFeed: false)])
            XCTAssertEqual(read[topic.name] ?? [], expected, "EventCatalogue's readers of \(topic.name) are not what the services read")
        }

        // Every route documents what it takes and what it answers, and the scheme that guards it.
        for service in [auth, stories, chat, dispatch, curation, notify] {
            try assertEveryRouteIsDescribed(service)
        }

        // Not mid-join: a member stopped while Tansu holds its join can hang later joins of other tests.
        for service in [stories, chat, curation, notify] where !service.waitForConsumers() {
            print("\(service.app.config.service)'s consumers were not assigned in 30 s; stopping it anyway")
        }
        for service in [notify, curation, dispatch, chat, stories, auth] {
            let port = service.port
            XCTAssertTrue(service.stop(), "\(service.app.config.service) returns from run when stopped")
            XCTAssertThrowsError(try HTTPClient(port: port, timeout: 1).request("GET", "/healthz"), "its port is closed")
        }
    }
}

/// Fails on any operation of `service`'s OpenAPI document whose success response has no schema (a body that is not
/// JSON is named here), on a body-taking method without a schema where the route reads one, and on a route whose
/// security is not the schemes it enforces (event streams also take a stream ticket).
func assertEveryRouteIsDescribed(_ service: InProcessService, file: StaticString = #filePath, line: UInt = #line) throws {
    let images: Set<String> = ["GET /v1/media/{id}", "GET /v1/media/avatars/{userId}/{id}", "GET /v1/chat/media/{id}", "GET /v1/dispatch/media/{id}",
                               "GET /v1/operator/couriers/{userId}/identity-photo"]
    // Exports are JSON of no fixed shape: each service's part of a person's archive, and the archive.
    let notJSON: Set<String> = images.union(["GET /metrics", "GET /v1/parcels/{id}/events", "GET /v1/rooms/{id}/events", "GET /v1/operator/fleet/events",
                                             "GET /v1/users/me/export", "GET /v1/internal/users/{id}/export",
                                             // Accepted with nothing to say, and the page the verification mail links to.
                                             "POST /v1/auth/password-reset", "POST /v1/users/me/email-verification",
                                             "GET /v1/auth/email-verification",
                                             // The pages a mail's unsubscribe link opens and posts.
                                             "GET /v1/notifications/unsubscribe", "POST /v1/notifications/unsubscribe",
                                             // The pages a mail's reset and verification links open (HTML for a browser).
                                             "GET /reset-password", "POST /reset-password", "GET /verify-email"])
    let noBody: Set<String> = ["POST /v1/auth/logout", "POST /v1/auth/stream-tickets", "POST /v1/groups/{id}/invite-code", "POST /v1/media", "POST /v1/chat/media",
                               "POST /v1/dispatch/media",
                               "POST /v1/rooms/{id}/invite-code", "POST /v1/rooms/{id}/typing", "PUT /v1/videos/{id}/like",
                               "POST /v1/parcels/{id}/accept", "POST /v1/parcels/{id}/decline", "POST /v1/parcels/{id}/pickup",
                               "POST /v1/parcels/{id}/cancel", "PUT /v1/users/me/blocks/{userId}",
                               "PUT /v1/users/me/hidden-authors/{userId}", "POST /v1/users/me/email-verification",
                               "POST /v1/notifications/unsubscribe", "PUT /v1/operator/centres/{id}/staff/{userId}", "PUT /v1/habits/{id}/shares/{groupId}",
                               // A browser's form (application/x-www-form-urlencoded), read by the page's own parser.
                               "POST /reset-password",
                               "POST /v1/notifications/read", "POST /v1/notifications/{id}/read"]
    let publicRoutes: Set<String> = ["GET /healthz", "GET /readyz", "GET /metrics", "GET /openapi.json", "GET /v1/auth/jwks",
                                     "POST /v1/auth/signup", "POST /v1/auth/login", "POST /v1/auth/refresh",
                                     "POST /v1/auth/password-reset", "POST /v1/auth/password-reset/confirm",
                                     "POST /v1/auth/email-verification", "GET /v1/auth/email-verification",
                                     "GET /v1/notifications/unsubscribe", "POST /v1/notifications/unsubscribe",
                                     "GET /reset-password", "POST /reset-password", "GET /verify-email",
                                     // Stripe's events: signed, the signature checked by the route.
                                     "POST /v1/payments/stripe/webhook",
                                     "GET /v1/subjects", "GET /v1/subjects/{id}/topics", "GET /v1/topics/{id}/videos", "GET /v1/videos/{id}",
                                     "GET /v1/videos/{id}/recommendations", "GET /v1/search", "GET /v1/videos/{id}/comments"]
    // A POST that creates (201) takes an Idempotency-Key, unless sending it again is safe without one: a person's
    // second report of a thing updates the first; registering as a courier again updates; the same push
    // subscription or device token again replaces it; a stream ticket is used once, so a retry takes another.
    let retrySafe: Set<String> = ["POST /v1/users/{id}/reports", "POST /v1/stories/{id}/reports", "POST /v1/messages/{id}/reports",
                                  "POST /v1/comments/{id}/reports", "POST /v1/couriers/me", "POST /v1/push/subscriptions",
                                  "POST /v1/push/devices",
                                  "POST /v1/auth/stream-tickets"]
    let api = APIClient(port: service.port)
    let doc = try api.get("/openapi.json").json
    let paths = doc["paths"] as? [String: [String: Any]] ?? [:]
    XCTAssertFalse(paths.isEmpty, file: file, line: line)
    // The conventions: `createdAt` and `updatedAt` on every resource.
    for properties in objectProperties(doc) where properties.keys.contains("createdAt") {
        XCTAssertTrue(properties.keys.contains("updatedAt"),
                      "\(service.app.config.service): a resource with createdAt and no updatedAt: \(properties.keys.sorted())", file: file, line: line)
    }
    for (path, operations) in paths {
        for (method, value) in operations {
            let op = value as? [String: Any] ?? [:]
            let name = "\(method.uppercased()) \(path)"
            let responses = op["responses"] as? [String: [String: Any]] ?? [:]
            for (status, response) in responses where status.hasPrefix("2") && status != "204" && !notJSON.contains(name) {
                let schema = ((response["content"] as? [String: Any])?["application/json"] as? [String: Any])?["schema"]
                XCTAssertNotNil(schema, "\(service.app.config.service): \(name) \(status) has no response schema", file: file, line: line)
            }
            for (status, response) in responses where status == "429" || status == "503" {
                XCTAssertNotNil((response["headers"] as? [String: Any])?["Retry-After"], "\(service.app.config.service): \(name) \(status) says when to try again",
                                file: file, line: line)
            }
            let takesKey = (op["parameters"] as? [[String: Any]] ?? []).map { resolve($0, in: doc) }
                .contains { $0["in"] as? String == "header" && $0["name"] as? String == "Idempotency-Key" }
            if method == "post" && responses["201"] != nil && !retrySafe.contains(name) {
                XCTAssertTrue(takesKey, "\(service.app.config.service): \(name) creates and documents no Idempotency-Key", file: file, line: line)
            }
            if takesKey {
                let replays = responses.filter { $0.key.hasPrefix("2") }.compactMap { ($0.value["headers"] as? [String: [String: Any]])?["Idempotent-Replayed"] }
                XCTAssertNotNil(replays.first.map { resolve($0, in: doc)["schema"] } ?? nil,
                                "\(service.app.config.service): \(name) documents its replays", file: file, line: line)
            }
            if ["POST", "PUT", "PATCH"].contains(method.uppercased()) && !noBody.contains(name) {
                XCTAssertNotNil(op["requestBody"], "\(service.app.config.service): \(name) has no body schema", file: file, line: line)
            }
            let schemes = (op["security"] as? [[String: Any]])?.flatMap(\.keys) ?? []
            let expected = publicRoutes.contains(name) ? [] : path.hasPrefix("/v1/operator/") ? ["operator"]
                : path.hasPrefix("/v1/internal/") ? ["service"] : path.hasSuffix("/events") ? ["bearer", "streamTicket"]
                : images.contains(name) ? ["bearer", "signedURL"] : ["bearer"]
            XCTAssertEqual(schemes, expected, "\(service.app.config.service): \(name)", file: file, line: line)
        }
    }
}

/// The `properties` of every object schema anywhere in `value`.
private func objectProperties(_ value: Any) -> [[String: Any]] {
    if let array = value as? [Any] { return array.flatMap(objectProperties) }
    guard let object = value as? [String: Any] else { return [] }
    return ((object["properties"] as? [String: Any]).map { [$0] } ?? []) + object.values.flatMap(objectProperties)
}

/// `object`, or what its `$ref` (`#/components/...`) names in `doc`.
private func resolve(_ object: [String: Any], in doc: [String: Any]) -> [String: Any] {
    guard let ref = object["$ref"] as? String, ref.hasPrefix("#/") else { return object }
    return ref.dropFirst(2).split(separator: "/").reduce(doc as Any?) { ($0 as? [String: Any])?[String($1)] } as? [String: Any] ?? [:]
}

/// SIGTERM, as an orchestrator sends it: under load, and while the database is not up yet.
final class ShutdownTests: StoriesTestCase {
    func testSIGTERMUnderLoadCutsOffNoRequestAndDrainsTheOutbox() throws {
        let admin = try person()
        let groupId = try group(admin)["id"] as? String ?? ""
        let port = stories.port
        let token = admin.token
        let outcomes = LockedBox<[(text: String, status: Int?, error: HTTPClientError?)]>()
        outcomes.set([])
        let writing = Gate()
        let writers = (0..<8).map { w in
            Thread {
                var n = 0
                while true {
                    n += 1
                    let text = "shutdown \(w)-\(n)"
                    let body = Array((try? JSONSerialization.data(withJSONObject: ["text": text, "groupIds": [groupId]])) ?? Data())
                    do {
                        // A connection of its own per request: no keep-alive retry can hide a cut-off.
                        let r = try HTTPClient(port: port, timeout: 30).request("POST", "/v1/stories", headers: [
                            "Authorization": "Bearer \(token)", "Content-Type": "application/json"], body: body)
                        outcomes.update { $0 = ($0 ?? []) + [(text, r.status, nil)] }
                        if n == 20 { writing.open() }
                    } catch let error as HTTPClientError {
                        if case .cannotConnect = error { return }  // the listener is gone: the writer is done
                        outcomes.update { $0 = ($0 ?? []) + [(text, nil, error)] }
                    } catch {
                        return
                    }
                }
            }
        }
        writers.forEach { $0.start() }
        XCTAssertTrue(writing.wait(until: Date().addingTimeInterval(30)), "the writers are writing")
        let stopping = Date()
        XCTAssertEqual(stories.stop(timeout: 20), 0, "exit status 0")
        let took = Date().timeIntervalSince(stopping)
        print("stopped under load in \(Int(took * 1000)) ms")
        XCTAssertLessThan(took, 15 + 1, "within SHUTDOWN_TIMEOUT_SECONDS (15)")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) { writers.allSatisfy(\.isFinished) })

        let all = outcomes.get() ?? []
        let acknowledged = all.filter { $0.status == 201 }
        XCTAssertGreaterThan(acknowledged.count, 20)
        XCTAssertEqual(all.filter { $0.status != nil && $0.status != 201 }.map(\.status), [], "no request was refused or failed")
        let db = try database.connect()
        let stored = Set(try db.rows("SELECT text FROM stories.stories").map { try $0["text", as: String.self] })
        for a in acknowledged { XCTAssertTrue(stored.contains(a.text), "acknowledged \(a.text) is stored") }
        for cut in all where cut.error != nil {
            XCTAssertFalse(stored.contains(cut.text), "\(cut.text) got no answer (\(cut.error!)), so it must not have been written")
        }
        XCTAssertEqual(try count("outbox", "topic = 'story.created'"), stored.count, "one event per stored story")
        XCTAssertTrue(stories.log.contains("\"msg\":\"outbox drained\""), stories.log.suffix(2000).description)
        // Drained before exiting: every stored story's event is on the broker already, with no relay running now.
        let ids = Set(try db.rows("SELECT id::text AS id FROM stories.stories").map { try $0["id", as: String.self] })
        let probe = try EventProbe(topics: ["story.created"])
        var published = Set<String>()
        _ = TestEnvironment.waitUntil(timeout: 20) {
            probe.drain(0.2)
            published = Set(probe.seen.compactMap { $0.data("storyId") as? String })
            return ids.isSubset(of: published)
        }
        XCTAssertEqual(ids.subtracting(published), [], "the relay published every stored story's event before exiting")
    }
}

final class StartupTests: XCTestCase {
    func testSIGTERMWhileWaitingForTheDatabaseEndsTheProcessAtOnce() throws {
        let nowhere = TestEnvironment.freePort()
        let service = try ServiceProcess("stories", environment: [
            "DATABASE_URL": "postgres://postgres@127.0.0.1:\(nowhere)/backend",
            "AUTH_JWKS_URL": "http://127.0.0.1:\(TestEnvironment.freePort())/v1/auth/jwks"])
        let api = APIClient(port: service.port)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) { (try? api.get("/healthz"))?.status == 200 },
                      "alive while the database is not up:\n\(service.log)")
        let ready = try api.get("/readyz")
        XCTAssertEqual(ready.status, 503)
        XCTAssertEqual(ready.headers["retry-after"], "2")
        let early = try api.get("/v1/groups")
        XCTAssertEqual(early.status, 503, "the API waits for readiness")
        XCTAssertEqual(early.errorCode, "unavailable")
        XCTAssertTrue(service.log.contains("waiting for the database"))
        // Not serving yet is not a failure: every client of a restarting service would log errors otherwise.
        XCTAssertFalse(service.log.contains(#""msg":"request failed""#), service.log)

        let signalled = Date()
        XCTAssertEqual(service.stop(timeout: 5), 0)
        let took = Date().timeIntervalSince(signalled)
        print("stopped during the database wait in \(Int(took * 1000)) ms")
        XCTAssertLessThan(took, 1.0)
    }

    /// libpq's `connect_timeout` starts after the host's name is looked up, and a name server that takes a query and
    /// never answers (podman's, while it reloads for a neighbouring container) held a connection's caller for the
    /// resolver's retries: 10 s here, which outlasted a container's stop.
    func testADatabaseHostWhoseNameServerDoesNotAnswerIsGivenUpOnWithinTheConnectTimeout() throws {
        let silent = try SilentNameServer()
        let resolver = FileManager.default.temporaryDirectory.appendingPathComponent("resolv-\(UUID().uuidString).conf")
        try "nameserver \(silent.address)\noptions timeout:5 attempts:2\n".write(to: resolver, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: resolver) }
        let started = Date()
        let service = try ServiceProcess("stories", environment: [
            "DATABASE_URL": "postgres://postgres@db.example.net:5432/backend",
            "AUTH_JWKS_URL": "http://127.0.0.1:\(TestEnvironment.freePort())/v1/auth/jwks"], resolver: resolver)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 9) { service.log.contains("waiting for the database") }, service.log)
        let waited = Date().timeIntervalSince(started)
        print("the database's name was given up on after \(Int(waited * 1000)) ms")
        XCTAssertLessThan(waited, 6, "the connect timeout is 3 s; the resolver alone retries for 10")
        XCTAssertTrue(service.log.contains("could not translate host name \\\"db.example.net\\\" to address: no answer within 3 s"), service.log)
        XCTAssertEqual(try APIClient(port: service.port).get("/readyz").status, 503)

        // The next attempt, a second after the first gave up, waits on the same lookup, whose resolver asks again 5 s
        // after it first asked (`timeout:5`): once that query is here, the service is waiting on a lookup.
        silent.drain()
        XCTAssertTrue(silent.receivesQuery(within: 5), "the resolver asked once more")
        let signalled = Date()
        XCTAssertEqual(service.stop(timeout: 10), 0)
        let took = Date().timeIntervalSince(signalled)
        print("stopped during a lookup in \(Int(took * 1000)) ms")
        XCTAssertLessThan(took, 3, "a lookup in progress is given up on within the connect timeout")
    }

    func testABadSettingStopsTheProcessAtOnceWithOneLineNamingIt() throws {
        for (service, variable, value) in [("dispatch", "OFFER_TIMEOUT_SECONDS", "soon"), ("stories", "JWT_PUBLIC_KEY", "not-a-key"),
                                           ("auth", "SHUTDOWN_TIMEOUT_SECONDS", "0"), ("stories", "NEWSLETTER_SCAN_SECONDS", "-1"),
                                           ("dispatch", "MEDIA_URL_KEYS", "k1:short"), ("stories", "PUBLIC_BASE_URL", "ftp://x"),
                                           ("notify", "VAPID_PRIVATE_KEY", "not-a-key"), ("notify", "PUSH_ALLOWED_ORIGINS", "ftp://push.example.com"),
                                           ("notify", "STORIES_URL", "stories:8082"), ("dispatch", "STRIPE_SECRET_KEY", "pk_live_public"),
                                           ("dispatch", "STRIPE_WEBHOOK_SECRET", "secret"), ("dispatch", "STRIPE_API_URL", "api.stripe.com")] {
            let started = Date()
            // An unreachable database: the check must come before any wait for it.
            let process = try ServiceProcess(service, environment: [
                "DATABASE_URL": "postgres://postgres@127.0.0.1:\(TestEnvironment.freePort())/backend", variable: value])
            process.process.waitUntilExit()
            let took = Date().timeIntervalSince(started)
            print("\(service) refused \(variable) in \(Int(took * 1000)) ms")
            XCTAssertEqual(process.process.terminationStatus, 78, "\(service) \(variable)")
            XCTAssertLessThan(took, 1.0)
            let lines = process.log.split(separator: "\n")
            XCTAssertEqual(lines.count, 1, process.log)
            let line = (try? JSONSerialization.jsonObject(with: Data((lines.first ?? "").utf8))) as? [String: Any]
            XCTAssertEqual(line?["level"] as? String, "error")
            XCTAssertTrue((line?["msg"] as? String ?? "").contains(variable), process.log)
        }
    }
}

/// A name server on 127.0.0.77:53 that takes every query and answers none.
private final class SilentNameServer {
    let address = "127.0.0.77"
    private let socket: Int32

    init() throws {
        socket = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var name = sockaddr_in()
        name.sin_family = sa_family_t(AF_INET)
        name.sin_port = in_port_t(53).bigEndian
        inet_pton(AF_INET, address, &name.sin_addr)
        let bound = withUnsafePointer(to: &name) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard socket >= 0, bound == 0 else {  // (port 53 needs root, as CI and the stack run)
            let error = POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            close(socket)
            throw error
        }
    }

    /// Whether a query comes within `seconds` (it is read, and goes unanswered).
    func receivesQuery(within seconds: TimeInterval) -> Bool {
        var ready = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        guard poll(&ready, 1, Int32(seconds * 1000)) == 1 else { return false }
        var query = [UInt8](repeating: 0, count: 512)
        return recv(socket, &query, query.count, 0) >= 0
    }

    /// Reads the queries that came so far.
    func drain() { while receivesQuery(within: 0) {} }

    deinit { close(socket) }
}
