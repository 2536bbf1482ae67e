import CShims
import Foundation
import Synchronization

/// An HTTP/1.1 server of its own: a pool of threads, each running an epoll loop over the connections it accepted and
/// calling the handler for each request (a handler may block: it holds only its own thread's connections). Every
/// thread waits on the one listening socket (`EPOLLEXCLUSIVE`), so a new connection goes to a thread that is free,
/// not to one busy hashing a password. Everything it answers, its own refusals of malformed heads included, goes
/// through `respond`, so every answer follows the error contract and reaches the access log.
///
/// The routing of a request happens once, when its head has arrived: `route(method, path)` gives the match, whose
/// body limit bounds the body, and the same match is handed to `respond` with the request.
///
/// `@unchecked Sendable`: the listener and workers are written only by `start`/`stop` on the owning thread; the
/// in-flight count and the streams are guarded by `condition`.
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
    let route: Route
    let respond: Respond
    let connections: ConnectionGuard
    private var listener: Int32 = -1
    private var workers: [Worker] = []
    private let accepting = Atomic<Bool>(false)
    private let condition = NSCondition()
    private var inFlight = 0
    private var streams: [ObjectIdentifier: EventStream] = [:]

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

    /// Starts listening on every IPv4 address; throws when the port cannot be bound.
    public func start() throws {
        // Non-blocking: two workers may wake for one connection, and the one that finds none must not wait.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw HTTPServerError.cannotListen(port: port) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = INADDR_ANY
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, SOMAXCONN) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { close(fd); throw HTTPServerError.cannotListen(port: port) }
        listener = fd
        boundPort = UInt16(bigEndian: address.sin_port)
        accepting.store(true, ordering: .releasing)
        workers = (0..<threads).map { Worker(server: self, index: $0, listener: fd) }
        workers.forEach { $0.start() }
    }

    /// Whether workers take new connections (false once stopping).
    var isAccepting: Bool { accepting.load(ordering: .acquiring) }

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

    /// Stops accepting, ends the event streams, lets in-flight requests finish (up to `grace` seconds), then closes
    /// every connection and stops the threads.
    public func stop(grace: TimeInterval = 10) {
        guard listener >= 0 else { return }
        accepting.store(false, ordering: .releasing)
        openStreams().forEach { $0.close() }
        // A connection accepted just before may still be delivering its head, and a request counts as in flight only
        // once its head is parsed: wait for a quiet 250 ms, not just for zero.
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
        workers.forEach { $0.post(.stop) }
        workers.forEach { $0.done.wait() }
        workers = []
        // Closed once no worker can be reading it: a descriptor number closed under a worker could be reused.
        close(listener)
        listener = -1
    }

    // MARK: Called from the workers

    func begin() {
        condition.lock(); inFlight += 1; condition.unlock()
    }

    func end() {
        condition.lock(); inFlight -= 1; condition.broadcast(); condition.unlock()
    }
}

/// Server start-up failures.
public enum HTTPServerError: Error, CustomStringConvertible {
    case cannotListen(port: UInt16)
    public var description: String {
        switch self { case .cannotListen(let port): return "cannot listen on port \(port) (in use?)" }
    }
}
