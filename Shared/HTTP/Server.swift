import CShims
import Foundation
import Synchronization

/// An HTTP/1.1 server of its own: a few threads, each running an epoll loop over the connections it accepted, and a
/// pool of handler threads that answer the requests they read (a handler may block: it holds only its own
/// connection; routes marked inline, such as `/healthz`, are answered by the connection's thread and never wait for
/// one). Every thread waits on the one listening socket (`EPOLLEXCLUSIVE`). Everything it answers, its own refusals
/// of malformed heads included, goes through `respond`, so every answer follows the error contract and reaches the
/// access log.
///
/// The routing of a request happens once, when its head has arrived: `route(method, path)` gives the match, whose
/// body limit bounds the body, and the same match is handed to `respond` with the request.
///
/// `@unchecked Sendable`: the listener and workers are written only by `start`/`stop` on the owning thread; the
/// streams are guarded by `condition`.
public final class HTTPServer: @unchecked Sendable {
    /// Finds the route of a method and path (once per request).
    public typealias Route = @Sendable (String, String) -> RouteMatch
    /// Answers a request; must not throw (the kit turns errors into responses before this point).
    public typealias Respond = @Sendable (Request, RouteMatch) -> Response

    /// The port asked for (0: any free port; see `boundPort`).
    public let port: UInt16
    /// The address to listen on: `::` (every address, IPv6 and IPv4) by default, `0.0.0.0`, or one address.
    public let host: String
    /// The port it listens on, once started.
    public private(set) var boundPort: UInt16 = 0
    private let threads: Int
    let route: Route
    let respond: Respond
    let connections: ConnectionGuard
    let bodyMemory: BodyMemory
    let handlers: HandlerPool
    private var listener: Int32 = -1
    private var workers: [Worker] = []
    private let condition = NSCondition()
    private var streams: [ObjectIdentifier: EventStream] = [:]

    /// Creates a server; `report` hears of every connection and request the limits turn away (on the server's threads).
    /// `threads` read and write connections; `handlerThreads` run the handlers, with at most `maxQueued` requests
    /// waiting for one.
    public init(host: String = "::", port: UInt16, threads: Int, handlerThreads: Int = 16, maxQueued: Int = 1024,
                limits: ConnectionLimits = ConnectionLimits(total: 1024, perClient: 1024, streams: 512),
                report: @escaping @Sendable (ConnectionRefusal, String) -> Void = { _, _ in },
                route: @escaping Route, respond: @escaping Respond) {
        self.host = host
        self.port = port
        self.threads = max(1, threads)
        self.route = route
        self.respond = respond
        connections = ConnectionGuard(limits: limits, report: report)
        bodyMemory = BodyMemory(limit: limits.bodyMemory, perClient: limits.bodyMemoryPerClient)
        handlers = HandlerPool(threads: handlerThreads, maxQueued: maxQueued)
    }

    /// Starts listening on `host` and `port`; `::` takes IPv4 connections too (dual-stack), and falls back to every
    /// IPv4 address where the machine has no IPv6. Throws when the port cannot be bound.
    public func start() throws {
        guard let (fd, bound) = Self.listen(host: host, port: port) ?? (host == "::" ? Self.listen(host: "0.0.0.0", port: port) : nil) else {
            throw HTTPServerError.cannotListen(port: port)
        }
        listener = fd
        boundPort = bound
        workers = (0..<threads).map { Worker(server: self, index: $0, listener: fd) }
        workers.forEach { $0.start() }
    }

    /// A non-blocking listening socket (two workers may wake for one connection, and the one that finds none must
    /// not wait) and the port it got.
    private static func listen(host: String, port: UInt16) -> (Int32, UInt16)? {
        var storage = sockaddr_storage()
        var length: socklen_t
        let family: Int32
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            family = AF_INET
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    $0.pointee.sin_family = sa_family_t(AF_INET); $0.pointee.sin_port = port.bigEndian; $0.pointee.sin_addr = v4
                }
            }
        } else if inet_pton(AF_INET6, host, &v6) == 1 {
            family = AF_INET6
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    $0.pointee.sin6_family = sa_family_t(AF_INET6); $0.pointee.sin6_port = port.bigEndian; $0.pointee.sin6_addr = v6
                }
            }
        } else {
            return nil
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1, zero: Int32 = 0
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if family == AF_INET6 { setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &zero, socklen_t(MemoryLayout<Int32>.size)) }
        let bound = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && Glibc.listen(fd, SOMAXCONN) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { close(fd); return nil }
        let boundPort = withUnsafePointer(to: &storage) {
            family == AF_INET ? $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_port }
                : $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_port }
        }
        return (fd, UInt16(bigEndian: boundPort))
    }

    /// Takes one waiting connection, if the limits admit it: its descriptor and numeric client address.
    func accept() -> (Int32, String)? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { shim_accept(listener, $0, &length) }
        }
        if fd < 0 {
            // Out of descriptors or memory: wait a little instead of spinning on a listener that stays readable.
            if [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(errno) { usleep(10_000) }
            return nil
        }
        let address = Self.numericAddress(&storage)
        guard connections.admit(address) else { close(fd); return nil }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return (fd, address)
    }

    private static func numericAddress(_ storage: inout sockaddr_storage) -> String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = Int32(storage.ss_family)
        let written = withUnsafePointer(to: &storage) { pointer -> Bool in
            switch family {
            case AF_INET:
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                    var ip = address.pointee.sin_addr
                    return inet_ntop(AF_INET, &ip, &text, socklen_t(text.count)) != nil
                }
            case AF_INET6:
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    var ip = address.pointee.sin6_addr
                    // An IPv4 client of a dual-stack socket arrives as ::ffff:a.b.c.d: named as IPv4, as everywhere else.
                    let bytes = withUnsafeBytes(of: &ip) { Array($0) }
                    if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
                        var v4 = in_addr()
                        withUnsafeMutableBytes(of: &v4) { $0.copyBytes(from: bytes[12..<16]) }
                        return inet_ntop(AF_INET, &v4, &text, socklen_t(text.count)) != nil
                    }
                    return inet_ntop(AF_INET6, &ip, &text, socklen_t(text.count)) != nil
                }
            default:
                return false
            }
        }
        return written ? String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    }

    /// Sends a comment on every open stream, which keeps proxies from closing it as idle. The owner calls it now
    /// and then (every 15 s or so).
    public func pingStreams() {
        openStreams().forEach { $0.comment("keep-alive") }
    }

    /// The event streams still open.
    public func openStreams() -> [EventStream] {
        condition.lock(); defer { condition.unlock() }
        return Array(streams.values)
    }

    func track(_ stream: EventStream) {
        condition.lock(); streams[ObjectIdentifier(stream)] = stream; condition.unlock()
        stream.onClose { [weak self, weak stream] in
            guard let self, let stream else { return }
            self.condition.lock(); self.streams[ObjectIdentifier(stream)] = nil; self.condition.unlock()
        }
    }

    /// Stops gracefully: takes the connections already waiting and no others (the listener closes), ends the event
    /// streams, answers every request begun, or begun on a kept connection from now on, with `Connection: close` and
    /// half-closes its connection after it (a reset could destroy the answer before its client reads it), half-closes
    /// a connection idle for a second, and waits up to `grace` seconds for all to close; then closes what is left and
    /// stops the threads.
    public func stop(grace: TimeInterval = 10) {
        guard listener >= 0 else { return }
        let deadline = Date().addingTimeInterval(grace)
        workers.forEach { $0.post(.drain) }
        workers.forEach { $0.drained.wait() }
        // Closed once no worker watches it: what connects from now on is refused, not left waiting in the backlog.
        close(listener)
        openStreams().forEach { $0.close() }
        while connections.openCount > 0 && Date() < deadline { usleep(5_000) }
        workers.forEach { $0.post(.stop) }
        workers.forEach { $0.done.wait() }
        workers = []
        handlers.stop()
        listener = -1
    }
}

/// Server start-up failures.
public enum HTTPServerError: Error, CustomStringConvertible {
    case cannotListen(port: UInt16)
    public var description: String {
        switch self { case .cannotListen(let port): return "cannot listen on port \(port) (in use?)" }
    }
}
