import Foundation
import Glibc

/// Random 64-bit words from the kernel's generator (`getentropy`), drawn 32 at a time by each thread: ids and trace
/// ids are made on every request, and a `getrandom` call for each word (five a request) was 7% of a `/healthz`
/// answer's CPU. A word is used once, by the thread that drew it. Not for secrets and codes: those take
/// OpenSSL's `RAND_bytes` (`Crypto`).
public enum RandomWords {
    public static func next() -> UInt64 {
        let pool: Pool
        if let stored = pthread_getspecific(key) {
            pool = Unmanaged<Pool>.fromOpaque(stored).takeUnretainedValue()
        } else {
            pool = Pool()
            pthread_setspecific(key, Unmanaged.passRetained(pool).toOpaque())
        }
        if pool.used == pool.words.count { pool.refill() }
        defer { pool.used += 1 }
        return pool.words[pool.used]
    }

    private final class Pool {
        var words = [UInt64](repeating: 0, count: 32)  // 256 bytes, the most `getentropy` gives in one call
        var used = 32

        func refill() {
            let ok = words.withUnsafeMutableBytes { getentropy($0.baseAddress, $0.count) == 0 }
            precondition(ok, "getentropy failed: \(errno)")
            used = 0
        }
    }

    // The thread's pool, released when the thread ends.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { Unmanaged<Pool>.fromOpaque($0!).release() }
        return key
    }()
}

extension UUID {
    /// A time-ordered UUID version 7 (RFC 9562): 48-bit Unix milliseconds, then 74 random bits.
    public static func v7(at date: Date = Date()) -> UUID {
        let ms = UInt64(max(0, date.timeIntervalSince1970 * 1000))
        let a = RandomWords.next(), b = RandomWords.next()
        func byte(_ v: UInt64, _ i: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: v >> (8 * i)) }
        return UUID(uuid: (byte(ms, 5), byte(ms, 4), byte(ms, 3), byte(ms, 2), byte(ms, 1), byte(ms, 0),
                           byte(a, 0) & 0x0F | 0x70, byte(a, 1), byte(a, 2) & 0x3F | 0x80, byte(a, 3),
                           byte(b, 0), byte(b, 1), byte(b, 2), byte(b, 3), byte(b, 4), byte(b, 5)))
    }

    /// The lower-case canonical text form, as the API and events use it (by hand: Foundation's `uuidString` goes
    /// through `snprintf`, 6% of a newsletter read).
    public var lowercased: String {
        String(unsafeUninitializedCapacity: 36) { out in
            writeLowercased(to: out.baseAddress!)
            return 36
        }
    }

    /// Writes the 36 bytes of `lowercased` at `out` (JSON writes them in place, making no string).
    public func writeLowercased(to out: UnsafeMutablePointer<UInt8>) {
        withUnsafeBytes(of: uuid) { bytes in
            let hex: StaticString = "0123456789abcdef"
            var at = 0
            for (i, byte) in bytes.enumerated() {
                if i == 4 || i == 6 || i == 8 || i == 10 { out[at] = UInt8(ascii: "-"); at += 1 }
                out[at] = hex.utf8Start[Int(byte >> 4)]
                out[at + 1] = hex.utf8Start[Int(byte & 15)]
                at += 2
            }
        }
    }
}

/// RFC 3339 UTC timestamps with milliseconds (`2026-11-30T02:00:00.123Z`), the one format of the API and events.
public enum Timestamp {
    /// Formats `date` as RFC 3339 UTC with milliseconds (by hand: `String(format:)` was a hot spot).
    public static func format(_ date: Date) -> String {
        String(unsafeUninitializedCapacity: 24) { out in
            write(date, to: out.baseAddress!)
            return 24
        }
    }

    /// Writes the 24 bytes of `format(date)` at `out` (JSON writes them in place, making no string).
    public static func write(_ date: Date, to out: UnsafeMutablePointer<UInt8>) {
        let totalMs = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let seconds = totalMs.floorDiv(1000)
        let ms = Int(totalMs - seconds * 1000)
        let days = Int(seconds.floorDiv(86_400))
        let secondOfDay = Int(seconds - Int64(days) * 86_400)
        let (y, m, d) = civil(fromDays: days)
        var at = 0
        func put(_ value: Int, _ width: Int, then separator: UInt8) {
            var v = value
            for i in stride(from: at + width - 1, through: at, by: -1) { out[i] = UInt8(48 + v % 10); v /= 10 }
            out[at + width] = separator
            at += width + 1
        }
        put(y, 4, then: 45); put(m, 2, then: 45); put(d, 2, then: 84)
        put(secondOfDay / 3600, 2, then: 58); put(secondOfDay / 60 % 60, 2, then: 58); put(secondOfDay % 60, 2, then: 46)
        put(ms, 3, then: 90)
    }

    /// Year, month and day of a count of days since 1970-01-01 (proleptic Gregorian; H. Hinnant's algorithm).
    public static func civil(fromDays z0: Int) -> (year: Int, month: Int, day: Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    /// Parses RFC 3339 (any offset, optional fraction); nil when malformed.
    public static func parse(_ text: String) -> Date? {
        let s = Array(text.utf8)
        func num(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= s.count else { return nil }
            var v = 0
            for i in from..<(from + count) {
                let c = s[i]
                guard c >= 48 && c <= 57 else { return nil }
                v = v * 10 + Int(c - 48)
            }
            return v
        }
        guard s.count >= 20, let year = num(0, 4), s[4] == 45, let month = num(5, 2), s[7] == 45,
              let day = num(8, 2), s[10] == UInt8(ascii: "T") || s[10] == UInt8(ascii: "t") || s[10] == 32,
              let hour = num(11, 2), s[13] == 58, let minute = num(14, 2), s[16] == 58, let second = num(17, 2)
        else { return nil }
        guard (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var i = 19
        var fraction = 0.0
        if i < s.count && s[i] == 46 {
            i += 1
            var scale = 0.1
            let start = i
            while i < s.count, s[i] >= 48 && s[i] <= 57 { fraction += Double(s[i] - 48) * scale; scale /= 10; i += 1 }
            if i == start { return nil }
        }
        guard i < s.count else { return nil }
        var offset = 0
        if s[i] == UInt8(ascii: "Z") || s[i] == UInt8(ascii: "z") {
            i += 1
        } else if s[i] == 43 || s[i] == 45 {
            guard let oh = num(i + 1, 2), s.count > i + 3, s[i + 3] == 58, let om = num(i + 4, 2), oh < 24, om < 60
            else { return nil }
            offset = (oh * 3600 + om * 60) * (s[i] == 45 ? -1 : 1)
            i += 6
        } else { return nil }
        guard i == s.count else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900); parts.tm_mon = Int32(month - 1); parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour); parts.tm_min = Int32(minute); parts.tm_sec = Int32(second)
        let check = parts
        let epoch = timegm(&parts)
        // timegm normalises 31 February into March: refuse such dates.
        guard parts.tm_mday == check.tm_mday, parts.tm_mon == check.tm_mon else { return nil }
        return Date(timeIntervalSince1970: Double(epoch - offset) + fraction)
    }
}

extension Int64 {
    func floorDiv(_ d: Int64) -> Int64 {
        let q = self / d
        return (self % d != 0 && (self < 0) != (d < 0)) ? q - 1 : q
    }
}
