import Foundation
import Models

/// Log levels in increasing severity.
public enum LogLevel: String, Sendable, Comparable {
    case debug, info, warn, error
    var rank: Int { switch self { case .debug: 0; case .info: 1; case .warn: 2; case .error: 3 } }
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rank < b.rank }
}

/// A value in a log line.
public enum LogValue: Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral {
    case string(String)
    case int(Int)
    case double(Double)
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
}

/// Writes one JSON object per line to stderr: `time`, `level`, `service`, `msg`, then the fields, with the `traceId` of
/// the work on this thread (a request's, an event's; `TraceContext.current`). Callers never pass passwords, tokens or
/// image bytes.
public struct Logger: Sendable {
    /// The `service` field.
    public let service: String
    /// Lines below this level are dropped.
    public let minimum: LogLevel

    public init(service: String, minimum: LogLevel = .info) {
        self.service = service; self.minimum = minimum
    }

    public func debug(_ msg: String, _ fields: @autoclosure () -> [String: LogValue] = [:]) { log(.debug, msg, fields()) }
    public func info(_ msg: String, _ fields: @autoclosure () -> [String: LogValue] = [:]) { log(.info, msg, fields()) }
    public func warn(_ msg: String, _ fields: @autoclosure () -> [String: LogValue] = [:]) { log(.warn, msg, fields()) }
    public func error(_ msg: String, _ fields: @autoclosure () -> [String: LogValue] = [:]) { log(.error, msg, fields()) }

    /// Writes one line when `level` is at or above the minimum; `fields` are not even made below it (a debug line on
    /// a hot path costs nothing at `info`).
    public func log(_ level: LogLevel, _ msg: String, _ fields: @autoclosure () -> [String: LogValue] = [:]) {
        guard level >= minimum else { return }
        let fields = fields()
        var line = "{\"time\":\"\(Timestamp.format(Date()))\",\"level\":\"\(level.rawValue)\",\"service\":"
        line += JSONString.quoted(service) + ",\"msg\":" + JSONString.quoted(msg)
        if let trace = TraceContext.current, fields["traceId"] == nil { line += ",\"traceId\":\"" + trace.traceId + "\"" }
        for key in fields.keys.sorted() {
            line += "," + JSONString.quoted(key) + ":"
            switch fields[key]! {
            case .string(let s): line += JSONString.quoted(s)
            case .int(let i): line += String(i)
            case .double(let d): line += Self.milli(d)
            }
        }
        line += "}\n"
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { Foundation.write(2, $0.baseAddress, $0.count) }
    }

    /// `d` with three decimals, as `%.3f` prints it, without Foundation's formatting (a tenth of a request's log line).
    static func milli(_ d: Double) -> String {
        guard d.isFinite else { return "null" }
        guard abs(d) < 1e15 else { return String(format: "%.3f", d) }
        let thousandths = Int((abs(d) * 1000).rounded())
        let fraction = String(thousandths % 1000)
        return (d < 0 && thousandths > 0 ? "-" : "") + String(thousandths / 1000) + "." + String(repeating: "0", count: 3 - fraction.utf8.count) + fraction
    }

    /// A JSON string literal for `text`.
}
