/// A request handler: a small synchronous function. It runs on one of the server's own threads, so it may block.
public typealias Handler = @Sendable (Request) throws -> Response

/// The default JSON body limit (1 MiB).
public let defaultBodyLimit = 1 << 20

/// One entry of a service's route table.
public struct Route: Sendable {
    /// `GET`, `POST`, ...
    public let method: String
    /// The pattern, `{name}` for a parameter segment.
    public let pattern: String
    /// The largest body accepted (413 above, before reading it).
    public let bodyLimit: Int
    /// What the route does, for the OpenAPI document.
    public let summary: String
    /// The security schemes that guard it (`bearer`, `operator`), any one of which is accepted; empty when public.
    /// Set by the wrapper that enforces them, and listed in the OpenAPI document.
    public let security: [String]
    /// The JSON Schema of the request body, as JSON text, if it takes one.
    public let requestSchema: String?
    /// The success status and the JSON Schema of its body, as JSON text.
    public let response: (status: Int, schema: String?)
    /// Answered on the connection's own thread, never waiting for a handler thread: for routes that cannot block
    /// (`/healthz`, `/metrics`).
    public let inline: Bool
    /// A check of the credentials from the head alone, before the body is read (nil: accepted); it must not block.
    /// A request that fails it is answered and its connection closed without reading the body.
    public let checkHead: (@Sendable (Request) -> HTTPError?)?
    /// The query parameters and request headers it reads, for the OpenAPI document and the check of their values.
    public internal(set) var query: [QueryParameter] = []
    /// Other answers it gives (status, content type if it has a body, JSON Schema text, what it means, the headers it
    /// carries by name with what each says), for the OpenAPI document.
    public internal(set) var alternatives: [(status: Int, contentType: String?, schema: String?, description: String?,
                                             headers: [String: String])] = []
    /// Refusals of its own beyond the ones its shape implies (a limit on a read), for the OpenAPI document.
    public internal(set) var refusals: [(status: Int, description: String)] = []
    /// Whether a retry with the same `Idempotency-Key` is answered as the first time (`Router.idempotent`).
    public internal(set) var idempotent = false
    let handler: Handler
    let segments: [Segment]

    enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }
}

/// A query parameter (or a request header) a route reads: its name, the JSON Schema of its value (as JSON text), what
/// it does, and the check of a value (nil when it fits).
public struct QueryParameter: Sendable {
    public let name: String
    public let schema: String
    public let description: String
    public let check: @Sendable (String) -> HTTPError?
    /// A request header of this name (`Router.header`), not a query parameter.
    public internal(set) var inHeader = false
    public init(_ name: String, schema: String, _ description: String, check: @escaping @Sendable (String) -> HTTPError?) {
        self.name = name; self.schema = schema; self.description = description; self.check = check
    }
}

/// What the router found for a method and path.
public enum RouteMatch: Sendable {
    case found(Route, [String: String])
    case methodNotAllowed([String])
    case notFound
    /// The server refused the request before routing it (a body over the limit, HTTP/1.1 without `Host`): the
    /// pipeline answers with this error, so the refusal is logged and counted like any other answer.
    case refused(HTTPError)

    /// Whether its handler may block, and so runs on a handler thread (refusals and non-matches never do).
    public var runsOnHandlerThread: Bool {
        if case .found(let route, _) = self { return !route.inline }
        return false
    }

    /// The largest body the request may carry (the route's own limit; the default when nothing matched).
    public var bodyLimit: Int {
        if case .found(let route, _) = self { return route.bodyLimit }
        return defaultBodyLimit
    }
}

/// A table of routes with `{name}` path parameters. Literal segments win over parameters.
public struct Router: Sendable {
    /// The routes in the order they were added.
    public private(set) var routes: [Route] = []
    /// The indices of `routes` by their number of segments: a path is compared only with the patterns as long as it.
    private var byLength: [Int: [Int]] = [:]
    /// The indices of the routes without parameters, by pattern: a path written as one of them is theirs (no pattern
    /// of as many segments has more literals), found without splitting it.
    private var byPattern: [String: [Int]] = [:]

    public init() {}

    /// Adds a route; `security` names the schemes `handler` enforces (the kit's `add(..., auth:)` sets them).
    public mutating func add(_ method: String, _ pattern: String, summary: String = "", security: [String] = [],
                             bodyLimit: Int = defaultBodyLimit, request: String? = nil,
                             answer response: (Int, String?) = (200, nil), inline: Bool = false,
                             checkHead: (@Sendable (Request) -> HTTPError?)? = nil, _ handler: @escaping Handler) {
        let segments = Self.split(pattern).map { part -> Route.Segment in
            if part.hasPrefix("{") && part.hasSuffix("}") { return .parameter(String(part.dropFirst().dropLast())) }
            return .literal(String(part))
        }
        byLength[segments.count, default: []].append(routes.count)
        if !segments.contains(where: { if case .parameter = $0 { return true } else { return false } }) {
            byPattern[pattern, default: []].append(routes.count)
        }
        routes.append(Route(method: method, pattern: pattern, bodyLimit: bodyLimit, summary: summary,
                            security: security, requestSchema: request,
                            response: (response.0, response.1), inline: inline, checkHead: checkHead, handler: handler,
                            segments: segments))
    }

    /// Documents the query parameters of the route added for `method` and `pattern` (which must exist).
    public mutating func query(_ method: String, _ pattern: String, _ parameters: [QueryParameter]) {
        routes[index(method, pattern)].query += parameters
    }

    /// Documents the request headers the route added for `method` and `pattern` reads (which must exist), checked
    /// as its query parameters are. An empty header counts as none, as an empty `Last-Event-ID` means no event.
    public mutating func header(_ method: String, _ pattern: String, _ parameters: [QueryParameter]) {
        routes[index(method, pattern)].query += parameters.map { var p = $0; p.inHeader = true; return p }
    }

    /// Documents another answer of the route added for `method` and `pattern` (a replay's 200, an HTML rendering, an
    /// image's type, a 304 without a body: `contentType` nil), and the headers it carries (an image's `ETag`).
    public mutating func alsoAnswers(_ method: String, _ pattern: String, _ status: Int, contentType: String? = "application/json",
                                     schema: String? = nil, description: String? = nil, headers: [String: String] = [:]) {
        routes[index(method, pattern)].alternatives.append((status, contentType, schema, description, headers))
    }

    /// Documents a refusal of the route added for `method` and `pattern` that its shape does not imply, or says more
    /// of one it does.
    public mutating func alsoRefuses(_ method: String, _ pattern: String, _ status: Int, _ description: String) {
        routes[index(method, pattern)].refusals.append((status, description))
    }

    /// Documents that the routes added for `method` and `patterns` answer a retry with the same `Idempotency-Key` as
    /// the first time (their handlers go through `Idempotency`, which in debug builds insists on this, both ways).
    public mutating func idempotent(_ method: String, _ patterns: [String]) {
        for pattern in patterns { routes[index(method, pattern)].idempotent = true }
    }

    private func index(_ method: String, _ pattern: String) -> Int {
        guard let i = routes.firstIndex(where: { $0.method == method && $0.pattern == pattern }) else {
            preconditionFailure("no route \(method) \(pattern) to document")
        }
        return i
    }

    /// Finds the route for `method` and `path` (as sent, percent-encoded): literal segments match as written, and
    /// each parameter is decoded after the path was split, so an escaped `/` stays inside its segment.
    public func match(method: String, path: String) -> RouteMatch {
        if let literal = byPattern[path] {
            if let i = literal.first(where: { Self.serves(routes[$0].method, method) }) {
                return .found(routes[i], [:])
            }
            return .methodNotAllowed(literal.map { routes[$0].method })
        }
        let parts = Self.split(path)
        // Indices, not copies: a `Route` is a dozen references to retain and release. Literals compare byte by byte,
        // as written (a path is not text to normalise).
        var best: (index: Int, params: [String: String])?
        var allowed: [String] = []
        var mostLiterals = -1
        for i in byLength[parts.count] ?? [] {
            var params: [String: String] = [:]
            var literals = 0
            var ok = true
            for (segment, part) in zip(routes[i].segments, parts) {
                switch segment {
                case .literal(let text):
                    if part.utf8.elementsEqual(text.utf8) { literals += 1 } else { ok = false }
                case .parameter(let name):
                    if part.isEmpty { ok = false } else { params[name] = Self.decoded(part) }
                }
                if !ok { break }
            }
            guard ok else { continue }
            // The most specific pattern (most literal segments) owns the path, whatever the method: `/v1/groups/join`
            // is not a `{id}` for methods only the `{id}` route has.
            if literals > mostLiterals { mostLiterals = literals; allowed = []; best = nil }
            guard literals == mostLiterals else { continue }
            guard Self.serves(routes[i].method, method) else {
                allowed.append(routes[i].method)
                continue
            }
            if best == nil { best = (i, params) }
        }
        if let best { return .found(routes[best.index], best.params) }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed)
    }

    /// Whether a route of `routeMethod` answers `method` (a GET route answers HEAD too).
    private static func serves(_ routeMethod: String, _ method: String) -> Bool {
        routeMethod == method || (method == "HEAD" && routeMethod == "GET")
    }

    private static func decoded(_ segment: Substring) -> String {
        guard segment.utf8.contains(UInt8(ascii: "%")) else { return String(segment) }
        return String(decoding: Parser.percentDecoded(segment.utf8, plusIsSpace: false), as: UTF8.self)
    }

    static func split(_ path: String) -> ArraySlice<Substring> {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        return parts.first == "" ? parts.dropFirst() : parts[...]
    }

    /// Runs the matched route's handler.
    public static func invoke(_ route: Route, _ request: Request) throws -> Response {
        try route.handler(request)
    }
}
