import Foundation

/// A bounded pool of connections. Connections are lent inside a closure so they always come back;
/// a broken connection is dropped and replaced on the next use, so the pool outlives a database restart.
///
/// `@unchecked Sendable`: all mutable state is guarded by `condition`.
public final class Pool: @unchecked Sendable {
    private let url: String
    private let applicationName: String
    /// The most connections open at once.
    public let maxSize: Int
    private let acquireTimeout: TimeInterval
    private let condition = NSCondition()
    private var idle: [Connection] = []
    private var open = 0
    private var lent = 0

    /// Creates an empty pool; connections open on demand, named `applicationName` in `pg_stat_activity`.
    public init(url: String, maxSize: Int, acquireTimeout: TimeInterval = 5, applicationName: String = "backend") {
        self.url = url
        self.applicationName = applicationName
        self.maxSize = max(1, maxSize)
        self.acquireTimeout = acquireTimeout
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
                    try connection.execute("BEGIN")
                    do {
                        let value = try body(connection)
                        try connection.execute("COMMIT")
                        connection.endTransaction(committed: true)
                        return value
                    } catch {
                        _ = try? connection.execute("ROLLBACK")
                        connection.endTransaction(committed: false)
                        throw error
                    }
                }
            } catch let error as PostgresError where error.kind == .serializationFailure && attempt < 3 {
                continue
            }
        }
    }

    private func acquire() throws -> Connection {
        let deadline = Date().addingTimeInterval(acquireTimeout)
        condition.lock()
        while true {
            while let connection = idle.popLast() {
                condition.unlock()
                if connection.isHealthy {
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
                    let connection = try Connection(url: url, applicationName: applicationName)
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
