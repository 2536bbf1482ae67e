import CLibPQ
import Foundation
import Models

// MARK: - Errors

/// A PostgreSQL failure. `description` never contains SQL text or parameter values.
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    /// What kind of failure, for mapping to an HTTP status.
    public enum Kind: Sendable, Equatable {
        /// The server cannot be reached, the connection broke, or the pool is exhausted: retry later.
        case unavailable
        /// A unique constraint was violated (23505).
        case uniqueViolation
        /// A foreign key was violated (23503).
        case foreignKeyViolation
        /// A check or not-null constraint was violated (23514, 23502).
        case checkViolation
        /// The value did not fit the column type (22xxx).
        case invalidValue
        /// A serialization failure or deadlock (40001, 40P01): the transaction may be retried.
        case serializationFailure
        /// Anything else: a programming error.
        case other
        /// A row could not be decoded into the Swift type asked for.
        case decoding
    }

    /// The failure kind.
    public let kind: Kind
    /// The SQLSTATE, when the server sent one.
    public let sqlState: String?
    /// The violated constraint's name, when the server sent one.
    public let constraint: String?
    /// The server's message, for logs only (may quote values; never returned to clients).
    public let serverMessage: String

    /// True when the same work may succeed later without change.
    public var isRetriable: Bool { kind == .unavailable || kind == .serializationFailure }

    public var description: String {
        "PostgresError(\(kind), sqlstate: \(sqlState ?? "-"), constraint: \(constraint ?? "-"))"
    }

    @usableFromInline
    init(kind: Kind, sqlState: String? = nil, constraint: String? = nil, serverMessage: String = "") {
        self.kind = kind; self.sqlState = sqlState; self.constraint = constraint; self.serverMessage = serverMessage
    }

    /// The error for a server reply with this SQLSTATE.
    public static func fromServer(sqlState state: String?, constraint: String?, message: String) -> PostgresError {
        let kind: Kind
        switch state {
        case "23505": kind = .uniqueViolation
        case "23503": kind = .foreignKeyViolation
        case "23514", "23502": kind = .checkViolation
        case "40001", "40P01": kind = .serializationFailure
        // A statement past `statement_timeout` or a lock wait past `lock_timeout`: the database is busy, not wrong.
        case "57014", "55P03": kind = .unavailable
        case let s? where s.hasPrefix("22"): kind = .invalidValue
        case let s? where s.hasPrefix("08") || s.hasPrefix("57P") || s == "53300": kind = .unavailable
        default: kind = .other
        }
        return PostgresError(kind: kind, sqlState: state, constraint: constraint, serverMessage: message)
    }
}

// MARK: - Values

/// A Swift value that can be bound as a statement parameter (sent in PostgreSQL's text format).
public protocol PostgresEncodable: Sendable {
    /// The text form PostgreSQL parses for this value.
    var postgresText: String { get }
    /// The binary form, for values better sent as raw bytes (`bytea`); nil sends the text form.
    var postgresBinary: [UInt8]? { get }
}

extension PostgresEncodable {
    public var postgresBinary: [UInt8]? { nil }
}

/// A Swift value that can be read from a result column's text form.
public protocol PostgresDecodable {
    /// Parses the text form from its UTF-8 bytes as the result holds them (no `String` is made for a value that is not
    /// one); nil when it does not fit.
    init?(postgresBytes: UnsafeBufferPointer<UInt8>)
}

extension String: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { self }
    public init?(postgresBytes: UnsafeBufferPointer<UInt8>) { self.init(decoding: postgresBytes, as: UTF8.self) }
}
extension Int: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { String(self) }
    public init?(postgresBytes: UnsafeBufferPointer<UInt8>) {
        guard let value = Int64(postgresBytes: postgresBytes) else { return nil }
        self.init(value)
    }
}
extension Int64: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { String(self) }
    /// Digits with an optional `-`, as PostgreSQL writes an integer; nil past the type's range.
    public init?(postgresBytes b: UnsafeBufferPointer<UInt8>) {
        let negative = b.first == UInt8(ascii: "-")
        let digits = negative ? UnsafeBufferPointer(rebasing: b.dropFirst()) : b
        guard !digits.isEmpty, digits.count <= 19 else { return nil }
        var value: Int64 = 0
        for c in digits {
            guard c >= 48 && c <= 57 else { return nil }
            let (times, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = negative ? times.subtractingReportingOverflow(Int64(c - 48)) : times.addingReportingOverflow(Int64(c - 48))
            guard !o1 && !o2 else { return nil }
            value = next
        }
        self = value
    }
}
extension Double: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { String(self) }
    public init?(postgresBytes: UnsafeBufferPointer<UInt8>) { self.init(String(decoding: postgresBytes, as: UTF8.self)) }
}
extension Bool: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { self ? "t" : "f" }
    public init?(postgresBytes b: UnsafeBufferPointer<UInt8>) {
        switch String(decoding: b, as: UTF8.self) { case "t", "true": self = true; case "f", "false": self = false; default: return nil }
    }
}
extension UUID: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { lowercased }
    /// Parsed by hand into the 16 bytes in place: Foundation's `UUID(uuidString:)` goes through `sscanf`, and an array
    /// for the bytes cost an allocation per value (a third of reading a newsletter's story rows).
    public init?(postgresBytes utf8: UnsafeBufferPointer<UInt8>) {
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let parsed = { () -> Bool in
            guard utf8.count == 36 else { return false }
            return withUnsafeMutableBytes(of: &uuid) { out -> Bool in
                var i = 0, n = 0
                while i < 36 {
                    if i == 8 || i == 13 || i == 18 || i == 23 {
                        guard utf8[i] == UInt8(ascii: "-") else { return false }
                        i += 1
                        continue
                    }
                    guard let high = hexValue(utf8[i]), let low = hexValue(utf8[i + 1]) else { return false }
                    out[n] = high << 4 | low
                    n += 1
                    i += 2
                }
                return true
            }
        }()
        guard parsed else { return nil }
        self.init(uuid: uuid)
    }
    /// The same from text (a UUID a request carries).
    public init?(postgresText: String) {
        var text = postgresText
        guard let value = text.withUTF8({ Self(postgresBytes: $0) }) else { return nil }
        self = value
    }
}

private func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
    default: return nil
    }
}
extension Date: PostgresEncodable, PostgresDecodable {
    /// Sent as Unix seconds through `to_timestamp` semantics is awkward; ISO 8601 with microseconds is exact enough.
    public var postgresText: String {
        // Whole microseconds in integers, so the fraction is always 0...999999 (also before 1970).
        let micros = Int64((timeIntervalSince1970 * 1_000_000).rounded())
        var seconds = micros / 1_000_000
        var fraction = micros % 1_000_000
        if fraction < 0 { fraction += 1_000_000; seconds -= 1 }
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        // Digits by hand: `String(format:)` was an eighth of dispatch's CPU under a flood of location fixes.
        let fields = [(Int(parts.tm_year) + 1900, 4, UInt8(ascii: "-")), (Int(parts.tm_mon) + 1, 2, UInt8(ascii: "-")),
                      (Int(parts.tm_mday), 2, UInt8(ascii: " ")), (Int(parts.tm_hour), 2, UInt8(ascii: ":")),
                      (Int(parts.tm_min), 2, UInt8(ascii: ":")), (Int(parts.tm_sec), 2, UInt8(ascii: ".")),
                      (Int(fraction), 6, UInt8(ascii: "+"))]
        return String(unsafeUninitializedCapacity: 32) { out in
            var at = 0
            for (value, width, separator) in fields {
                var v = value
                for i in stride(from: at + width - 1, through: at, by: -1) { out[i] = UInt8(48 + v % 10); v /= 10 }
                out[at + width] = separator
                at += width + 1
            }
            out[at] = 48; out[at + 1] = 48
            return at + 2
        }
    }
    /// Reads `timestamptz` as the session sends it (the pool fixes `TimeZone=UTC` and ISO dates).
    public init?(postgresBytes: UnsafeBufferPointer<UInt8>) {
        guard let date = PostgresTime.parse(postgresBytes) else { return nil }
        self = date
    }
}

/// A value whose binary form PostgreSQL reads as an array element (`uuid_send`, `float8_send`, ...).
public protocol PostgresBinaryElement: PostgresEncodable {
    /// The element type's OID, which an array's header names and PostgreSQL checks against the parameter's type.
    static var postgresTypeOID: UInt32 { get }
    /// How many bytes its binary form takes.
    var postgresBinaryCount: Int { get }
    /// Appends the value's binary form.
    func appendPostgresBinary(to out: inout [UInt8])
}

extension UUID: PostgresBinaryElement {
    public static var postgresTypeOID: UInt32 { 2950 }
    public var postgresBinaryCount: Int { 16 }
    public func appendPostgresBinary(to out: inout [UInt8]) { withUnsafeBytes(of: uuid) { out.append(contentsOf: $0) } }
}
extension Double: PostgresBinaryElement {
    public static var postgresTypeOID: UInt32 { 701 }  // float8
    public var postgresBinaryCount: Int { 8 }
    public func appendPostgresBinary(to out: inout [UInt8]) { out.appendBigEndian(bitPattern) }
}
extension Bool: PostgresBinaryElement {
    public static var postgresTypeOID: UInt32 { 16 }
    public var postgresBinaryCount: Int { 1 }
    public func appendPostgresBinary(to out: inout [UInt8]) { out.append(self ? 1 : 0) }
}
extension Date: PostgresBinaryElement {
    public static var postgresTypeOID: UInt32 { 1184 }  // timestamptz
    public var postgresBinaryCount: Int { 8 }
    /// Whole microseconds since 2000-01-01 UTC, rounded as the text form is.
    public func appendPostgresBinary(to out: inout [UInt8]) {
        out.appendBigEndian(UInt64(bitPattern: Int64((timeIntervalSince1970 * 1_000_000).rounded()) - postgresEpoch * 1_000_000))
    }
}

/// PostgreSQL's epoch, 2000-01-01 UTC, in seconds since 1970: its binary times count microseconds from there.
let postgresEpoch: Int64 = 946_684_800

extension [UInt8] {
    /// Appends `value` in network byte order, as PostgreSQL's binary forms and protocol messages have it.
    @usableFromInline
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }
}

/// A one-dimensional array parameter (`$1::uuid[]`, `$2::float8[]`, ...); nil elements are NULL. For statements that
/// take a whole batch at once through `unnest`. Arrays of `PostgresBinaryElement`s are sent in PostgreSQL's binary
/// form: neither side writes or parses text (`array_in` and the formatting were a tenth of a batch of location fixes
/// on each side). Their parameter must then have exactly the elements' type: a `[UUID]` for a `uuid[]`, not a
/// `text[]`. Other arrays are sent as text.
public struct PostgresArray: PostgresEncodable {
    public let postgresBinary: [UInt8]?
    @usableFromInline let text: @Sendable () -> String
    public var postgresText: String { text() }

    public init(_ elements: [(any PostgresEncodable)?]) {
        postgresBinary = nil
        let text = Self.text(elements)
        self.text = { text }
    }

    // Inlinable, so that a caller's element type is known where the bytes are written: a generic loop in this module
    // looked up the element's witnesses for every element of a batch.
    @inlinable
    public init<Element: PostgresBinaryElement>(_ elements: [Element]) {
        var out = Self.header(Element.self, count: elements.count, hasNulls: false)
        for element in elements {
            out.appendBigEndian(Int32(element.postgresBinaryCount))
            element.appendPostgresBinary(to: &out)
        }
        postgresBinary = out
        text = { Self.text(elements.map(Optional.some)) }
    }

    @inlinable
    public init<Element: PostgresBinaryElement>(_ elements: [Element?]) {
        var out = Self.header(Element.self, count: elements.count, hasNulls: elements.contains { $0 == nil })
        for element in elements {
            guard let element else { out.appendBigEndian(Int32(-1)); continue }
            out.appendBigEndian(Int32(element.postgresBinaryCount))
            element.appendPostgresBinary(to: &out)
        }
        postgresBinary = out
        text = { Self.text(elements) }
    }

    /// The binary form's header, with room for its elements.
    @usableFromInline
    static func header<Element: PostgresBinaryElement>(_: Element.Type, count: Int, hasNulls: Bool) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(20 + count * 20)
        out.appendBigEndian(Int32(count == 0 ? 0 : 1))  // dimensions
        out.appendBigEndian(Int32(hasNulls ? 1 : 0))
        out.appendBigEndian(Element.postgresTypeOID)
        if count > 0 {
            out.appendBigEndian(Int32(count))
            out.appendBigEndian(Int32(1))  // lower bound
        }
        return out
    }

    /// A `text[]` parameter, in binary form (the elements' UTF-8): long strings are not escaped here nor parsed
    /// character by character there. Strings are not binary elements of their own: a `[String]` of ids may be bound
    /// to a `uuid[]`, which only the text form allows.
    public init(texts elements: [String]) {
        self.init(elements.map(TextElement.init))
    }

    /// The text form, `{"a","b",NULL}`.
    @usableFromInline
    static func text(_ elements: [(any PostgresEncodable)?]) -> String {
        // Bytes, not Foundation's replacingOccurrences (through NSString, a fifth of a batch of location fixes).
        var out: [UInt8] = [UInt8(ascii: "{")]
        out.reserveCapacity(elements.count * 24)
        for (i, element) in elements.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            guard let element else { out += "NULL".utf8; continue }
            out.append(UInt8(ascii: "\""))
            for c in element.postgresText.utf8 {
                if c == UInt8(ascii: "\\") || c == UInt8(ascii: "\"") { out.append(UInt8(ascii: "\\")) }
                out.append(c)
            }
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }
}

/// A string as an element of a binary `text[]` (`PostgresArray(texts:)`).
private struct TextElement: PostgresBinaryElement {
    let value: String
    static var postgresTypeOID: UInt32 { 25 }  // text
    var postgresText: String { value }
    var postgresBinaryCount: Int { value.utf8.count }
    func appendPostgresBinary(to out: inout [UInt8]) { out.append(contentsOf: value.utf8) }
}

/// Raw bytes, sent and read as `bytea` in hex form.
public struct ByteArray: PostgresEncodable, PostgresDecodable, Equatable {
    /// The bytes.
    public var bytes: [UInt8]
    public init(_ bytes: [UInt8]) { self.bytes = bytes }
    public var postgresBinary: [UInt8]? { bytes }
    public var postgresText: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = Array("\\x".utf8)
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }
    public init?(postgresBytes chars: UnsafeBufferPointer<UInt8>) {
        guard chars.count >= 2, chars[0] == 92, chars[1] == 120, chars.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c { case 48...57: return c - 48; case 97...102: return c - 87; case 65...70: return c - 55; default: return nil }
        }
        var out = [UInt8]()
        out.reserveCapacity((chars.count - 2) / 2)
        var i = 2
        while i < chars.count {
            guard let hi = nibble(chars[i]), let lo = nibble(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        bytes = out
    }
}

/// Parses the timestamps PostgreSQL sends (ISO 8601 with `T`, optional fraction, `Z`).
enum PostgresTime {
    /// `2026-11-30 02:00:00.123456+00` (also with `T` and `Z`), read from its bytes: the session's time zone is UTC.
    static func parse(_ s: UnsafeBufferPointer<UInt8>) -> Date? {
        guard s.count >= 20 else { return nil }
        func num(_ a: Int, _ n: Int) -> Int? {
            var v = 0
            for i in a..<(a + n) { let c = s[i]; guard c >= 48 && c <= 57 else { return nil }; v = v * 10 + Int(c - 48) }
            return v
        }
        guard let y = num(0, 4), let mo = num(5, 2), let d = num(8, 2), let h = num(11, 2), let mi = num(14, 2),
              let se = num(17, 2), s[4] == 45, s[7] == 45, s[10] == 32 || s[10] == 84, s[13] == 58, s[16] == 58,
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, se < 61 else { return nil }
        var i = 19
        var micros = 0
        if s[i] == 46 {
            i += 1
            var scale = 100_000
            while i < s.count, s[i] >= 48 && s[i] <= 57 { micros += Int(s[i] - 48) * scale; scale /= 10; i += 1 }
        }
        let rest = s.count - i
        guard (rest == 1 && s[i] == 90) || (rest == 3 && s[i] == 43 && s[i + 1] == 48 && s[i + 2] == 48) else { return nil }
        // Days from 1970-01-01 of the civil date (Howard Hinnant's days_from_civil).
        let yy = mo <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
        let seconds = days * 86_400 + h * 3600 + mi * 60 + se
        return Date(timeIntervalSince1970: Double(seconds) + Double(micros) / 1_000_000)
    }
}

// MARK: - Rows

/// One result row; columns are read by name and decoded into Swift types.
///
/// Decoding is `@inlinable` so that it is specialized for each type where it is called: through the generic entry
/// point, looking up the type's metadata cost a tenth of a newsletter read.
public struct Row: Sendable {
    /// The columns' names, shared by the rows of a result. Found by a scan (from the end: of two columns of one name,
    /// the later counts): a row has a few columns, and comparing names (most of them short enough to be held inline)
    /// costs less than hashing one.
    @usableFromInline let names: [String]
    /// The values' text of every row of the result, one after another, and where each value is in it (`count` -1:
    /// NULL), row after row: shared by the rows, so that reading a result makes no allocation per row or value.
    @usableFromInline let bytes: [UInt8]
    @usableFromInline let spans: [(start: Int, count: Int)]
    /// Where this row's values begin in `spans`.
    @usableFromInline let first: Int

    /// The column's value, or nil for SQL NULL. Throws when the column is missing or does not decode.
    @inlinable
    public func decode<T: PostgresDecodable>(_ column: String, as type: T.Type = T.self) throws -> T? {
        guard let index = names.lastIndex(of: column) else {
            throw PostgresError(kind: .decoding, serverMessage: "no column \(column)")
        }
        let span = spans[first + index]
        guard span.count >= 0 else { return nil }
        guard let value = bytes.withUnsafeBufferPointer({ T(postgresBytes: UnsafeBufferPointer(rebasing: $0[span.start..<span.start + span.count])) })
        else {
            throw PostgresError(kind: .decoding, serverMessage: "column \(column) is not \(T.self)")
        }
        return value
    }

    /// The column's value; throws on NULL.
    @inlinable
    public subscript<T: PostgresDecodable>(_ column: String, as type: T.Type = T.self) -> T {
        get throws {
            guard let value = try decode(column, as: T.self) else {
                throw PostgresError(kind: .decoding, serverMessage: "column \(column) is NULL")
            }
            return value
        }
    }
}

/// The rows of a statement and how many rows it changed.
public struct QueryResult: Sendable {
    /// The returned rows.
    public let rows: [Row]
    /// Rows inserted, updated or deleted (0 for SELECT).
    public let affectedRows: Int
}

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
    public func query(_ sql: String, _ parameters: [(any PostgresEncodable)?] = []) throws -> QueryResult {
        guard let result = try execute(sql, parameters, binaryResult: false) else {
            throw PostgresError(kind: .unavailable, serverMessage: String(cString: PQerrorMessage(handle)))
        }
        return try read(result)
    }

    /// Runs a query whose first column is `bytea` and returns that column of the first row as raw bytes
    /// (no hex round trip), or nil when there is no row.
    public func bytes(_ sql: String, _ parameters: [(any PostgresEncodable)?] = []) throws -> [UInt8]? {
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
    public func enqueue(_ sql: String, _ parameters: [(any PostgresEncodable)?] = []) throws {
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
    public func rows(_ sql: String, _ parameters: [(any PostgresEncodable)?] = []) throws -> [Row] {
        try query(sql, parameters).rows
    }

    /// Runs one statement and returns its first row, if any.
    public func first(_ sql: String, _ parameters: [(any PostgresEncodable)?] = []) throws -> Row? {
        try query(sql, parameters).rows.first
    }

    /// Runs one statement and returns how many rows it changed.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [(any PostgresEncodable)?] = []) throws -> Int {
        try query(sql, parameters).affectedRows
    }

    /// Runs `body` inside a savepoint of the open transaction: when it throws, what it did is undone and the error
    /// rethrown, while the transaction itself goes on (for trying one candidate after another).
    public func withSavepoint<T>(_ body: () throws -> T) throws -> T {
        try enqueue("SAVEPOINT attempt")  // (goes with the body's first statement)
        do {
            let value = try body()
            try execute("RELEASE SAVEPOINT attempt")
            return value
        } catch {
            try execute("ROLLBACK TO SAVEPOINT attempt")
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
