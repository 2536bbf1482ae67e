import Foundation
import HTTP

/// The ways a service adds its routes. Each names what guards the route (nothing, a user's token, the operator
/// token: the wrapper that enforces it also sets the route's OpenAPI `security`), for a route that takes a body its
/// `RequestBody` type (the wrapper decodes and validates it and hands it to the handler), and the status and shape of
/// its answer (a view's `shape`; in debug builds every such answer is checked against it). The OpenAPI document shows
/// those same schemas. So what a route documents is what it does.
extension Router {
    // MARK: Public routes

    /// A public route.
    public mutating func add(_ method: String, _ pattern: String, summary: String, response: (Int, Schema?),
                             _ handler: @escaping @Sendable (Request) throws -> Response) {
        add(method, pattern, summary: summary, response: response, credentials: { _ in }) { request, _ in try handler(request) }
    }

    /// A public route that takes a body.
    public mutating func add<Body: RequestBody>(_ method: String, _ pattern: String, summary: String, body: Body.Type,
                                                response: (Int, Schema?), _ handler: @escaping @Sendable (Request, Body) throws -> Response) {
        add(method, pattern, summary: summary, body: Body.self, response: response, credentials: { _ in }) { try handler($0, $2) }
    }

    // MARK: A user's access token

    /// A route for callers with a user's access token: `auth` checks it (401 without a valid one); listed under the
    /// `bearer` scheme. An event stream it answers with ends when the caller's session is revoked.
    public mutating func add(_ method: String, _ pattern: String, summary: String, bodyLimit: Int = defaultBodyLimit,
                             response: (Int, Schema?) = (200, nil), auth: any Authenticator,
                             _ handler: @escaping @Sendable (Request, Caller) throws -> Response) {
        add(method, pattern, summary: summary, security: ["bearer"], bodyLimit: bodyLimit, response: response,
            checkHead: Self.headCheck(auth.checkHead), credentials: auth.authenticate) { request, caller in
            let answer = try handler(request, caller)
            if let stream = answer.stream { auth.end(stream, whenRevoked: caller) }
            return answer
        }
    }

    /// A route for callers with a user's access token that takes a body (checked after the token).
    public mutating func add<Body: RequestBody>(_ method: String, _ pattern: String, summary: String, body: Body.Type,
                                                response: (Int, Schema?), auth: any Authenticator,
                                                _ handler: @escaping @Sendable (Request, Caller, Body) throws -> Response) {
        add(method, pattern, summary: summary, security: ["bearer"], body: Body.self, response: response,
            checkHead: Self.headCheck(auth.checkHead), credentials: auth.authenticate, handler)
    }

    // MARK: Shared secrets (the operator token, the service token)

    /// A route for trusted callers holding `credential` (401 without it); listed under its security scheme.
    /// The caller adds such routes only when the credential is enabled.
    public mutating func add(_ method: String, _ pattern: String, summary: String, response: (Int, Schema?) = (200, nil),
                             trusted credential: SharedSecret, _ handler: @escaping @Sendable (Request) throws -> Response) {
        add(method, pattern, summary: summary, security: [credential.scheme], response: response,
            checkHead: Self.headCheck(credential.check), credentials: credential.check) { request, _ in try handler(request) }
    }

    /// A trusted caller's route that takes a body (checked after the token).
    public mutating func add<Body: RequestBody>(_ method: String, _ pattern: String, summary: String, body: Body.Type,
                                                response: (Int, Schema?), trusted credential: SharedSecret,
                                                _ handler: @escaping @Sendable (Request, Body) throws -> Response) {
        add(method, pattern, summary: summary, security: [credential.scheme], body: Body.self, response: response,
            checkHead: Self.headCheck(credential.check), credentials: credential.check) { try handler($0, $2) }
    }

    // MARK: The order every route keeps

    /// A route as every wrapper above adds it, in one order: the credentials (`credentials` checks them and gives what
    /// the handler receives: a `Caller`, or nothing), then the declared query parameters, then the handler, and in
    /// debug builds its answer against the declared one.
    public mutating func add<Credentials>(_ method: String, _ pattern: String, summary: String, security: [String] = [],
                                   bodyLimit: Int = defaultBodyLimit, request: String? = nil, response: (Int, Schema?),
                                   checkHead: (@Sendable (Request) -> HTTPError?)? = nil,
                                   credentials: @escaping @Sendable (Request) throws -> Credentials,
                                   _ handler: @escaping @Sendable (Request, Credentials) throws -> Response) {
        let route = "\(method) \(pattern)"
        add(method, pattern, summary: summary, security: security, bodyLimit: bodyLimit, request: request,
            answer: (response.0, response.1?.jsonText), checkHead: checkHead) { request in
            let granted = try credentials(request)
            try Self.checkQuery(request)
            #if DEBUG
            IdempotencyWitness.reset()
            #endif
            let answer = try handler(request, granted)
            response.1?.check(answer, status: response.0, route: route)
            #if DEBUG
            if request.idempotentRoute, request.header("idempotency-key") != nil, (200..<300).contains(answer.status) {
                precondition(IdempotencyWitness.seen, "\(route) documents Idempotency-Key but answered without going through Idempotency")
            }
            #endif
            return answer
        }
    }

    /// The same for a route that takes a body: decoded and validated after the credentials and the query.
    public mutating func add<Credentials, Body: RequestBody>(_ method: String, _ pattern: String, summary: String, security: [String] = [],
                                                      body: Body.Type, response: (Int, Schema?),
                                                      checkHead: (@Sendable (Request) -> HTTPError?)? = nil,
                                                      credentials: @escaping @Sendable (Request) throws -> Credentials,
                                                      _ handler: @escaping @Sendable (Request, Credentials, Body) throws -> Response) {
        add(method, pattern, summary: summary, security: security, request: Body.schema.jsonText, response: response,
            checkHead: checkHead, credentials: credentials) { request, granted in
            try handler(request, granted, try JSON.decodeBody(request, as: Body.self))
        }
    }

    /// A credential check the server runs on the head, before it reads a body: a request that fails it is answered
    /// (401) and its connection closed, so nobody without credentials can make the service hold a body.
    public static func headCheck(_ check: @escaping @Sendable (Request) throws -> Void) -> @Sendable (Request) -> HTTPError? {
        { request in
            do { try check(request); return nil } catch let error as HTTPError { return error } catch { return .unauthenticated() }
        }
    }

    /// The values of the query parameters and headers the route declares, each against its shape (400 naming the
    /// first that does not fit); run after the credentials, so that a caller without them learns nothing from a 400.
    static func checkQuery(_ request: Request) throws {
        for parameter in request.declaredQuery {
            let value = parameter.inHeader ? request.nonEmptyHeader(parameter.name) : request.query[parameter.name]
            if let value, let error = parameter.check(value) { throw error }
        }
    }
}

extension QueryParameter {
    /// A parameter whose value has `shape` (a whole number, a UUID, a time, one of some words, text), documented with
    /// it and checked by the kit before the handler runs; `default` is what its absence means, for the document.
    public init(_ name: String, _ shape: Schema, _ description: String, default value: String? = nil) {
        var schema = shape.jsonSchema
        if let value { schema["default"] = Int(value).map { $0 as Any } ?? value }
        self.init(name, schema: Schema.text(schema), description) { raw in
            let value: JSONValue
            switch shape {
            case .integer:
                // Digits as JSON writes a whole number: no `+`, no `1.0`, no `1e3`.
                let digits = raw.utf8.drop { $0 == UInt8(ascii: "-") }
                guard raw.utf8.count <= 19, !digits.isEmpty, digits.allSatisfy({ (48...57).contains($0) }), let n = Int(raw) else {
                    return .validation("\(name) must be \(shape.typeName).", field: name)
                }
                value = .number(Double(n))
            case .number:
                guard raw.utf8.count <= 32, raw.first != "+", let n = Double(raw), n.isFinite else {
                    return .validation("\(name) must be \(shape.typeName).", field: name)
                }
                value = .number(n)
            case .boolean:
                guard raw == "true" || raw == "false" else { return .validation("\(name) must be true or false.", field: name) }
                value = .bool(raw == "true")
            default:
                value = .string(raw)
            }
            do { _ = try shape.validate(value, path: name); return nil } catch let error as HTTPError { return error } catch {
                return .validation("\(name) is not valid.", field: name)
            }
        }
    }
}
