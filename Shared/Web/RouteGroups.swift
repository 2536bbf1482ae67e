import Foundation
import HTTP
import Postgres

/// A request as a handler sees it: who called (what the group's `Access` gave), the request's id and its path
/// parameters, typed.
public struct Context<Who: Sendable>: Sendable {
    public let request: Request
    public let caller: Who
    public init(request: Request, caller: Who) { self.request = request; self.caller = caller }
    public var requestId: String { request.requestId }
    public var parameters: PathParameters { PathParameters(request: request) }
}

/// A route's path parameters. A value that is not of its type is a 404, as a path that names nothing is: an outsider
/// learns nothing from the difference.
public struct PathParameters: Sendable {
    let request: Request

    public func require(_ name: String) throws -> String {
        let value = request.parameter(name)
        guard !value.isEmpty else { throw HTTPError.notFound() }
        return value
    }

    public func require(_ name: String, as type: UUID.Type) throws -> UUID { try Validate.pathID(request, name) }

    public func require<T: LosslessStringConvertible>(_ name: String, as type: T.Type) throws -> T {
        guard let value = T(request.parameter(name)) else { throw HTTPError.notFound() }
        return value
    }
}

/// Who may call a group's routes, and what their handlers receive of the caller: the OpenAPI `security` the routes
/// list, a check of the head before a body is read, and the check of the credentials themselves.
public struct Access<Who: Sendable>: Sendable {
    let security: [String]
    let checkHead: (@Sendable (Request) -> HTTPError?)?
    let authenticate: @Sendable (Request) throws -> Who
    /// What happens to an answer once made (a user's event stream ends when their session is revoked).
    let answered: @Sendable (Response, Who) -> Void
    /// Whose keys a retry's `Idempotency-Key` is looked up among.
    let scope: @Sendable (Who) -> String

    /// An access rule of another module's (a stream's user or ticket): `security` the schemes it lists, `checkHead`
    /// what it checks before a body is read, `authenticate` the check itself (a 401 when it fails).
    public init(security: [String], checkHead: (@Sendable (Request) -> HTTPError?)?,
                authenticate: @escaping @Sendable (Request) throws -> Who,
                answered: @escaping @Sendable (Response, Who) -> Void, scope: @escaping @Sendable (Who) -> String) {
        self.security = security; self.checkHead = checkHead; self.authenticate = authenticate; self.answered = answered
        self.scope = scope
    }
}

extension Access where Who == Void {
    /// Anyone.
    public static var everyone: Access<Void> {
        Access(security: [], checkHead: nil, authenticate: { _ in }, answered: { _, _ in }, scope: { _ in "anonymous" })
    }

    /// A trusted caller holding `credential` (the operator token, the service token); 401 without it.
    public static func trusted(_ credential: SharedSecret) -> Access<Void> { trusted(anyOf: [credential]) }

    /// A trusted caller holding any of `credentials` that are set (a fleet gateway's token, or the operator's); 401
    /// without one, 404 while none is set.
    public static func trusted(anyOf credentials: [SharedSecret]) -> Access<Void> {
        let set = credentials.filter(\.isEnabled)
        let check: @Sendable (Request) throws -> Void = { request in
            var refusal: any Error = HTTPError.notFound()
            for credential in set {
                do { return try credential.check(request) } catch { refusal = error }
            }
            throw refusal
        }
        return Access(security: set.isEmpty ? credentials.prefix(1).map(\.scheme) : set.map(\.scheme), checkHead: Router.headCheck(check),
                      authenticate: check, answered: { _, _ in }, scope: { [scope = credentials.first?.scheme ?? "trusted"] _ in scope })
    }
}

extension Access where Who == Caller {
    /// A user with a valid access token (401 without one); an event stream it is answered with ends when the
    /// caller's session is revoked.
    public static func user(_ auth: any Authenticator) -> Access<Caller> {
        Access(security: ["bearer"], checkHead: Router.headCheck(auth.checkHead), authenticate: auth.authenticate,
               answered: { answer, caller in if let stream = answer.stream { auth.end(stream, whenRevoked: caller) } },
               scope: { $0.userId.lowercased })
    }
}

/// The routes that share an access rule (and a path prefix): each declared in one call with everything it is, its
/// body, its answers, its query and headers, whether a retry with the same `Idempotency-Key` answers as the first.
///
///     r.group("/v1/rooms", .user(auth)) { rooms in
///         rooms.add("POST", "", "Create a team room", body: CreateRoomBody.self, answers: (201, RoomView.shape),
///                    idempotent: h.idempotency) { context, body, c in ... }
///         rooms.add("GET", "/{id}", "A room with its members", answers: (200, RoomView.shape)) { context in
///             let id = try context.parameters.require("id", as: UUID.self) ...
///         }
///     }
public struct RouteGroup<Who: Sendable> {
    fileprivate var router: Router
    let prefix: String
    let access: Access<Who>

    /// Documentation that goes with a route beyond its main answer.
    public struct Also: Sendable {
        let status: Int, contentType: String?, schema: String?, description: String?, headers: [String: String]
        let refusal: Bool
        /// Another answer (a replay's 200, an image's 304).
        public static func answer(_ status: Int, contentType: String? = "application/json", schema: Schema? = nil,
                                  description: String? = nil, headers: [String: String] = [:]) -> Also {
            Also(status: status, contentType: contentType, schema: schema?.jsonText, description: description, headers: headers,
                 refusal: false)
        }
        /// Another answer whose schema is JSON text already (the conventions' error body, `OpenAPI.errorSchema`).
        public static func answer(_ status: Int, contentType: String? = "application/json", schemaText: String,
                                  description: String? = nil, headers: [String: String] = [:]) -> Also {
            Also(status: status, contentType: contentType, schema: schemaText, description: description, headers: headers,
                 refusal: false)
        }
        /// A refusal its shape does not imply (a limit on a read), or more said of one it does.
        public static func refusal(_ status: Int, _ description: String) -> Also {
            Also(status: status, contentType: nil, schema: nil, description: description, headers: [:], refusal: true)
        }
    }

    /// A route without a body.
    public mutating func add(_ method: String, _ path: String, _ summary: String, answers: (Int, Schema?),
                             query: [QueryParameter] = [], headers: [QueryParameter] = [], also: [Also] = [],
                             bodyLimit: Int = defaultBodyLimit, idempotent: Bool = false,
                             _ handler: @escaping @Sendable (Context<Who>) throws -> Response) {
        let access = access
        router.add(method, prefix + path, summary: summary, security: access.security, bodyLimit: bodyLimit,
                   response: answers, checkHead: access.checkHead, credentials: access.authenticate) { request, who in
            let answer = try handler(Context(request: request, caller: who))
            access.answered(answer, who)
            return answer
        }
        document(method, prefix + path, query: query, headers: headers, also: also, idempotent: idempotent)
    }

    /// A route that takes a body (decoded and validated after the credentials and the query).
    public mutating func add<Body: RequestBody>(_ method: String, _ path: String, _ summary: String, body: Body.Type,
                                                answers: (Int, Schema?), query: [QueryParameter] = [], headers: [QueryParameter] = [],
                                                also: [Also] = [], idempotent: Bool = false,
                                                _ handler: @escaping @Sendable (Context<Who>, Body) throws -> Response) {
        router.add(method, prefix + path, summary: summary, security: access.security, body: Body.self, response: answers,
                   checkHead: access.checkHead, credentials: access.authenticate) { request, who, body in
            try handler(Context(request: request, caller: who), body)
        }
        document(method, prefix + path, query: query, headers: headers, also: also, idempotent: idempotent)
    }

    /// A change a client may send again with an `Idempotency-Key`: the route runs the handler in the transaction
    /// `idempotency` opens and keeps the answer it made there, and a retry with the same key is answered with it, byte
    /// for byte, without running the handler. (A handler whose answer is made after its transaction, or that keeps a
    /// refusal's count, calls `Idempotency` itself and its route says `idempotent: true`.)
    public mutating func add<Body: RequestBody>(_ method: String, _ path: String, _ summary: String, body: Body.Type,
                                                answers: (Int, Schema?), query: [QueryParameter] = [], also: [Also] = [],
                                                idempotent idempotency: Idempotency,
                                                _ handler: @escaping @Sendable (Context<Who>, Body, Connection) throws -> Response) {
        let scope = access.scope
        add(method, path, summary, body: Body.self, answers: answers, query: query, also: also, idempotent: true) { context, body in
            try idempotency.run(context.request, caller: scope(context.caller)) { c in try handler(context, body, c) }
        }
    }

    /// The same for a change without a body (a parcel's accept, a cancel).
    public mutating func add(_ method: String, _ path: String, _ summary: String, answers: (Int, Schema?),
                             query: [QueryParameter] = [], also: [Also] = [], idempotent idempotency: Idempotency,
                             _ handler: @escaping @Sendable (Context<Who>, Connection) throws -> Response) {
        let scope = access.scope
        add(method, path, summary, answers: answers, query: query, also: also, idempotent: true) { context in
            try idempotency.run(context.request, caller: scope(context.caller)) { c in try handler(context, c) }
        }
    }

    private mutating func document(_ method: String, _ pattern: String, query: [QueryParameter], headers: [QueryParameter],
                                   also: [Also], idempotent: Bool) {
        if !headers.isEmpty { router.header(method, pattern, headers) }
        if !query.isEmpty { router.query(method, pattern, query) }
        for a in also {
            if a.refusal {
                router.alsoRefuses(method, pattern, a.status, a.description ?? "")
            } else {
                router.alsoAnswers(method, pattern, a.status, contentType: a.contentType, schema: a.schema,
                                   description: a.description, headers: a.headers)
            }
        }
        if idempotent { router.idempotent(method, [pattern]) }
    }
}

extension Router {
    /// Declares routes that `access` guards, each with its whole path.
    public mutating func group<Who>(_ access: Access<Who>, _ declare: (inout RouteGroup<Who>) -> Void) {
        group("", access, declare)
    }

    /// Declares the routes under `prefix` that `access` guards.
    public mutating func group<Who>(_ prefix: String, _ access: Access<Who>, _ declare: (inout RouteGroup<Who>) -> Void) {
        var group = RouteGroup(router: self, prefix: prefix, access: access)
        declare(&group)
        self = group.router
    }
}
