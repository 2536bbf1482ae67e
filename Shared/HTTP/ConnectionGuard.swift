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
    /// Addresses the per-client limit does not apply to: trusted proxies, whose clients all share their address (the
    /// body memory of a request through one counts against the client its `X-Forwarded-For` names).
    public var exempt: AddressSet
    /// How long a request body may take to arrive in all, however steadily it trickles (408 after).
    public var bodyTimeoutSeconds: Int
    /// The bytes of request bodies the server holds at once, all connections together: a body that would pass it
    /// is refused with 503 before it is read (a declared length counts in full when its head arrives).
    public var bodyMemory: Int
    /// The part of `bodyMemory` one client may hold (a quarter), so that a few slow uploads of one client leave the
    /// rest for the others: past it a body is refused with 429 before it is read. A client holding no other body may
    /// always send one, of any size its route admits.
    public var bodyMemoryPerClient: Int { bodyMemory / 4 }

    public init(total: Int, perClient: Int, headTimeoutSeconds: Int = 10, idleTimeoutSeconds: Int = 30, streams: Int,
                exempt: AddressSet = [], bodyTimeoutSeconds: Int = 60, bodyMemory: Int = 64 << 20) {
        self.total = total; self.perClient = perClient; self.headTimeoutSeconds = headTimeoutSeconds
        self.idleTimeoutSeconds = idleTimeoutSeconds; self.streams = streams; self.exempt = exempt
        self.bodyTimeoutSeconds = bodyTimeoutSeconds; self.bodyMemory = bodyMemory
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

/// Why a connection, a request or a stream was turned away: too many connections in all or from one client, a head
/// not complete in time, too many streams, bodies in flight filling their memory or one client's share of it, every
/// handler busy with a full queue.
public enum ConnectionRefusal: String, Sendable {
    case totalConnections = "total_connections", perClient = "per_client", headTimeout = "head_timeout", streams
    case bodyMemory = "body_memory", clientBodyMemory = "client_body_memory", handlersBusy = "handlers_busy"
}

/// Counts open connections, in all and by client address, for the workers as they accept: once per connection, under
/// one lock. (Each connection's own deadlines are its worker's: no lock per request.)
final class ConnectionGuard: Sendable {
    private struct Counts {
        var open = 0
        var byAddress: [String: Int] = [:]
    }

    let limits: ConnectionLimits
    let report: @Sendable (ConnectionRefusal, String) -> Void
    private let counts = Mutex(Counts())

    init(limits: ConnectionLimits, report: @escaping @Sendable (ConnectionRefusal, String) -> Void) {
        self.limits = limits; self.report = report
    }

    /// Whether a new connection from `address` may open; if so it is counted until `closed`.
    func admit(_ address: String) -> Bool {
        let refusal: ConnectionRefusal? = counts.withLock { c in
            if c.open >= limits.total { return .totalConnections }
            if !limits.exempt.contains(address), c.byAddress[address, default: 0] >= limits.perClient { return .perClient }
            c.open += 1
            c.byAddress[address, default: 0] += 1
            return nil
        }
        if let refusal { report(refusal, address) }
        return refusal == nil
    }

    /// Connections open now.
    var openCount: Int { counts.withLock { $0.open } }

    func closed(_ address: String) {
        counts.withLock { c in
            c.open -= 1
            let left = c.byAddress[address, default: 1] - 1
            c.byAddress[address] = left > 0 ? left : nil
        }
    }
}

/// The bytes of request bodies in memory, all connections together against `ConnectionLimits.bodyMemory` and by
/// client against `bodyMemoryPerClient`. A body reserves when its head arrives (a chunked one as it grows) and
/// releases when it is answered or its connection ends: one short lock each time, never held across I/O. A client
/// is a key the worker chooses (its peer's address, or the client a trusted proxy names); only clients holding a
/// body have an entry.
final class BodyMemory: Sendable {
    private struct Held {
        var total = 0
        var byClient: [String: Int] = [:]
    }

    private let limit: Int
    private let perClient: Int
    private let held = Mutex(Held())

    init(limit: Int, perClient: Int) { self.limit = limit; self.perClient = perClient }

    /// Grows one body's reservation for `client` from `old` bytes to `new`; the refusal (and the reservation left at
    /// `old`) when the memory in all, or the client's share, has no room. The share counts the client's other bodies:
    /// a client with none may always hold one body, as large as its route admits.
    func reserve(from old: Int, to new: Int, for client: String) -> ConnectionRefusal? {
        held.withLock { h in
            let mine = h.byClient[client, default: 0]
            let others = mine - old
            if others > 0 && others + new > perClient { return .clientBodyMemory }
            if h.total - old + new > limit { return .bodyMemory }
            h.total += new - old
            h.byClient[client] = mine - old + new
            return nil
        }
    }

    /// Gives back `bytes` that `client` held.
    func release(_ bytes: Int, for client: String) {
        held.withLock { h in
            h.total -= bytes
            let left = h.byClient[client, default: bytes] - bytes
            h.byClient[client] = left > 0 ? left : nil
        }
    }
}
