import Foundation
import Synchronization

/// A Server-Sent Events stream. A handler returns `Response.eventStream(stream)` and keeps `stream` to send on from
/// any thread; the server's thread hears of new events when there are some, so an idle stream costs no thread.
/// A client that falls more than `maxPending` bytes behind is cut off: its stream ends rather than grow memory.
public final class EventStream: Sendable {
    /// How far a client may fall behind (bytes queued and not yet taken by the connection) before it is cut off.
    public static let maxPending = 1 << 20

    private struct State {
        var pending: [UInt8] = []
        var closed = false
        /// The server took everything and waits to hear of more.
        var waiting = false
        var released = false
        /// Tells the server's thread there is something to take; set from `attach` until `release`.
        var wake: (@Sendable () -> Void)?
        var closeHandlers: [@Sendable () -> Void] = []

        /// The call that tells a waiting server (made after the lock is let go).
        mutating func wakeUp() -> (@Sendable () -> Void)? {
            guard waiting, let wake else { return nil }
            waiting = false
            return wake
        }
    }

    private let state = Mutex(State())
    private static let attached = Atomic<Int>(0)

    public init() {}

    /// Streams handed to a client and not yet ended, in this process.
    public static var openCount: Int { attached.load(ordering: .relaxed) }

    /// Ends a stream that will not be handed to a client (refused after it was made): runs its close handlers.
    public func discard() {
        state.withLock { $0.closed = true }
        release()
    }

    /// Whether the stream ended (closed here, or the client went away).
    public var isClosed: Bool { state.withLock { $0.closed || $0.released } }

    /// Sends one event. Multi-line data is split into `data:` lines as the format requires. Returns false when the
    /// client had fallen too far behind and this send ended the stream.
    @discardableResult
    public func send(event: String? = nil, id: String? = nil, data: String) -> Bool {
        append(Self.frame(event: event, id: id, data: data))
    }

    /// Sends an event framed by `frame` (to frame once what many streams send).
    @discardableResult
    public func send(frame: [UInt8]) -> Bool { append(frame) }

    /// The bytes of one event as the format requires: `id:`, `event:`, a `data:` line per line of data, a blank line.
    public static func frame(event: String? = nil, id: String? = nil, data: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(data.utf8.count + 64)
        if let id { out += Array("id: \(oneLine(id))\n".utf8) }
        if let event { out += Array("event: \(oneLine(event))\n".utf8) }
        for line in data.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            out += Array("data: ".utf8)
            out += line
            out.append(UInt8(ascii: "\n"))
        }
        out.append(UInt8(ascii: "\n"))
        return out
    }

    /// Sends a comment line (ignored by clients; keeps proxies and the connection alive).
    public func comment(_ text: String) { append(Array(": \(Self.oneLine(text))\n\n".utf8)) }

    /// Sends a last event, `end` with `{"reason": reason}` (`session_revoked`, `final_state`, `access_lost`), and
    /// closes: the client knows not to reconnect.
    public func end(reason: String) {
        send(event: "end", data: #"{"reason":"\#(reason)"}"#)
        close()
    }

    /// Ends the stream after what is queued.
    public func close() {
        state.withLock { s in
            s.closed = true
            return s.wakeUp()
        }?()
    }

    /// Runs `handler` once when the stream ends, however it ends.
    public func onClose(_ handler: @escaping @Sendable () -> Void) {
        let released = state.withLock { s in
            if !s.released { s.closeHandlers.append(handler) }
            return s.released
        }
        if released { handler() }
    }

    private static func oneLine(_ s: String) -> String { s.replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "\r", with: " ") }

    /// Queues `bytes`; false when that overflowed the client's allowance and ended the stream.
    @discardableResult
    private func append(_ bytes: [UInt8]) -> Bool {
        let (kept, wake) = state.withLock { s -> (Bool, (@Sendable () -> Void)?) in
            guard !s.closed && !s.released else { return (true, nil) }
            if s.pending.count + bytes.count > Self.maxPending {
                s.pending = []
                s.closed = true
                return (false, s.wakeUp())
            }
            s.pending += bytes
            return (true, s.wakeUp())
        }
        wake?()
        return kept
    }

    // MARK: Called by the server

    func attach(wake: @escaping @Sendable () -> Void) {
        state.withLock { $0.wake = wake }
        Self.attached.wrappingAdd(1, ordering: .relaxed)
    }

    /// Takes what is pending, and whether the stream has ended; when there is nothing, the next send wakes the server.
    func take() -> (bytes: [UInt8], ended: Bool) {
        state.withLock { s in
            let bytes = s.pending
            s.pending = []
            if bytes.isEmpty && !s.closed { s.waiting = true }
            return (bytes, s.closed)
        }
    }

    /// The response is finished or the client went away: nothing more will be read.
    func release() {
        let handlers = state.withLock { s in
            guard !s.released else { return [@Sendable () -> Void]() }
            if s.wake != nil { Self.attached.wrappingSubtract(1, ordering: .relaxed) }
            s.released = true
            s.wake = nil
            defer { s.closeHandlers = [] }
            return s.closeHandlers
        }
        handlers.forEach { $0() }
    }
}

extension Response {
    /// A `text/event-stream` response fed by `stream`.
    public static func eventStream(_ stream: EventStream) -> Response {
        var r = Response(status: 200, headers: [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
                                                ("X-Accel-Buffering", "no")])
        r.stream = stream
        return r
    }
}
