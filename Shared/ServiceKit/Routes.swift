import Foundation
import HTTP

/// The ways a service adds its routes. Each names what guards the route (nothing, a user's token, the operator
/// token: the wrapper that enforces it also sets the route's OpenAPI `security`) and, for a route that takes a
/// body, its `RequestBody` type: the wrapper decodes and validates it and hands it to the handler, and its schema
/// is the one the OpenAPI document shows. So what a route documents is what it does.
extension Router {
    // MARK: Public routes

    /// A public route that takes a body.
    public mutating func add<Body: RequestBody>(_ method: String, _ pattern: String, summary: String, body: Body.Type,
                                                response: (Int, String?), _ handler: @escaping @Sendable (Request, Body) throws -> Response) {
        add(method, pattern, summary: summary, request: Self.schemaText(Body.self), response: response) {
            try handler($0, try JSON.decodeBody($0, as: Body.self))
        }
    }

    // MARK: A user's access token

    /// A route for callers with a user's access token: `auth` checks it (401 without a valid one); listed under the
    /// `bearer` scheme. An event stream it answers with ends when the caller's session is revoked.
    public mutating func add(_ method: String, _ pattern: String, summary: String, bodyLimit: Int = defaultBodyLimit,
                             response: (Int, String?) = (200, nil), auth: any Authenticator,
                             _ handler: @escaping @Sendable (Request, Caller) throws -> Response) {
        add(method, pattern, summary: summary, security: ["bearer"], bodyLimit: bodyLimit, response: response,
            checkHead: Self.headCheck(auth.checkHead)) {
            let caller = try auth.authenticate($0)
            let response = try handler($0, caller)
            if let stream = response.stream { auth.end(stream, whenRevoked: caller) }
            return response
        }
    }

    /// A route for callers with a user's access token that takes a body (checked after the token).
    public mutating func add<Body: RequestBody>(_ method: String, _ pattern: String, summary: String, body: Body.Type,
                                                response: (Int, String?), auth: any Authenticator,
                                                _ handler: @escaping @Sendable (Request, Caller, Body) throws -> Response) {
        add(method, pattern, summary: summary, security: ["bearer"], request: Self.schemaText(Body.self), response: response,
            checkHead: Self.headCheck(auth.checkHead)) {
            let caller = try auth.authenticate($0)
            return try handler($0, caller, try JSON.decodeBody($0, as: Body.self))
        }
    }

    // MARK: Shared secrets (the operator token, the service token)

    /// A route for trusted callers holding `credential` (401 without it); listed under its security scheme.
    /// The caller adds such routes only when the credential is enabled.
    public mutating func add(_ method: String, _ pattern: String, summary: String, response: (Int, String?) = (200, nil),
                             trusted credential: SharedSecret, _ handler: @escaping @Sendable (Request) throws -> Response) {
        add(method, pattern, summary: summary, security: [credential.scheme], response: response,
            checkHead: Self.headCheck(credential.check)) {
            try credential.check($0)
            return try handler($0)
        }
    }

    /// A trusted caller's route that takes a body (checked after the token).
    public mutating func add<Body: RequestBody>(_ method: String, _ pattern: String, summary: String, body: Body.Type,
                                                response: (Int, String?), trusted credential: SharedSecret,
                                                _ handler: @escaping @Sendable (Request, Body) throws -> Response) {
        add(method, pattern, summary: summary, security: [credential.scheme], request: Self.schemaText(Body.self), response: response,
            checkHead: Self.headCheck(credential.check)) {
            try credential.check($0)
            return try handler($0, try JSON.decodeBody($0, as: Body.self))
        }
    }

    /// A credential check the server runs on the head, before it reads a body: a request that fails it is answered
    /// (401) and its connection closed, so nobody without credentials can make the service hold a body.
    static func headCheck(_ check: @escaping @Sendable (Request) throws -> Void) -> @Sendable (Request) -> HTTPError? {
        { request in
            do { try check(request); return nil } catch let error as HTTPError { return error } catch { return .unauthenticated() }
        }
    }

    /// The body's JSON Schema as the route keeps it.
    static func schemaText<Body: RequestBody>(_ type: Body.Type) -> String {
        let data = try? JSONSerialization.data(withJSONObject: Body.schema.jsonSchema, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data ?? Data(), as: UTF8.self)
    }
}
