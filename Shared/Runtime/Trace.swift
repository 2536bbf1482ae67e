import Foundation
import Glibc
import Models

/// A W3C trace context (`traceparent`, version 00): the trace a request or an event belongs to and the span of the
/// work at hand. The gateway starts one (or passes the client's); each service continues it for the request, writes
/// it into every event the request causes (the CloudEvents distributed-tracing extension), and every consumer and
/// live feed continues it for the event. The work on a thread carries it (`current`), and every log line written
/// meanwhile names its `traceId`.
public struct TraceContext: Sendable, Equatable {
    /// 32 lower-case hex digits, not all zero.
    public let traceId: String
    /// 16 lower-case hex digits, not all zero.
    public let spanId: String
    /// 2 hex digits (`01`: sampled).
    public let flags: String

    /// The `traceparent` header or attribute.
    public var traceparent: String { "00-\(traceId)-\(spanId)-\(flags)" }

    /// A `traceparent` value as W3C Trace Context defines version 00; nil for anything else.
    public init?(traceparent text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard text.utf8.count == 55, parts.count == 4, parts[0] == "00",
              Self.isHex(parts[1], 32), Self.isHex(parts[2], 16), Self.isHex(parts[3], 2),
              parts[1].contains(where: { $0 != "0" }), parts[2].contains(where: { $0 != "0" }) else { return nil }
        traceId = String(parts[1]); spanId = String(parts[2]); flags = String(parts[3])
    }

    private init(traceId: String, spanId: String, flags: String) {
        self.traceId = traceId; self.spanId = spanId; self.flags = flags
    }

    /// A new trace, for work that came with none.
    public static func start() -> TraceContext {
        TraceContext(traceId: randomHex(16), spanId: randomHex(8), flags: "01")
    }

    /// The same trace, a span of its own (this service's part of it).
    public func child() -> TraceContext { TraceContext(traceId: traceId, spanId: Self.randomHex(8), flags: flags) }

    private static func isHex(_ s: Substring, _ count: Int) -> Bool {
        s.utf8.count == count && s.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// `bytes` (a multiple of 8) random bytes as lower-case hex, never all zero: every request makes 24, so written
    /// straight into the string.
    private static func randomHex(_ bytes: Int) -> String {
        while true {
            var any: UInt64 = 0
            let hex = String(unsafeUninitializedCapacity: bytes * 2) { out in
                let digits: StaticString = "0123456789abcdef"
                for w in 0..<(bytes / 8) {
                    var v = RandomWords.next()
                    any |= v
                    for i in 0..<16 { out[w * 16 + i] = digits.utf8Start[Int(v & 0xF)]; v >>= 4 }
                }
                return bytes * 2
            }
            if any != 0 { return hex }
        }
    }

    // MARK: The work on this thread

    /// The context of the work this thread is doing (a request, an event), or nil.
    public static var current: TraceContext? {
        guard let box = pthread_getspecific(key) else { return nil }
        return Unmanaged<Box>.fromOpaque(box).takeUnretainedValue().context
    }

    /// Runs `body` with `context` as this thread's current one, then restores the one before.
    public static func with<T>(_ context: TraceContext?, _ body: () throws -> T) rethrows -> T {
        let previous = pthread_getspecific(key)
        let box = context.map { Unmanaged.passRetained(Box($0)).toOpaque() }
        pthread_setspecific(key, box)
        defer {
            pthread_setspecific(key, previous)
            if let box { Unmanaged<Box>.fromOpaque(box).release() }
        }
        return try body()
    }

    private final class Box {
        let context: TraceContext
        init(_ context: TraceContext) { self.context = context }
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
}
