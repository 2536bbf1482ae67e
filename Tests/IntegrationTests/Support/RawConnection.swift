import Foundation
import XCTest

/// A plain TCP connection to a service, for requests no well-behaved client sends: malformed heads, slow or endless
/// bodies, many idle connections.
final class RawConnection {
    let fd: Int32
    private(set) var received: [UInt8] = []

    /// Connects to 127.0.0.1:`port`, from the loopback address `from` (another client, as the server sees it).
    init(port: Int, from source: String = "127.0.0.1") throws {
        signal(SIGPIPE, SIG_IGN)
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        guard withUnsafePointer(to: &local, {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }) == 0 else { close(fd); throw TestFailure("cannot bind \(source)") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        guard withUnsafePointer(to: &addr, {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }) == 0 else { close(fd); throw TestFailure("cannot connect to port \(port)") }
        var tv = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// Writes `bytes`; false when the server no longer takes them (closed, or not reading).
    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    @discardableResult
    func write(_ text: String) -> Bool { write(Array(text.utf8)) }

    /// Reads what has arrived within `timeout`; true when the server closed the connection.
    @discardableResult
    func read(for timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        var chunk = [UInt8](repeating: 0, count: 65536)
        repeat {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, 65536, 0) }
            if n == 0 || (n < 0 && errno == ECONNRESET) { return true }  // closed, or reset (nginx resets on a timeout)
            if n > 0 { received += chunk[0..<n] }
        } while Date() < deadline
        return false
    }

    /// The status of the first response, once its head arrived.
    var status: Int? {
        let text = String(decoding: received, as: UTF8.self)
        guard text.contains("\r\n\r\n"), let line = text.split(separator: "\r\n").first else { return nil }
        return Int(line.split(separator: " ").dropFirst().first ?? "")
    }

    /// The first response's body (after its head).
    var body: String {
        let text = String(decoding: received, as: UTF8.self)
        guard let range = text.range(of: "\r\n\r\n") else { return "" }
        return String(text[range.upperBound...])
    }

    /// Sends `request` on a new connection to `port`: the answer must be `status` with the error contract's `code`
    /// in JSON, and the connection closed after it (a server that could not parse a request cannot read on).
    static func assertRefused(_ request: String, port: Int, status: Int, code: String,
                              file: StaticString = #filePath, line: UInt = #line) throws {
        let c = try RawConnection(port: port)
        c.write(request)
        XCTAssertTrue(c.read(for: 2), "closed after the answer: \(request.prefix(40))", file: file, line: line)
        XCTAssertEqual(c.status, status, c.head, file: file, line: line)
        XCTAssertTrue(c.head.contains("content-type: application/json"), c.head, file: file, line: line)
        let error = (try? JSONSerialization.jsonObject(with: Data(c.body.utf8))) as? [String: [String: String]]
        XCTAssertEqual(error?["error"]?["code"], code, c.body, file: file, line: line)
    }

    /// The first response's head, lowercased.
    var head: String {
        let text = String(decoding: received, as: UTF8.self)
        return String(text[..<(text.range(of: "\r\n\r\n")?.lowerBound ?? text.endIndex)]).lowercased()
    }
}
