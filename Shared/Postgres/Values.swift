import Foundation
import Models

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
    /// What SQL NULL reads as: nil (an error) for every type but `Optional`, whose NULL is `.none`.
    static var postgresNull: Self? { get }
}

extension PostgresDecodable {
    public static var postgresNull: Self? { nil }
}

/// A column that may be NULL reads as an optional: `try row["deleted_at", as: Date?.self]`.
extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public init?(postgresBytes: UnsafeBufferPointer<UInt8>) {
        guard let value = Wrapped(postgresBytes: postgresBytes) else { return nil }
        self = .some(value)
    }
    public static var postgresNull: Self? { .some(.none) }
}

/// A closed set kept as its name (a status, a kind, a role): a type declares `PostgresEncodable, PostgresDecodable` and
/// is bound and read as its raw value; a stored name outside the set fails to decode, as a malformed number does,
/// rather than reading as some default.
extension PostgresEncodable where Self: RawRepresentable, RawValue == String {
    public var postgresText: String { rawValue }
}
extension PostgresDecodable where Self: RawRepresentable, RawValue == String {
    public init?(postgresBytes: UnsafeBufferPointer<UInt8>) { self.init(rawValue: String(decoding: postgresBytes, as: UTF8.self)) }
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


// The shared models' closed sets that services keep in their tables.
extension ParcelStatus: PostgresEncodable, PostgresDecodable {}
extension ParcelService: PostgresEncodable, PostgresDecodable {}
extension PaymentMethod: PostgresEncodable, PostgresDecodable {}
extension CourierVettingDecision: PostgresEncodable, PostgresDecodable {}
extension RoomKind: PostgresEncodable, PostgresDecodable {}
extension RoomRole: PostgresEncodable, PostgresDecodable {}
extension RefundDestination: PostgresEncodable, PostgresDecodable {}
extension HabitPeriod: PostgresEncodable, PostgresDecodable {}
extension GroupKind: PostgresEncodable, PostgresDecodable {}
extension PlacePrecision: PostgresEncodable, PostgresDecodable {}
