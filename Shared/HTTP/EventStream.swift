import CMicroHTTPD
import Foundation

/// A Server-Sent Events stream. A handler returns `Response.eventStream(stream)` and keeps `stream` to send on from
/// any thread; the connection is suspended while there is nothing to send, so an idle stream costs no server thread.
///
/// `@unchecked Sendable`: all state is guarded by `lock`; libmicrohttpd calls `read` on its thread.
public final class EventStream: @unchecked Sendable {
    private let lock = NSLock()
    private var pending: [UInt8] = []
    private var closed = false
    private var suspended = false
    private var released = false
    private var connection: OpaquePointer?
    private var closeHandlers: [@Sendable () -> Void] = []

    public init() {}

    /// Whether the stream ended (closed here, or the client went away).
    public var isClosed: Bool { lock.lock(); defer { lock.unlock() }; return closed || released }

    /// Sends one event. Multi-line data is split into `data:` lines as the format requires.
    public func send(event: String? = nil, id: String? = nil, data: String) {
        var text = ""
        if let id { text += "id: \(Self.oneLine(id))\n" }
        if let event { text += "event: \(Self.oneLine(event))\n" }
        for line in data.split(separator: "\n", omittingEmptySubsequences: false) { text += "data: \(line)\n" }
        append(Array((text + "\n").utf8))
    }

    /// Sends a comment line (ignored by clients; keeps proxies and the connection alive).
    public func comment(_ text: String) { append(Array(": \(Self.oneLine(text))\n\n".utf8)) }

    /// Ends the stream after what is queued.
    public func close() {
        lock.lock()
        closed = true
        wake()
        lock.unlock()
    }

    /// Runs `handler` once when the stream ends, however it ends.
    public func onClose(_ handler: @escaping @Sendable () -> Void) {
        lock.lock()
        if released { lock.unlock(); handler(); return }
        closeHandlers.append(handler)
        lock.unlock()
    }

    private static func oneLine(_ s: String) -> String { s.replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "\r", with: " ") }

    private func append(_ bytes: [UInt8]) {
        lock.lock()
        if !closed && !released {
            pending += bytes
            wake()
        }
        lock.unlock()
    }

    /// Resumes a suspended connection; the caller holds `lock`.
    private func wake() {
        if suspended, let connection {
            suspended = false
            MHD_resume_connection(connection)
        }
    }

    // MARK: Called by the server

    func attach(_ connection: OpaquePointer) {
        lock.lock(); self.connection = connection; lock.unlock()
    }

    /// Copies what is pending into `buffer`; -1 at the end; 0 after suspending the connection until there is more.
    func read(into buffer: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        lock.lock(); defer { lock.unlock() }
        if !pending.isEmpty {
            let n = min(max, pending.count)
            pending.withUnsafeBytes { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress!, byteCount: n) }
            pending.removeFirst(n)
            return n
        }
        if closed { return -1 }
        if let connection {
            suspended = true
            // Allowed here: libmicrohttpd documents the content reader callback as a safe place to suspend.
            MHD_suspend_connection(connection)
        }
        return 0
    }

    /// The response is finished or the client went away: nothing more will be read.
    func release() {
        lock.lock()
        released = true
        connection = nil
        let handlers = closeHandlers
        closeHandlers = []
        lock.unlock()
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
