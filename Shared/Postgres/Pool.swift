import Foundation

/// A bounded pool of connections. Connections are lent inside a closure so they always come back;
/// a broken connection is dropped and replaced on the next use, so the pool outlives a database restart.
///
/// `@unchecked Sendable`: all mutable state is guarded by `condition`.
public final class Pool: @unchecked Sendable {
    /// What bounds the waits of the pool's users: no statement, lock or pool wait holds a request for long, and a
    /// connection the network lost or that sat unused is not kept.
    public struct Limits: Sendable {
        /// `statement_timeout` of every connection (0: none): a statement running longer fails (57014), and the
        /// request answers 503.
        public var statementTimeoutMs: Int
        /// `lock_timeout` (0: none): a statement waiting longer for a lock fails (55P03), and the request answers 503.
        public var lockTimeoutMs: Int
        /// How long a caller waits for a connection when all are in use (then `.unavailable`: a 503).
        public var acquireTimeoutMs: Int
        /// A connection idle this long is closed instead of lent (the server or a firewall may have dropped it).
        public var idleSeconds: Int

        public init(statementTimeoutMs: Int = 5000, lockTimeoutMs: Int = 2000, acquireTimeoutMs: Int = 2000, idleSeconds: Int = 300) {
            self.statementTimeoutMs = statementTimeoutMs; self.lockTimeoutMs = lockTimeoutMs
            self.acquireTimeoutMs = acquireTimeoutMs; self.idleSeconds = idleSeconds
        }
    }

    private let url: String
    private let applicationName: String
    /// The most connections open at once.
    public let maxSize: Int
    public let limits: Limits
    private let condition = NSCondition()
    private var idle: [Connection] = []
    private var open = 0
    private var lent = 0

    /// Creates an empty pool; connections open on demand, named `applicationName` in `pg_stat_activity`.
    public init(url: String, maxSize: Int, limits: Limits = Limits(), applicationName: String = "backend") {
        self.url = url
        self.applicationName = applicationName
        self.maxSize = max(1, maxSize)
        self.limits = limits
    }

    /// Counts for the metrics endpoint.
    public var stats: (open: Int, inUse: Int, max: Int) {
        condition.lock(); defer { condition.unlock() }
        return (open, lent, maxSize)
    }

    /// Lends a connection to `body` and takes it back afterwards, also when `body` throws.
    public func withConnection<T>(_ body: (Connection) throws -> T) throws -> T {
        let connection = try acquire()
        do {
            let value = try body(connection)
            release(connection)
            return value
        } catch {
            release(connection)
            throw error
        }
    }

    /// Runs `body` inside BEGIN/COMMIT; rolls back when it throws. Serialization failures and
    /// deadlocks retry the whole closure up to three times, so `body` must not have side effects outside the database.
    public func withTransaction<T>(_ body: (Connection) throws -> T) throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try withConnection { connection in
                    connection.begin()
                    do {
                        let value = try body(connection)
                        try connection.commit()
                        return value
                    } catch {
                        connection.rollback()
                        throw error
                    }
                }
            } catch let error as PostgresError where error.kind == .serializationFailure && attempt < 3 {
                continue
            }
        }
    }

    private func acquire() throws -> Connection {
        let deadline = Date().addingTimeInterval(Double(limits.acquireTimeoutMs) / 1000)
        let staleBefore = Date().addingTimeInterval(-Double(limits.idleSeconds))
        condition.lock()
        while true {
            while let connection = idle.popLast() {
                condition.unlock()
                if connection.idleSince > staleBefore && connection.isHealthy {
                    condition.lock(); lent += 1; condition.unlock()
                    return connection
                }
                condition.lock()
                open -= 1
            }
            if open < maxSize {
                open += 1
                condition.unlock()
                do {
                    let connection = try Connection(url: url, applicationName: applicationName,
                                                    statementTimeoutMs: limits.statementTimeoutMs, lockTimeoutMs: limits.lockTimeoutMs)
                    condition.lock(); lent += 1; condition.unlock()
                    return connection
                } catch {
                    condition.lock(); open -= 1; condition.broadcast(); condition.unlock()
                    throw error
                }
            }
            if !condition.wait(until: deadline) {
                condition.unlock()
                throw PostgresError(kind: .unavailable, serverMessage: "connection pool exhausted")
            }
        }
    }

    /// A connection with the pool's settings that the pool neither counts nor lends: for work that holds one for
    /// good, such as `LISTEN`. The caller closes it by dropping it.
    public func unpooledConnection() throws -> Connection {
        try Connection(url: url, applicationName: applicationName, statementTimeoutMs: limits.statementTimeoutMs,
                       lockTimeoutMs: limits.lockTimeoutMs)
    }

    private func release(_ connection: Connection) {
        let healthy = connection.isHealthy
        condition.lock()
        lent -= 1
        if healthy {
            connection.idleSince = Date()
            idle.append(connection)
        } else {
            open -= 1
        }
        condition.signal()
        condition.unlock()
    }

    /// Closes idle connections (at shutdown).
    public func close() {
        condition.lock()
        open -= idle.count
        idle.removeAll()
        condition.unlock()
    }
}
