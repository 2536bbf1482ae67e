import CLibPQ
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A position in the write-ahead log.
public typealias LSN = UInt64

extension LSN {
    /// `16/B374D848`, as PostgreSQL writes it.
    public var walText: String { String(self >> 32, radix: 16, uppercase: true) + "/" + String(self & 0xFFFF_FFFF, radix: 16, uppercase: true) }

    /// Parses `16/B374D848`.
    public init?(walText text: String) {
        let parts = text.split(separator: "/")
        guard parts.count == 2, let high = UInt64(parts[0], radix: 16), let low = UInt64(parts[1], radix: 16),
              high <= 0xFFFF_FFFF, low <= 0xFFFF_FFFF else { return nil }
        self = high << 32 | low
    }
}

/// A logical replication connection (`replication=database`): creates a slot and streams what the `pgoutput` plugin
/// decodes from the write-ahead log, confirming positions back so the server may recycle what is behind them.
///
/// Not thread-safe: one relay thread owns it. `@unchecked Sendable` so that thread can be handed it.
public final class ReplicationConnection: @unchecked Sendable {
    private let handle: OpaquePointer
    private var streaming = false

    /// What the server sent while streaming.
    public enum Message {
        /// Decoded changes (a `pgoutput` message) ending at `end`.
        case data(end: LSN, bytes: [UInt8])
        /// The server has sent everything up to `walEnd`; `replyRequested` asks for a status update now.
        case keepalive(walEnd: LSN, replyRequested: Bool)
    }

    /// Opens a replication connection to the database `url` names. Throws `.unavailable` when it cannot.
    public init(url: String, applicationName: String, connectTimeoutSeconds: Int = 3) throws {
        handle = try connect(url: url, connectTimeoutSeconds: connectTimeoutSeconds,
                             settings: [("application_name", applicationName), ("replication", "database"),
                                        ("options", "-c TimeZone=UTC -c statement_timeout=0")])
    }

    deinit { PQfinish(handle) }

    /// Runs a replication command or (outside streaming) a plain SQL statement without parameters, and returns its
    /// rows as text. Replication connections speak only the simple query protocol: never pass a value from outside.
    @discardableResult
    public func simpleQuery(_ sql: String) throws -> [[String?]] {
        guard let result = PQexec(handle, sql) else {
            throw PostgresError(kind: .unavailable, serverMessage: String(cString: PQerrorMessage(handle)))
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let message = String(cString: PQresultErrorMessage(result))
            if PQstatus(handle) != CONNECTION_OK || state == nil {
                throw PostgresError(kind: .unavailable, sqlState: state, serverMessage: message)
            }
            throw PostgresError.fromServer(sqlState: state, constraint: nil, message: message)
        }
        return (0..<PQntuples(result)).map { r in
            (0..<PQnfields(result)).map { c in
                PQgetisnull(result, r, c) == 1 ? nil : String(cString: PQgetvalue(result, r, c))
            }
        }
    }

    /// Starts streaming `slot` from its confirmed position with `pgoutput`, limited to `publication`.
    public func startStreaming(slot: String, publication: String) throws {
        guard let result = PQexec(handle, "START_REPLICATION SLOT \(slot) LOGICAL 0/0 (proto_version '1', publication_names '\(publication)')") else {
            throw PostgresError(kind: .unavailable, serverMessage: String(cString: PQerrorMessage(handle)))
        }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COPY_BOTH else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            throw PostgresError.fromServer(sqlState: state, constraint: nil, message: String(cString: PQresultErrorMessage(result)))
        }
        streaming = true
    }

    /// The next message, waiting up to `timeout` seconds for one (0: only what has arrived); nil when none came or
    /// `wake` (another descriptor) became readable first, which is read empty. Throws when the stream broke.
    public func next(timeout: TimeInterval, wake: Int32 = -1) throws -> Message? {
        let deadline = Date().addingTimeInterval(timeout)
        var looked = false
        while true {
            var buffer: UnsafeMutablePointer<CChar>?
            let length = PQgetCopyData(handle, &buffer, 1)
            if length > 0, let buffer {
                defer { PQfreemem(buffer) }
                let bytes = UnsafeRawBufferPointer(start: buffer, count: Int(length))
                switch bytes[0] {
                case UInt8(ascii: "w") where length >= 25:
                    return .data(end: bytes.loadBigEndian(at: 9), bytes: Array(bytes[25...]))
                case UInt8(ascii: "k") where length >= 18:
                    return .keepalive(walEnd: bytes.loadBigEndian(at: 1), replyRequested: bytes[17] != 0)
                default:
                    continue
                }
            }
            if length == -1 || length == -2 {
                streaming = false
                throw PostgresError(kind: .unavailable, serverMessage: "the replication stream ended: " + String(cString: PQerrorMessage(handle)))
            }
            // Nothing complete in libpq's buffer: wait for the socket (at least look at it once), then read what came.
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 && looked { return nil }
            looked = true
            var descriptors = [pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0),
                               pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&descriptors, wake >= 0 ? 2 : 1, Int32((max(0, min(remaining, 1)) * 1000).rounded(.up)))
            if ready > 0 && descriptors[1].revents != 0 {
                var sink = [UInt8](repeating: 0, count: 64)
                while read(wake, &sink, sink.count) > 0 {}
                if descriptors[0].revents == 0 { return nil }
            }
            if ready > 0 && descriptors[0].revents != 0 && PQconsumeInput(handle) == 0 {
                streaming = false
                throw PostgresError(kind: .unavailable, serverMessage: String(cString: PQerrorMessage(handle)))
            }
        }
    }

    /// Tells the server everything up to `flushed` is safely handled: the slot's confirmed position moves there, and
    /// a restart streams from it. `replyRequested` asks the server for a keepalive with its position at once.
    public func confirm(_ flushed: LSN, replyRequested: Bool = false) throws {
        var message = [UInt8(ascii: "r")]
        let now = UInt64(max(0, (Date().timeIntervalSince1970 - Double(postgresEpoch)) * 1_000_000))
        for value in [flushed, flushed, flushed, now] { message.appendBigEndian(value) }  // written, flushed, applied, sent at
        message.append(replyRequested ? 1 : 0)
        let sent = message.withUnsafeBufferPointer { p in
            p.baseAddress!.withMemoryRebound(to: CChar.self, capacity: p.count) { PQputCopyData(handle, $0, Int32(p.count)) }
        }
        guard sent == 1, PQflush(handle) == 0 else {
            throw PostgresError(kind: .unavailable, serverMessage: String(cString: PQerrorMessage(handle)))
        }
    }
}

extension UnsafeRawBufferPointer {
    fileprivate func loadBigEndian(at offset: Int) -> UInt64 {
        var value: UInt64 = 0
        for i in 0..<8 { value = value << 8 | UInt64(self[offset + i]) }
        return value
    }
}

/// A message of the `pgoutput` plugin (protocol version 1), the parts a relay of inserted rows needs.
public enum PgOutputMessage {
    /// A transaction begins; it committed at `commitTime`.
    case begin(commitTime: Date)
    /// A table's columns, sent before its first change in a stream.
    case relation(id: UInt32, schema: String, table: String, columns: [String])
    /// A row inserted into the table `relation`: its columns' text bytes (nil for NULL).
    case insert(relation: UInt32, values: [[UInt8]?])
    /// The transaction committed; the stream may be confirmed up to `end`.
    case commit(end: LSN)
    /// Anything else (updates, deletes, types, origins, truncations, messages).
    case other

    /// Decodes one message; throws on a malformed one.
    public init(_ bytes: [UInt8]) throws {
        var reader = Reader(bytes: bytes)
        switch try reader.byte() {
        case UInt8(ascii: "B"):
            _ = try reader.uint64()
            let micros = Int64(bitPattern: try reader.uint64())
            self = .begin(commitTime: Date(timeIntervalSince1970: Double(postgresEpoch) + Double(micros) / 1_000_000))
        case UInt8(ascii: "C"):
            _ = try reader.byte()
            _ = try reader.uint64()
            self = .commit(end: try reader.uint64())
        case UInt8(ascii: "R"):
            let id = try reader.uint32()
            let schema = try reader.string(), table = try reader.string()
            _ = try reader.byte()
            let count = Int(try reader.uint16())
            var columns: [String] = []
            for _ in 0..<count {
                _ = try reader.byte()
                columns.append(try reader.string())
                _ = try reader.uint32(); _ = try reader.uint32()
            }
            self = .relation(id: id, schema: schema, table: table, columns: columns)
        case UInt8(ascii: "I"):
            let relation = try reader.uint32()
            guard try reader.byte() == UInt8(ascii: "N") else { throw PgOutputError() }
            let count = Int(try reader.uint16())
            var values: [[UInt8]?] = []
            values.reserveCapacity(count)
            for _ in 0..<count {
                switch try reader.byte() {
                case UInt8(ascii: "t"): values.append(try reader.text(Int(try reader.uint32())))
                case UInt8(ascii: "n"), UInt8(ascii: "u"): values.append(nil)
                default: throw PgOutputError()
                }
            }
            self = .insert(relation: relation, values: values)
        default:
            self = .other
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var at = 0
        mutating func byte() throws -> UInt8 {
            guard at < bytes.count else { throw PgOutputError() }
            defer { at += 1 }
            return bytes[at]
        }
        mutating func uint(_ size: Int) throws -> UInt64 {
            guard at + size <= bytes.count else { throw PgOutputError() }
            var value: UInt64 = 0
            for i in at..<(at + size) { value = value << 8 | UInt64(bytes[i]) }
            at += size
            return value
        }
        mutating func uint64() throws -> UInt64 { try uint(8) }
        mutating func uint32() throws -> UInt32 { UInt32(try uint(4)) }
        mutating func uint16() throws -> UInt16 { UInt16(try uint(2)) }
        mutating func string() throws -> String {
            guard let end = bytes[at...].firstIndex(of: 0) else { throw PgOutputError() }
            defer { at = end + 1 }
            return String(decoding: bytes[at..<end], as: UTF8.self)
        }
        mutating func text(_ length: Int) throws -> [UInt8] {
            guard length >= 0, at + length <= bytes.count else { throw PgOutputError() }
            defer { at += length }
            return Array(bytes[at..<(at + length)])
        }
    }
}

/// A `pgoutput` message that does not parse.
public struct PgOutputError: Error, CustomStringConvertible {
    public var description: String { "a malformed pgoutput message" }
}
