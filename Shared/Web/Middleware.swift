import Crypto
import Foundation
import HTTP
import Models
import Runtime
import Synchronization

/// One step of the request pipeline: it does its part around `next`, which runs the rest of the pipeline and the
/// route's handler. The kit's pipeline is request id → access log and metrics → errors → the route. Authentication
/// is not a pipeline step but the guard a route is added with (`add(..., auth:)`), because it hands the handler its
/// `Caller` and names the route's OpenAPI security.
public protocol Middleware: Sendable {
    func handle(_ request: Request, next: (Request) throws -> Response) throws -> Response
}

extension Array where Element == any Middleware {
    /// Runs `request` through every step, then `handler`.
    public func run(_ request: Request, _ handler: (Request) throws -> Response) throws -> Response {
        func step(_ i: Int, _ request: Request) throws -> Response {
            guard i < count else { return try handler(request) }
            return try self[i].handle(request) { try step(i + 1, $0) }
        }
        return try step(0, request)
    }
}

/// Takes the request id from `X-Request-Id` when it is safe to log (1–128 of `[A-Za-z0-9._-]`), else makes one, and
/// echoes it in the response, with `X-Content-Type-Options: nosniff` (no browser guesses a type we did not declare).
/// Continues the request's W3C `traceparent` (the gateway's), or starts a trace, for everything the request does on
/// this thread: its log lines and the events it causes carry it.
public struct RequestIDMiddleware: Middleware {
    /// The gateway keeps the same ones (`deploy/gateway/http.conf`), and the OpenAPI documents say so.
    private static let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")

    public init() {}

    public func handle(_ request: Request, next: (Request) throws -> Response) throws -> Response {
        var request = request
        if let id = request.header("x-request-id"), (1...128).contains(id.count), id.allSatisfy(Self.allowed.contains) {
            request.requestId = id
        } else {
            request.requestId = UUID.v7().lowercased
        }
        let trace = request.header("traceparent").flatMap { TraceContext(traceparent: $0)?.child() } ?? .start()
        var response = try TraceContext.with(trace) { try next(request) }
        response.headers.reserveCapacity(response.headers.count + 2)
        response.headers.append(("X-Request-Id", request.requestId))
        response.headers.append(("X-Content-Type-Options", "nosniff"))
        return response
    }
}

/// Records each request's duration by route and status, and writes the access log line (health probes at debug).
public struct AccessLogMiddleware: Middleware {
    let logger: Logger
    let metrics: Metrics

    public init(logger: Logger, metrics: Metrics) { self.logger = logger; self.metrics = metrics }

    public func handle(_ request: Request, next: (Request) throws -> Response) throws -> Response {
        let start = DispatchTime.now().uptimeNanoseconds
        let response = try next(request)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        // Any token is a method to the parser: those no route has are one label, or a client could grow the metrics
        // without end.
        let method: String
        switch request.method {
        case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS": method = request.method
        default: method = "other"
        }
        metrics.observeRequest(method: method, route: request.route, status: response.status, seconds: seconds)
        let quiet = request.route == "/healthz" || request.route == "/readyz" || request.route == "/metrics"
        logger.log(quiet ? .debug : .info, "request", [
            "method": .string(request.method), "route": .string(request.route), "status": .int(response.status),
            "durationMs": .double(seconds * 1000), "requestId": .string(request.requestId)])
        return response
    }
}

/// Turns whatever a handler throws into the conventions' error response (`HTTPError.from`), logging the 5xx with
/// their cause (which never reaches the client). An `HTTPError` thrown as such is an answer the code chose (a 503
/// while starting, or from a limit), and so is a 503 from the password hasher's queue: not failures. Their request
/// lines say so, and a flood of them must not flood the log with errors.
public struct ErrorMiddleware: Middleware {
    let logger: Logger

    public init(logger: Logger) { self.logger = logger }

    public func handle(_ request: Request, next: (Request) throws -> Response) throws -> Response {
        do {
            return try next(request)
        } catch {
            let http = HTTPError.from(error)
            if http.status >= 500 && !(error is HTTPError) && !(error is PasswordHasher.Busy) {
                logger.error("request failed", ["requestId": .string(request.requestId), "route": .string(request.route),
                                                "error": .string(String(describing: error))])
            }
            return http.response
        }
    }
}

/// Turns away a new event stream once `limit` are open in this process (503 with `Retry-After`): long-lived streams
/// have a budget of their own, so they cannot take every connection.
public struct StreamBudgetMiddleware: Middleware {
    let limit: Int
    let refusals: RefusalLog
    public init(limit: Int, refusals: RefusalLog) { self.limit = limit; self.refusals = refusals }

    public func handle(_ request: Request, next: (Request) throws -> Response) throws -> Response {
        let response = try next(request)
        guard let stream = response.stream, EventStream.openCount >= limit else { return response }
        stream.discard()
        refusals.record(.streams, address: request.remoteAddress)
        return HTTPError.unavailable(retryAfter: 5).response
    }
}

/// Counts what the limits turn away (`http_refused_total{reason}`) and logs it, at most one line per reason every
/// 10 seconds with how many since the last line: a flood must not flood the log too.
public final class RefusalLog: Sendable {
    private let logger: Logger
    private let metrics: Metrics
    private let recent = Mutex<[ConnectionRefusal: (count: Int, lastLine: Date)]>([:])

    public init(logger: Logger, metrics: Metrics) { self.logger = logger; self.metrics = metrics }

    public func record(_ refusal: ConnectionRefusal, address: String) {
        metrics.increment("http_refused_total", labels: "reason=\"\(refusal.rawValue)\"",
                          help: "Connections and streams turned away by the server's limits.")
        let now = Date()
        let count: Int? = recent.withLock { r in
            var entry = r[refusal] ?? (0, .distantPast)
            entry.count += 1
            defer { r[refusal] = entry }
            guard now.timeIntervalSince(entry.lastLine) >= 10 else { return nil }
            defer { entry = (0, now) }
            return entry.count
        }
        if let count {
            logger.warn("turned clients away", ["reason": .string(refusal.rawValue), "count": .int(count), "lastAddress": .string(address)])
        }
    }
}
