import CMicroHTTPD
import Foundation
import Synchronization

/// A Server-Sent Events stream. A handler returns `Response.eventStream(stream)` and keeps `stream` to send on from
/// any thread; the connection is suspended while there is nothing to send, so an idle stream costs no server thread.
/// A client that falls more than `maxPending` bytes behind is cut off: its stream ends rather than grow memory.
public final class EventStream: Sendable {
    /// How far a client may fall behind (bytes queued and not yet taken by the connection) before it is cut off.
    public static let maxPending = 1 << 20

    private struct State {
        var pending: [UInt8] = []
        var closed = false
        var suspended = false
        var released = false
        /// Owned by libmicrohttpd; valid from `attach` until `release`.
        nonisolated(unsafe) var connection: OpaquePointer?
        var closeHandlers: [@Sendable () -> Void] = []

        /// Resumes a suspended connection.
        mutating func wake() {
            if suspended, let connection {
                suspended = false
                MHD_resume_connection(connection)
            }
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
            s.wake()
        }
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
        state.withLock { s in
            guard !s.closed && !s.released else { return true }
            if s.pending.count + bytes.count > Self.maxPending {
                s.pending = []
                s.closed = true
                s.wake()
                return false
            }
            s.pending += bytes
            s.wake()
            return true
        }
    }

    // MARK: Called by the server

    func attach(_ connection: OpaquePointer) {
        state.withLock { $0.connection = connection }
        Self.attached.wrappingAdd(1, ordering: .relaxed)
    }

    /// Copies what is pending into `buffer`; -1 at the end; 0 after suspending the connection until there is more.
    func read(into buffer: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        state.withLock { s in
            if !s.pending.isEmpty {
                let n = min(max, s.pending.count)
                s.pending.withUnsafeBytes { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress!, byteCount: n) }
                s.pending.removeFirst(n)
                return n
            }
            if s.closed { return -1 }
            if let connection = s.connection {
                s.suspended = true
                // Allowed here: libmicrohttpd documents the content reader callback as a safe place to suspend.
                MHD_suspend_connection(connection)
            }
            return 0
        }
    }

    /// The response is finished or the client went away: nothing more will be read.
    func release() {
        let handlers = state.withLock { s in
            guard !s.released else { return [@Sendable () -> Void]() }
            if s.connection != nil { Self.attached.wrappingSubtract(1, ordering: .relaxed) }
            s.released = true
            s.connection = nil
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
