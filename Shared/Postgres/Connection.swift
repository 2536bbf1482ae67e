import CLibPQ
import Foundation
import Models

// MARK: - Connection

/// Opens a libpq connection to `url` with TCP keepalives (a server the network lost is found within about a minute
/// instead of the system's two hours); the URL's own values win over the timeouts and keepalives, `settings` win
/// over the URL's. The host's name is looked up within the connect timeout too (`HostLookup`).
/// Throws `.unavailable` when it cannot connect.
func connect(url: String, connectTimeoutSeconds: Int, settings: [(String, String)]) throws -> OpaquePointer {
    let pairs = [("connect_timeout", String(connectTimeoutSeconds)), ("keepalives", "1"), ("keepalives_idle", "30"),
                 ("keepalives_interval", "10"), ("keepalives_count", "3"), ("tcp_user_timeout", "60000"), ("dbname", url)]
        + (try HostLookup.settings(url: url, timeoutSeconds: connectTimeoutSeconds)) + settings
    let cKeys = pairs.map { strdup($0.0) }
    let cValues = pairs.map { strdup($0.1) }
    defer { cKeys.forEach { free($0) }; cValues.forEach { free($0) } }
    var keyPointers = cKeys.map { UnsafePointer<CChar>($0) } + [nil]
    var valuePointers = cValues.map { UnsafePointer<CChar>($0) } + [nil]
    guard let conn = PQconnectdbParams(&keyPointers, &valuePointers, 1) else {
        throw PostgresError(kind: .unavailable, serverMessage: "out of memory")
    }
    if PQstatus(conn) != CONNECTION_OK {
        let message = String(cString: PQerrorMessage(conn))
        PQfinish(conn)
        throw PostgresError(kind: .unavailable, serverMessage: message.trimmingCharacters(in: .whitespacesAndNewlines))
    }
    // Server notices (e.g. "schema already exists, skipping") would go to stderr as plain text; logs are JSON.
    PQsetNoticeProcessor(conn, { _, _ in }, nil)
    return conn
}

/// A `NOTIFY` received: its channel and payload. (Not `Notification`: Foundation has one.)
public struct PostgresNotification: Sendable, Equatable {
    public let channel: String
    public let payload: String
}

/// One libpq connection. Not thread-safe: the pool lends it to one caller at a time.
///
/// `@unchecked Sendable`: the pool hands a connection to exactly one thread at a time,
/// so the `PGconn` is never used concurrently.
public final class Connection: @unchecked Sendable {
    private let handle: OpaquePointer
    /// Statements prepared on this connection, by SQL text: each is parsed and planned once, then executed by name.
    private var prepared: [String: String] = [:]
    /// When the connection was last returned to the pool.
    var idleSince = Date()
    /// What runs once the current transaction has committed (see `afterCommit`).
    private var commitHooks: [() -> Void] = []
    /// A transaction was begun and BEGIN not sent yet: it goes out with the transaction's first statement.
    private var beginPending = false
    /// Statements of the open transaction whose results nobody reads (`enqueue`), not sent yet: they go out with the
    /// next statement or the commit, in its round trip.
    private var queued: [Bound] = []

    /// Opens a connection from a libpq URI or key/value string. Throws `.unavailable` when it cannot connect.
    /// `applicationName` names the connection in `pg_stat_activity` (the service's name, for a service's pool).
    /// `statementTimeoutMs` and `lockTimeoutMs` (0: none) bound every statement and lock wait; TCP keepalives find a
    /// server the network lost within about a minute instead of the system's two hours.
    public init(url: String, connectTimeoutSeconds: Int = 3, applicationName: String = "backend",
                statementTimeoutMs: Int = 0, lockTimeoutMs: Int = 0) throws {
        let options = "-c TimeZone=UTC -c DateStyle=ISO -c statement_timeout=\(statementTimeoutMs) -c lock_timeout=\(lockTimeoutMs)"
        handle = try connect(url: url, connectTimeoutSeconds: connectTimeoutSeconds,
                             settings: [("options", options), ("application_name", applicationName)])
    }

    deinit { PQfinish(handle) }

    /// Runs `hook` once the transaction in progress has committed, and never if it rolls back; at once outside a
    /// transaction. For work that must see the change, such as waking the outbox relay.
    public func afterCommit(_ hook: @escaping () -> Void) {
        if !inTransaction { hook() } else { commitHooks.append(hook) }
    }

    /// A transaction is open, or begun and waiting for its first statement.
    private var inTransaction: Bool { beginPending || PQtransactionStatus(handle) != PQTRANS_IDLE }

    /// Begins a transaction (for `Pool.withTransaction`). BEGIN is not sent on its own: it goes out with the first
    /// statement, the two in one round trip (a pipeline). Round trips, not the statements' work, are most of what a
    /// short transaction costs both sides (`perf` of dispatch at saturation: a third of PostgreSQL's backends'
    /// time in sending replies), and every transaction had one more than its statements.
    func begin() {
        beginPending = true
    }

    /// Commits what `begin` started, then runs the `afterCommit` hooks; a transaction that ran no statement was
    /// never opened and has nothing to commit.
    func commit() throws {
        // (What was queued goes with the COMMIT, as with any statement.)
        if beginPending && queued.isEmpty { beginPending = false } else { try execute("COMMIT") }
        let hooks = commitHooks
        commitHooks = []
        hooks.forEach { $0() }
    }

    /// Rolls back what `begin` started (also after a failed COMMIT, harmlessly) and drops the hooks.
    func rollback() {
        queued = []  // never sent
        if beginPending { beginPending = false } else { _ = try? execute("ROLLBACK") }
        commitHooks = []
    }

    /// False once the server closed the connection or it broke; checks without blocking.
    public var isHealthy: Bool {
        if PQstatus(handle) != CONNECTION_OK { return false }
        if inTransaction || !queued.isEmpty || PQpipelineStatus(handle) != PQ_PIPELINE_OFF { return false }
        // Reads whatever the server sent while idle (e.g. the goodbye of a restart) without blocking.
        if PQconsumeInput(handle) == 0 { return false }
        return PQstatus(handle) == CONNECTION_OK
    }

    /// Waits up to `timeout` seconds for notifications on the channels this connection listens to (`LISTEN`), and
    /// returns those that have arrived (none when the time ran out). The server delivers them at their transactions'
    /// commits, in commit order. Throws `.unavailable` when the connection broke: what was sent meanwhile is lost, so
    /// a listener reconnects, listens again, and then reloads what it follows.
    public func notifications(timeout: TimeInterval) throws -> [PostgresNotification] {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            guard PQconsumeInput(handle) != 0, PQstatus(handle) == CONNECTION_OK else {
                throw PostgresError(kind: .unavailable, serverMessage: String(cString: PQerrorMessage(handle)))
            }
            var arrived: [PostgresNotification] = []
            while let notice = PQnotifies(handle) {
                arrived.append(PostgresNotification(channel: String(cString: notice.pointee.relname), payload: String(cString: notice.pointee.extra)))
                PQfreemem(notice)
            }
            let remaining = deadline.timeIntervalSinceNow
            if !arrived.isEmpty || remaining <= 0 { return arrived }
            var socket = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
            _ = poll(&socket, 1, Int32((min(remaining, 1) * 1000).rounded(.up)))
        }
    }

    /// Runs one statement with `$1, $2, ...` parameters bound (never interpolated) and returns its rows.
    @discardableResult
    public func query(_ sql: String, _ parameters: [(any PostgresEncodable)?]) throws -> QueryResult {
        guard let result = try execute(sql, parameters, binaryResult: false) else {
            throw PostgresError(kind: .unavailable, serverMessage: String(cString: PQerrorMessage(handle)))
        }
        return try read(result)
    }

    /// Runs a query whose first column is `bytea` and returns that column of the first row as raw bytes
    /// (no hex round trip), or nil when there is no row.
    public func bytes(_ sql: String, _ parameters: [(any PostgresEncodable)?]) throws -> [UInt8]? {
        guard let result = try execute(sql, parameters, binaryResult: true) else {
            throw PostgresError(kind: .unavailable, serverMessage: String(cString: PQerrorMessage(handle)))
        }
        defer { PQclear(result) }
        try check(result)
        guard PQntuples(result) > 0, PQgetisnull(result, 0, 0) == 0 else { return nil }
        let length = Int(PQgetlength(result, 0, 0))
        return PQgetvalue(result, 0, 0).withMemoryRebound(to: UInt8.self, capacity: length) {
            Array(UnsafeBufferPointer(start: $0, count: length))
        }
    }

    /// Runs a statement whose result the caller does not read (an event into the outbox, a row nothing reads back in
    /// the transaction): inside a transaction it is not sent now but with the transaction's next statement or its
    /// commit, in the same round trip, and its error, if any, is thrown there (the transaction fails as it would
    /// have). Outside a transaction it runs at once.
    public func enqueue(_ sql: String, _ parameters: [(any PostgresEncodable)?]) throws {
        guard inTransaction, PQtransactionStatus(handle) != PQTRANS_INERROR else { try execute(sql, parameters); return }
        queued.append(Bound(name: try statementName(for: sql, parameterCount: parameters.count), parameters))
    }

    private func execute(_ sql: String, _ parameters: [(any PostgresEncodable)?], binaryResult: Bool) throws -> OpaquePointer? {
        let statement = Bound(name: try statementName(for: sql, parameterCount: parameters.count), parameters)
        guard beginPending || !queued.isEmpty else { return statement.execute(on: handle, binaryResult: binaryResult) }
        return try pipelined([statement], binaryResult: binaryResult).first
    }

    /// Runs statements that do not depend on one another's results in one round trip (a pipeline, with whatever
    /// waits to be sent), and returns each one's rows, in order: the reads behind one view, say. The first failure is
    /// thrown (the statements after it did not run).
    public func rows(together statements: [(sql: String, parameters: [(any PostgresEncodable)?])]) throws -> [[Row]] {
        let bound = try statements.map { Bound(name: try statementName(for: $0.sql, parameterCount: $0.parameters.count), $0.parameters) }
        let results = try pipelined(bound, binaryResult: false)
        var rows: [[Row]] = []
        for (i, result) in results.enumerated() {
            do { rows.append(try read(result).rows) } catch { results[(i + 1)...].forEach { PQclear($0) }; throw error }
        }
        return rows
    }

    /// Sends what waits (BEGIN, queued statements), then `statements`, in one pipeline: one round trip. Returns the
    /// results of `statements`, for the caller to read and clear; an earlier one's failure is thrown instead, as it
    /// is the one to report (nothing after it ran).
    @discardableResult
    private func pipelined(_ statements: [Bound], binaryResult: Bool) throws -> [OpaquePointer] {
        let begin = beginPending, waiting = queued
        beginPending = false
        queued = []
        let sent = PQenterPipelineMode(handle) == 1
            && (!begin || PQsendQueryParams(handle, "BEGIN", 0, nil, nil, nil, nil, 0) == 1)
            && waiting.allSatisfy { $0.send(on: handle, binaryResult: false) }
            && statements.allSatisfy { $0.send(on: handle, binaryResult: binaryResult) } && PQpipelineSync(handle) == 1
        // Sending fails only on a broken connection; one left in pipeline mode is not healthy, so the pool drops it.
        let results = sent ? pipelineResults() : []
        PQexitPipelineMode(handle)
        guard sent, results.count == (begin ? 1 : 0) + waiting.count + statements.count else {
            results.forEach { PQclear($0) }
            throw PostgresError(kind: .unavailable, serverMessage: String(cString: PQerrorMessage(handle)))
        }
        let earlier = results.count - statements.count
        for i in 0..<earlier {
            do { try check(results[i]) } catch { results[i...].forEach { PQclear($0) }; throw error }
            PQclear(results[i])
        }
        return Array(results[earlier...])
    }

    /// The results of a pipeline, in order, up to its sync: each query's result is followed by a NULL; two NULLs in a
    /// row mean the connection gave out before the sync came.
    private func pipelineResults() -> [OpaquePointer] {
        var results: [OpaquePointer] = []
        var nulls = 0
        while nulls < 2 {
            guard let result = PQgetResult(handle) else { nulls += 1; continue }
            nulls = 0
            if PQresultStatus(result) == PGRES_PIPELINE_SYNC { PQclear(result); break }
            results.append(result)
        }
        return results
    }

    private func check(_ result: OpaquePointer) throws {
        let status = PQresultStatus(result)
        guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let constraint = PQresultErrorField(result, Int32(UInt8(ascii: "n"))).map { String(cString: $0) }
            let message = String(cString: PQresultErrorMessage(result))
            if PQstatus(handle) != CONNECTION_OK || state == nil {
                throw PostgresError(kind: .unavailable, sqlState: state, serverMessage: message)
            }
            throw PostgresError.fromServer(sqlState: state, constraint: constraint, message: message)
        }
    }

    private func read(_ result: OpaquePointer) throws -> QueryResult {
        defer { PQclear(result) }
        try check(result)
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        let names = (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) }
        // Every value's bytes into one array, of the lengths libpq already knows: first where each goes, then the bytes.
        var spans = [(start: Int, count: Int)]()
        spans.reserveCapacity(rowCount * columnCount)
        var total = 0
        for r in 0..<Int32(rowCount) {
            for c in 0..<Int32(columnCount) {
                let length = PQgetisnull(result, r, c) == 1 ? -1 : Int(PQgetlength(result, r, c))
                spans.append((total, length))
                total += max(length, 0)
            }
        }
        let bytes = [UInt8](unsafeUninitializedCapacity: total) { out, count in
            for (i, span) in spans.enumerated() where span.count > 0 {
                memcpy(out.baseAddress! + span.start, PQgetvalue(result, Int32(i / columnCount), Int32(i % columnCount)), span.count)
            }
            count = total
        }
        let rows = (0..<rowCount).map { Row(names: names, bytes: bytes, spans: spans, first: $0 * columnCount) }
        let affected = Int(String(cString: PQcmdTuples(result))) ?? 0
        return QueryResult(rows: rows, affectedRows: affected)
    }

    /// The name of the prepared statement for `sql`, preparing it on first use.
    private func statementName(for sql: String, parameterCount: Int) throws -> String {
        if let name = prepared[sql] { return name }
        let name = "s\(prepared.count)"
        guard let result = PQprepare(handle, name, sql, Int32(parameterCount), nil) else {
            throw PostgresError(kind: .unavailable, serverMessage: String(cString: PQerrorMessage(handle)))
        }
        defer { PQclear(result) }
        try check(result)
        prepared[sql] = name
        return name
    }

    /// Runs a script of several statements with no parameters (migrations only).
    public func executeScript(_ sql: String) throws {
        if beginPending || !queued.isEmpty { try pipelined([], binaryResult: false) }  // (a script cannot go in a pipeline)
        guard let result = PQexec(handle, sql) else {
            throw PostgresError(kind: .unavailable, serverMessage: String(cString: PQerrorMessage(handle)))
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK || status == PGRES_EMPTY_QUERY else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            throw PostgresError.fromServer(sqlState: state, constraint: nil, message: String(cString: PQresultErrorMessage(result)))
        }
    }

    /// Runs one statement and returns its rows.
    public func rows(_ sql: String, _ parameters: [(any PostgresEncodable)?]) throws -> [Row] {
        try query(sql, parameters).rows
    }

    /// Runs one statement and returns its first row, if any.
    public func first(_ sql: String, _ parameters: [(any PostgresEncodable)?]) throws -> Row? {
        try query(sql, parameters).rows.first
    }

    /// Runs one statement and returns how many rows it changed.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [(any PostgresEncodable)?]) throws -> Int {
        try query(sql, parameters).affectedRows
    }

    // MARK: Statements with their values bound (`SQL`)

    /// Runs one statement and returns its rows and how many rows it changed.
    @discardableResult
    public func query(_ sql: SQL) throws -> QueryResult { try query(sql.statement, sql.bindings) }

    /// Runs one statement and returns its rows.
    public func rows(_ sql: SQL) throws -> [Row] { try query(sql.statement, sql.bindings).rows }

    /// Runs one statement and returns its first row, if any.
    public func first(_ sql: SQL) throws -> Row? { try query(sql.statement, sql.bindings).rows.first }

    /// Runs one statement and returns how many rows it changed.
    @discardableResult
    public func execute(_ sql: SQL) throws -> Int { try query(sql.statement, sql.bindings).affectedRows }

    /// `enqueue(_:_:)`: sent with the transaction's next statement or its commit.
    public func enqueue(_ sql: SQL) throws { try enqueue(sql.statement, sql.bindings) }

    /// `bytes(_:_:)`: the first column of the first row as raw bytes.
    public func bytes(_ sql: SQL) throws -> [UInt8]? { try bytes(sql.statement, sql.bindings) }

    /// `rows(together:)` for statements with their values.
    public func rows(together statements: [SQL]) throws -> [[Row]] {
        try rows(together: statements.map { (sql: $0.statement, parameters: $0.bindings) })
    }

    /// The rows as records: `try c.all(ParcelRecord.self, "SELECT \(ParcelRecord.columns) FROM ... WHERE ...")`.
    public func all<R: PostgresRecord>(_ type: R.Type, _ sql: SQL) throws -> [R] { try rows(sql).map(R.init) }

    /// The first row as a record, if any.
    public func one<R: PostgresRecord>(_ type: R.Type, _ sql: SQL) throws -> R? { try first(sql).map(R.init) }

    /// Runs `body` inside a savepoint of the open transaction: when it throws, what it did is undone and the error
    /// rethrown, while the transaction itself goes on (for trying one candidate after another).
    public func withSavepoint<T>(_ body: () throws -> T) throws -> T {
        try enqueue("SAVEPOINT attempt" as SQL)  // (goes with the body's first statement)
        do {
            let value = try body()
            try execute("RELEASE SAVEPOINT attempt" as SQL)
            return value
        } catch {
            try execute("ROLLBACK TO SAVEPOINT attempt" as SQL)
            throw error
        }
    }
}

/// A prepared statement's name and its parameters in libpq's form, kept until sent.
private final class Bound {
    let name: String
    private var lengths: [Int32] = []
    private var formats: [Int32] = []
    private var buffers: [UnsafeMutablePointer<CChar>?] = []

    init(name: String, _ parameters: [(any PostgresEncodable)?]) {
        self.name = name
        buffers = parameters.map { parameter in
            guard let parameter else { lengths.append(0); formats.append(0); return nil }
            if let raw = parameter.postgresBinary {
                let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: max(1, raw.count))
                raw.withUnsafeBytes { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(buffer), byteCount: raw.count) }
                lengths.append(Int32(raw.count)); formats.append(1)
                return buffer
            }
            lengths.append(0); formats.append(0)
            return strdup(parameter.postgresText)
        }
    }

    deinit { buffers.forEach { $0.map { free($0) } } }

    /// Runs it and waits for its result.
    func execute(on handle: OpaquePointer, binaryResult: Bool) -> OpaquePointer? {
        withValues { PQexecPrepared(handle, name, Int32(buffers.count), $0, lengths, formats, binaryResult ? 1 : 0) }
    }

    /// Sends it in pipeline mode.
    func send(on handle: OpaquePointer, binaryResult: Bool) -> Bool {
        withValues { PQsendQueryPrepared(handle, name, Int32(buffers.count), $0, lengths, formats, binaryResult ? 1 : 0) == 1 }
    }

    private func withValues<T>(_ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> T) -> T {
        buffers.map { UnsafePointer<CChar>($0) }.withUnsafeBufferPointer { body($0.baseAddress) }
    }
}
