import Foundation

/// Reads a Server-Sent Events response as it arrives (chunked transfer decoded), one event at a time.
final class SSEReader {
    private let fd: Int32
    private var raw: [UInt8] = []
    private var decoded: [UInt8] = []
    private(set) var status = 0

    init(port: Int, path: String, token: String, headers: [String: String] = [:]) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        guard withUnsafePointer(to: &addr, {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }) == 0 else { throw TestFailure("cannot connect") }
        var tv = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let extra = headers.map { "\($0.key): \($0.value)\r\n" }.joined()
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nAccept: text/event-stream\r\n\(extra)\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, request.count, 0) }
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

    deinit { close(fd) }

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
