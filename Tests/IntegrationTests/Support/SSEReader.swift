import Foundation

/// Reads a Server-Sent Events response as it arrives (chunked transfer decoded), one event at a time.
final class SSEReader {
    private let connection: RawConnection
    private var fd: Int32 { connection.fd }
    private var raw: [UInt8] = []
    private var decoded: [UInt8] = []
    private(set) var status = 0

    /// Opens `path` with `token` as its bearer token (none: the path carries a stream ticket).
    init(port: Int, path: String, token: String?, headers: [String: String] = [:]) throws {
        connection = try RawConnection(port: port)
        let extra = (token.map { ["Authorization": "Bearer \($0)"] } ?? [:]).merging(headers) { a, _ in a }
            .map { "\($0.key): \($0.value)\r\n" }.joined()
        connection.write("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\(extra)\r\n")
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let end = find([13, 10, 13, 10], in: raw) {
                let head = String(decoding: raw[0..<end], as: UTF8.self)
                status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                raw.removeFirst(end + 4)
                return
            }
            fill()
        }
        throw TestFailure("no response head")
    }

    private func find(_ needle: [UInt8], in hay: [UInt8]) -> Int? {
        guard hay.count >= needle.count else { return nil }
        return (0...(hay.count - needle.count)).first { Array(hay[$0..<($0 + needle.count)]) == needle }
    }

    private func fill() {
        var chunk = [UInt8](repeating: 0, count: 16384)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, 16384, 0) }
        if n > 0 { raw += chunk[0..<n] }
        if n == 0 { ended = true }
        // Chunked framing: size line, bytes, CRLF.
        while let lineEnd = find([13, 10], in: raw), let size = Int(String(decoding: raw[0..<lineEnd], as: UTF8.self)
            .split(separator: ";").first ?? "", radix: 16), raw.count >= lineEnd + 2 + size + 2 {
            decoded += raw[(lineEnd + 2)..<(lineEnd + 2 + size)]
            raw.removeFirst(lineEnd + 2 + size + 2)
            if size == 0 { ended = true }  // the last chunk: the server ended the stream
        }
    }

    /// Whether the server ended the stream (the connection closed).
    private(set) var ended = false

    /// The next event (comments skipped), or nil after `timeout` or at the end of the stream.
    func next(timeout: TimeInterval = 20) -> (event: String, data: String, id: String?)? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            while let end = find([10, 10], in: decoded) {
                let block = String(decoding: decoded[0..<end], as: UTF8.self)
                decoded.removeFirst(end + 2)
                var event = "message", data: [String] = [], id: String?
                for line in block.split(separator: "\n") {
                    if line.hasPrefix("event: ") { event = String(line.dropFirst(7)) }
                    if line.hasPrefix("data: ") { data.append(String(line.dropFirst(6))) }
                    if line.hasPrefix("id: ") { id = String(line.dropFirst(4)) }
                }
                if !data.isEmpty { return (event, data.joined(separator: "\n"), id) }
            }
            if ended { return nil }
            fill()
        }
        return nil
    }
}
