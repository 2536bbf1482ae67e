import Foundation
import Synchronization

/// What keeps one client from taking the server offline: connections in all (sized from the file-descriptor limit)
/// and per client address, how long a request head may take to arrive, how long a connection may sit idle, and how
/// many event streams may be open at once.
public struct ConnectionLimits: Sendable {
    public var total: Int
    public var perClient: Int
    public var headTimeoutSeconds: Int
    public var idleTimeoutSeconds: Int
    public var streams: Int
    /// Addresses the per-client limit does not apply to: trusted proxies, whose clients all share their address.
    public var exempt: Set<String>

    public init(total: Int, perClient: Int, headTimeoutSeconds: Int = 10, idleTimeoutSeconds: Int = 30, streams: Int,
                exempt: Set<String> = []) {
        self.total = total; self.perClient = perClient; self.headTimeoutSeconds = headTimeoutSeconds
        self.idleTimeoutSeconds = idleTimeoutSeconds; self.streams = streams; self.exempt = exempt
    }

    /// Raises the soft limit on open files to the hard one; returns the limit now in force.
    public static func raiseFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: min(limit.rlim_cur, 1 << 20))
    }
}

/// Why a connection or a stream was turned away.
public enum ConnectionRefusal: String, Sendable {
    case totalConnections = "total_connections", perClient = "per_client", headTimeout = "head_timeout", streams
}

/// Counts open connections by client address for the accept policy, and ends those whose request head does not
/// arrive in time (a client sending a byte now and then would otherwise hold its connection for ever).
///
/// Each request changes its connection's state three times (line, head, done), on the server's threads at once: that
/// state lives in 64 shards by descriptor, each with a lock of its own, so requests of different connections do not
/// queue on one lock (one lock cost a third of the CPU of `GET /healthz` under load). Opening and closing, once per
/// connection, also count by address under a lock of their own.
final class ConnectionGuard: Sendable {
    private struct Open {
        let address: String
        /// When the connection began waiting for a request head; nil while a request is being served.
        var waitingSince: Date?
        /// Whether a request line arrived while waiting (a head begun and not finished, not just an idle connection).
        var started = false
    }
    private struct Counts {
        var open = 0
        var byAddress: [String: Int] = [:]
    }

    let limits: ConnectionLimits
    let report: @Sendable (ConnectionRefusal, String) -> Void
    private let counts = Mutex(Counts())
    private let connections = Sharded<[Int32: Open]>(count: 64) { [:] }

    init(limits: ConnectionLimits, report: @escaping @Sendable (ConnectionRefusal, String) -> Void) {
        self.limits = limits; self.report = report
    }

    /// Whether a new connection from `address` may open.
    func admit(_ address: String) -> Bool {
        let refusal: ConnectionRefusal? = counts.withLock { c in
            if c.open >= limits.total { return .totalConnections }
            if !limits.exempt.contains(address), c.byAddress[address, default: 0] >= limits.perClient { return .perClient }
            return nil
        }
        if let refusal { report(refusal, address) }
        return refusal == nil
    }

    func opened(_ fd: Int32, address: String) {
        counts.withLock { c in
            c.open += 1
            c.byAddress[address, default: 0] += 1
        }
        connections.withLock(Int(fd)) { $0[fd] = Open(address: address, waitingSince: Date()) }
    }

    /// Called by the server before it closes `fd`, under the same lock as `sweep`: a swept descriptor is still open.
    func closed(_ fd: Int32) {
        guard let open = connections.withLock(Int(fd), { $0.removeValue(forKey: fd) }) else { return }
        counts.withLock { c in
            c.open -= 1
            let left = c.byAddress[open.address, default: 1] - 1
            c.byAddress[open.address] = left > 0 ? left : nil
        }
    }

    func requestLineArrived(_ fd: Int32) { connections.withLock(Int(fd)) { $0[fd]?.started = true } }

    func headArrived(_ fd: Int32) { connections.withLock(Int(fd)) { $0[fd]?.waitingSince = nil } }

    func requestDone(_ fd: Int32) {
        connections.withLock(Int(fd)) { open in
            open[fd]?.waitingSince = Date()
            open[fd]?.started = false
        }
    }

    /// Shuts down the connections that waited longer than the head timeout (the server then closes them); reports
    /// those that had begun a request.
    func sweep() {
        let deadline = Date().addingTimeInterval(-Double(limits.headTimeoutSeconds))
        var late: [String] = []
        connections.forEach { open in
            for (fd, connection) in open {
                guard let since = connection.waitingSince, since < deadline else { continue }
                shutdown(fd, Int32(SHUT_RDWR))
                open[fd]?.waitingSince = nil
                if connection.started { late.append(connection.address) }
            }
        }
        late.forEach { report(.headTimeout, $0) }
    }
}
