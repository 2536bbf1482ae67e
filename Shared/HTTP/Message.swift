import Foundation

/// An HTTP request as handlers see it: no C types, body fully read and bounded by the route's limit.
public struct Request: Sendable {
    /// `GET`, `POST`, ...
    public var method: String
    /// The path without the query string, e.g. `/v1/users/me`.
    public var path: String
    /// Query parameters (decoded); a repeated name keeps its first value.
    public var query: [String: String]
    /// Headers by lower-cased name.
    public var headers: [String: String]
    /// The raw body.
    public var body: [UInt8]
    /// The numeric address of the client.
    public var remoteAddress: String
    /// Values of `{name}` segments of the matched route.
    public var pathParameters: [String: String] = [:]
    /// The matched route pattern (`/v1/groups/{id}`), for logs and metrics.
    public var route: String = ""
    /// The query parameters the matched route declares, for the check of their values.
    public var declaredQuery: [QueryParameter] = []
    /// Whether the matched route documents `Idempotency-Key` (`Router.idempotent`).
    public var idempotentRoute = false
    /// The request id (from `X-Request-Id`, or generated).
    public var requestId: String = ""

    public init(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:],
                body: [UInt8] = [], remoteAddress: String = "127.0.0.1") {
        self.method = method; self.path = path; self.query = query
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a })
        self.body = body; self.remoteAddress = remoteAddress
    }

    /// A header by case-insensitive name.
    public func header(_ name: String) -> String? {
        var bytes = name  // names are mostly written in lower case already: looked at in place, not lower-cased again
        let lower = bytes.withUTF8 { !$0.contains(where: Parser.isUpper) }
        return headers[lower ? name : name.lowercased()]
    }

    /// A header that says something: nil when absent or empty (an empty `Last-Event-ID` names no event).
    public func nonEmptyHeader(_ name: String) -> String? { header(name).flatMap { $0.isEmpty ? nil : $0 } }

    /// A path parameter by name (empty when the route has none of that name).
    public func parameter(_ name: String) -> String { pathParameters[name] ?? "" }
}

/// An HTTP response: status, headers, body bytes.
public struct Response: Sendable {
    /// The status code.
    public var status: Int
    /// Headers in order.
    public var headers: [(String, String)]
    /// The body.
    public var body: [UInt8]
    /// For a Server-Sent Events response: where the body comes from, instead of `body`.
    public var stream: EventStream?

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status; self.headers = headers; self.body = body
    }

    /// A plain-text response.
    public static func text(_ text: String, status: Int = 200, contentType: String = "text/plain; charset=utf-8") -> Response {
        Response(status: status, headers: [("Content-Type", contentType)], body: Array(text.utf8))
    }

    /// 204 No Content.
    public static var noContent: Response { Response(status: 204) }

    /// The first header of that name, case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }
}

/// An error that knows its HTTP status and its conventions' code; it renders its own response.
public struct HTTPError: Error, Sendable, CustomStringConvertible {
    /// The status code.
    public var status: Int
    /// The snake_case code from the conventions.
    public var code: String
    /// A human sentence, safe to show to clients.
    public var message: String
    /// The JSON path of the offending field, when there is one.
    public var field: String?
    /// Extra headers, e.g. `Retry-After`.
    public var headers: [(String, String)] = []

    public init(_ status: Int, _ code: String, _ message: String, field: String? = nil, headers: [(String, String)] = []) {
        self.status = status; self.code = code; self.message = message; self.field = field; self.headers = headers
    }

    public var description: String { "HTTPError(\(status) \(code): \(message))" }

    /// The conventions' error body `{"error": {"code", "message", "field"?}}`.
    public var response: Response {
        var error: [String: String] = ["code": code, "message": message]
        if let field { error["field"] = field }
        let body = (try? JSONSerialization.data(withJSONObject: ["error": error], options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return Response(status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(body))
    }

    // MARK: The conventions' errors

    public static func invalidJSON(_ message: String = "The body is not valid JSON.") -> HTTPError {
        HTTPError(400, "invalid_json", message)
    }
    public static func validation(_ message: String, field: String? = nil) -> HTTPError {
        HTTPError(400, "validation_failed", message, field: field)
    }
    public static func unauthenticated(_ message: String = "A valid access token is required.") -> HTTPError {
        HTTPError(401, "unauthenticated", message, headers: [("WWW-Authenticate", "Bearer")])
    }
    public static func forbidden(_ message: String = "You may not do this.") -> HTTPError {
        HTTPError(403, "forbidden", message)
    }
    public static func notFound(_ message: String = "Not found.") -> HTTPError {
        HTTPError(404, "not_found", message)
    }
    public static func conflict(_ message: String, field: String? = nil) -> HTTPError {
        HTTPError(409, "conflict", message, field: field)
    }
    public static func payloadTooLarge(limit: Int) -> HTTPError {
        HTTPError(413, "payload_too_large", "The body is larger than \(limit) bytes.")
    }
    public static func unsupportedMediaType(_ message: String) -> HTTPError {
        HTTPError(415, "unsupported_media_type", message)
    }
    public static func rateLimited(retryAfter seconds: Int) -> HTTPError {
        HTTPError(429, "rate_limited", "Too many attempts; try again later.", headers: [("Retry-After", String(max(1, seconds)))])
    }
    public static func unavailable(retryAfter seconds: Int = 1) -> HTTPError {
        HTTPError(503, "unavailable", "The service is temporarily unavailable; try again shortly.",
                  headers: [("Retry-After", String(seconds))])
    }
    public static var internalError: HTTPError { HTTPError(500, "internal", "Something went wrong on our side.") }
}
