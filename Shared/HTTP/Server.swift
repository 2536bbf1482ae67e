import CMicroHTTPD
import CShims
import Foundation

/// An HTTP/1.1 server on libmicrohttpd (epoll, thread pool). The engine stays behind `Request`/`Response`,
/// so it can be replaced without touching services.
///
/// The routing of a request happens once, when its headers have arrived: `route(method, path)` gives the match, whose
/// body limit bounds the body, and the same match is handed to `respond` with the request.
///
/// `@unchecked Sendable`: the daemon pointer is written only by `start`/`stop` on the owning thread;
/// the in-flight count and the streams are guarded by `condition`.
public final class HTTPServer: @unchecked Sendable {
    /// Finds the route of a method and path (once per request).
    public typealias Route = @Sendable (String, String) -> RouteMatch
    /// Answers a request; must not throw (the kit turns errors into responses before this point).
    public typealias Respond = @Sendable (Request, RouteMatch) -> Response

    /// The port asked for (0: any free port; see `boundPort`).
    public let port: UInt16
    /// The port it listens on, once started.
    public private(set) var boundPort: UInt16 = 0
    private let threads: Int
    private let route: Route
    private let respond: Respond
    private var daemon: OpaquePointer?
    private let condition = NSCondition()
    private var inFlight = 0
    private var streams: [ObjectIdentifier: EventStream] = [:]
    fileprivate let connections: ConnectionGuard

    /// Creates a server; `report` hears of every connection the limits turn away (on the server's threads).
    public init(port: UInt16, threads: Int, limits: ConnectionLimits = ConnectionLimits(total: 1024, perClient: 1024, streams: 512),
                report: @escaping @Sendable (ConnectionRefusal, String) -> Void = { _, _ in },
                route: @escaping Route, respond: @escaping Respond) {
        self.port = port
        self.threads = max(1, threads)
        self.route = route
        self.respond = respond
        connections = ConnectionGuard(limits: limits, report: report)
    }

    /// Starts listening; throws when the port cannot be bound.
    public func start() throws {
        // The daemon holds an unretained pointer to self: `stop()` stops the daemon before self can go away.
        let context = Unmanaged.passUnretained(self).toOpaque()
        let limits = connections.limits
        // libmicrohttpd's own limit sits above ours, so that ours, which reports, turns clients away first.
        daemon = shim_mhd_start(port, UInt32(threads), UInt32(limits.idleTimeoutSeconds), UInt32(limits.total + 16),
                                serverAccessHandler, context, serverCompletedHandler, context,
                                serverAcceptPolicy, context, serverConnectionNotice, context, serverRequestLine, context)
        guard let daemon else { throw HTTPServerError.cannotListen(port: port) }
        boundPort = shim_mhd_bound_port(daemon)
        if boundPort == 0 { boundPort = port }
    }

    /// Ends the connections whose request head is late; the owner calls it every second or so.
    public func sweepConnections() { connections.sweep() }

    /// Sends a comment on every open stream: a suspended stream does not notice a client that went away until it
    /// writes. The owner calls it now and then (every 15 s or so).
    public func pingStreams() {
        openStreams().forEach { $0.comment("keep-alive") }
    }

    /// The event streams still open.
    public func openStreams() -> [EventStream] {
        condition.lock(); defer { condition.unlock() }
        return Array(streams.values)
    }

    fileprivate func track(_ stream: EventStream) {
        condition.lock(); streams[ObjectIdentifier(stream)] = stream; condition.unlock()
        stream.onClose { [weak self, weak stream] in
            guard let self, let stream else { return }
            self.condition.lock(); self.streams[ObjectIdentifier(stream)] = nil; self.condition.unlock()
        }
    }

    /// Stops accepting, lets in-flight requests finish (up to `grace` seconds), then stops the daemon.
    public func stop(grace: TimeInterval = 10) {
        guard let daemon else { return }
        // The listening socket is closed only after the daemon stopped: quiescing tells each worker thread to take it
        // out of its epoll set, and a socket closed before a worker did makes libmicrohttpd abort the process ("Failed
        // to remove listen FD from epoll set", seen once in CI as exit status 6 on SIGTERM).
        let listener = MHD_quiesce_daemon(daemon)
        // Event streams never finish by themselves; end them (libmicrohttpd must not stop with suspended connections).
        openStreams().forEach { $0.close() }
        // A connection accepted just before the quiesce may still be delivering its headers, and a request
        // counts as in flight only once they are parsed: wait for a quiet 250 ms, not just for zero.
        let deadline = Date().addingTimeInterval(grace)
        condition.lock()
        var quietSince = Date()
        while Date() < deadline {
            if inFlight > 0 {
                _ = condition.wait(until: deadline)
                quietSince = Date()
            } else if Date().timeIntervalSince(quietSince) >= 0.25 {
                break
            } else {
                _ = condition.wait(until: quietSince.addingTimeInterval(0.25))
            }
        }
        condition.unlock()
        MHD_stop_daemon(daemon)
        if listener >= 0 { close(listener) }
        self.daemon = nil
    }

    // MARK: - Called from libmicrohttpd's threads

    fileprivate func begin() {
        condition.lock(); inFlight += 1; condition.unlock()
    }

    fileprivate func end() {
        condition.lock(); inFlight -= 1; condition.broadcast(); condition.unlock()
    }

    fileprivate func match(method: String, path: String) -> RouteMatch { route(method, path) }

    fileprivate func handle(_ request: Request, _ match: RouteMatch) -> Response { respond(request, match) }
}

/// Server start-up failures.
public enum HTTPServerError: Error, CustomStringConvertible {
    case cannotListen(port: UInt16)
    public var description: String {
        switch self { case .cannotListen(let port): return "cannot listen on port \(port) (in use?)" }
    }
}

/// The state of one request between libmicrohttpd's calls: retained in `*con_cls` on the first call,
/// released by the completion callback.
private final class PendingRequest {
    var match: RouteMatch
    let limit: Int
    var body: [UInt8] = []
    var answered = false
    init(match: RouteMatch) { self.match = match; limit = match.bodyLimit }
}

/// Collects key/value pairs from `MHD_get_connection_values`.
private final class PairCollector {
    var pairs: [String: String] = [:]
    let lowercaseKeys: Bool
    init(lowercaseKeys: Bool) { self.lowercaseKeys = lowercaseKeys }
}

private func collect(_ connection: OpaquePointer, _ kind: MHD_ValueKind, lowercase: Bool) -> [String: String] {
    let collector = PairCollector(lowercaseKeys: lowercase)
    let pointer = Unmanaged.passUnretained(collector).toOpaque()
    _ = withExtendedLifetime(collector) {
        MHD_get_connection_values(connection, kind, { cls, _, key, value in
            guard let cls, let key else { return mhdYes }
            let collector = Unmanaged<PairCollector>.fromOpaque(cls).takeUnretainedValue()
            var name = String(cString: key)
            if collector.lowercaseKeys { name = name.lowercased() }
            if collector.pairs[name] == nil { collector.pairs[name] = value.map { String(cString: $0) } ?? "" }
            return mhdYes
        }, pointer)
    }
    return collector.pairs
}

private func queue(_ response: Response, on connection: OpaquePointer, server: HTTPServer? = nil) -> MHD_Result {
    if let stream = response.stream {
        stream.attach(connection)
        server?.track(stream)
        // The response holds a retain on the stream, given back in the free callback.
        guard let mhdResponse = MHD_create_response_from_callback(UInt64.max, 4096, { cls, _, buffer, max in
            guard let cls, let buffer else { return -2 }
            return Unmanaged<EventStream>.fromOpaque(cls).takeUnretainedValue().read(into: buffer, max: max)
        }, Unmanaged.passRetained(stream).toOpaque(), { cls in
            guard let cls else { return }
            let stream = Unmanaged<EventStream>.fromOpaque(cls).takeRetainedValue()
            stream.release()
        }) else { return mhdNo }
        defer { MHD_destroy_response(mhdResponse) }
        for (name, value) in response.headers { _ = MHD_add_response_header(mhdResponse, name, value) }
        return MHD_queue_response(connection, UInt32(response.status), mhdResponse)
    }
    var body = response.body
    if body.isEmpty { body = [0] }
    let length = response.body.count
    // Mode 2 is MHD_RESPMEM_MUST_COPY: libmicrohttpd copies the Swift buffer before this call returns.
    guard let mhdResponse = body.withUnsafeMutableBytes({
        MHD_create_response_from_buffer(length, $0.baseAddress, mustCopy)
    }) else { return mhdNo }
    defer { MHD_destroy_response(mhdResponse) }
    for (name, value) in response.headers {
        _ = MHD_add_response_header(mhdResponse, name, value)
    }
    return MHD_queue_response(connection, UInt32(response.status), mhdResponse)
}

private let serverAccessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, version, uploadData, uploadSize, conCls in
    guard let cls, let connection, let url, let method, let uploadSize, let conCls else { return mhdNo }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()

    guard let existing = conCls.pointee else {
        // First call: only the headers have arrived. Route once; refuse here what must not be read any further.
        var match = server.match(method: String(cString: method), path: String(cString: url))
        if let version, String(cString: version) == "HTTP/1.1", MHD_lookup_connection_value(connection, headerKind, "Host") == nil {
            match = .refused(HTTPError(400, "bad_request", "An HTTP/1.1 request needs a Host header."))
        } else if let length = MHD_lookup_connection_value(connection, headerKind, "Content-Length"),
                  let declared = Int(String(cString: length)), declared > match.bodyLimit {
            match = .refused(.payloadTooLarge(limit: match.bodyLimit))
        }
        let pending = PendingRequest(match: match)
        conCls.pointee = Unmanaged.passRetained(pending).toOpaque()
        server.begin()
        server.connections.headArrived(shim_mhd_connection_fd(connection))
        if case .refused = match { return answer(pending, connection, url, method, server) }
        return mhdYes
    }
    let pending = Unmanaged<PendingRequest>.fromOpaque(existing).takeUnretainedValue()
    if uploadSize.pointee > 0 {
        let size = uploadSize.pointee
        uploadSize.pointee = 0
        if pending.answered { return mhdYes }
        if pending.body.count + size > pending.limit {
            // Over the limit while reading (a chunked body declares no length): answer now; the connection closes
            // after the answer instead of reading the rest.
            pending.body = []
            pending.match = .refused(.payloadTooLarge(limit: pending.limit))
            return answer(pending, connection, url, method, server)
        }
        if let uploadData {
            uploadData.withMemoryRebound(to: UInt8.self, capacity: size) {
                pending.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: size))
            }
        }
        return mhdYes
    }
    if pending.answered { return mhdYes }
    return answer(pending, connection, url, method, server)
}

/// Builds the request (head, query, body so far) and queues the pipeline's answer for it.
private func answer(_ pending: PendingRequest, _ connection: OpaquePointer, _ url: UnsafePointer<CChar>,
                    _ method: UnsafePointer<CChar>, _ server: HTTPServer) -> MHD_Result {
    pending.answered = true
    var address = [CChar](repeating: 0, count: 64)
    let remote = shim_mhd_client_address(connection, &address, address.count) == 0
        ? String(decoding: address.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    var request = Request(method: String(cString: method), path: String(cString: url),
                          query: collect(connection, queryKind, lowercase: false),
                          body: pending.body, remoteAddress: remote)
    request.headers = collect(connection, headerKind, lowercase: true)
    pending.body = []
    return queue(server.handle(request, pending.match), on: connection, server: server)
}

private let serverCompletedHandler: MHD_RequestCompletedCallback = { cls, connection, conCls, _ in
    guard let cls, let conCls, let pointer = conCls.pointee else { return }
    Unmanaged<PendingRequest>.fromOpaque(pointer).release()
    conCls.pointee = nil
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    if let connection { server.connections.requestDone(shim_mhd_connection_fd(connection)) }
    server.end()
}

private let serverAcceptPolicy: MHD_AcceptPolicyCallback = { cls, address, _ in
    guard let cls else { return mhdNo }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    return server.connections.admit(numericAddress(address)) ? mhdYes : mhdNo
}

private let serverConnectionNotice: MHD_NotifyConnectionCallback = { cls, connection, _, code in
    guard let cls, let connection else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    let fd = shim_mhd_connection_fd(connection)
    if code.rawValue == 0 {  // MHD_CONNECTION_NOTIFY_STARTED
        var address = [CChar](repeating: 0, count: 64)
        let known = shim_mhd_client_address(connection, &address, address.count) == 0
        server.connections.opened(fd, address: known ? String(cString: address) : "")
    } else {
        server.connections.closed(fd)
    }
}

private let serverRequestLine: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> UnsafeMutableRawPointer? = { cls, _, connection in
    guard let cls, let connection else { return nil }
    Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().connections.requestLineArrived(shim_mhd_connection_fd(connection))
    return nil  // the request's con_cls stays empty until its head is complete
}

private func numericAddress(_ address: UnsafePointer<sockaddr>?) -> String {
    var text = [CChar](repeating: 0, count: 64)
    return shim_sockaddr_address(address, &text, text.count) == 0 ? String(cString: text) : ""
}

// libmicrohttpd's closed enums import as Swift enums; these are their C values.
private let mhdYes = MHD_Result(rawValue: 1)!
private let mhdNo = MHD_Result(rawValue: 0)!
/// MHD_RESPMEM_MUST_COPY (1 would be MUST_FREE: a double free on a Swift buffer).
private let mustCopy = MHD_ResponseMemoryMode(rawValue: 2)!
/// MHD_HEADER_KIND and MHD_GET_ARGUMENT_KIND.
private let headerKind = MHD_ValueKind(rawValue: 1)!
private let queryKind = MHD_ValueKind(rawValue: 8)!
