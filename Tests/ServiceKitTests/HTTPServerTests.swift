import Foundation
import HTTP
import XCTest

/// The server's reading of HTTP/1.1 as clients really send it: heads in pieces, pipelined requests, chunked bodies,
/// `Expect: 100-continue`, escapes. The handler echoes what it was given.
final class HTTPServerTests: XCTestCase {
    var server: HTTPServer!

    override func setUpWithError() throws {
        server = HTTPServer(port: 0, threads: 2, route: { _, _ in .notFound }) { request, match in
            if case .refused(let error) = match { return error.response }
            let query = request.query.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "&")
            let text = "\(request.method) \(request.path) ?\(query) [\(String(decoding: request.body, as: UTF8.self))]"
            return Response(status: 200, headers: [("Content-Type", "text/plain"), ("X-Injected", "a\r\nSet-Cookie: x=1")],
                            body: Array(text.utf8))
        }
        try server.start()
    }

    override func tearDown() { server.stop(grace: 1) }

    /// Sends `parts` with a pause between them; returns all that came back until the server closed or went quiet.
    func exchange(_ parts: [String], pause: TimeInterval = 0.02, quiet: TimeInterval = 0.5) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = server.boundPort.bigEndian
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        XCTAssertEqual(connected, 0)
        var tv = timeval(tv_sec: 0, tv_usec: Int(quiet * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        for part in parts {
            let bytes = Array(part.utf8)
            _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) }
            Thread.sleep(forTimeInterval: pause)
        }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received += chunk[0..<n]
        }
        return String(decoding: received, as: UTF8.self)
    }

    func bodies(_ text: String) -> [String] {
        text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.components(separatedBy: "\r\n\r\n").dropFirst().joined() }
    }

    func testAHeadInPiecesAndPipelinedRequestsAreAnsweredInOrder() throws {
        let head = "GET /one HTTP/1.1\r\nHost: x\r\n\r\n"
        let text = try exchange(head.map(String.init) + ["GET /two HTTP/1.1\r\nHost: x\r\n\r\nGET /three HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"],
                                pause: 0.002)
        XCTAssertEqual(bodies(text), ["GET /one ? []", "GET /two ? []", "GET /three ? []"])
        XCTAssertTrue(text.hasSuffix("GET /three ? []"), "closed after the request that asked")
    }

    func testChunkedBodiesInPiecesAndExpectContinue() throws {
        let chunked = try exchange(["POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nab",
                                    "cd\r\n3\r", "\nefg\r\n0\r\nTrailer: t\r\n\r\n"])
        XCTAssertEqual(bodies(chunked), ["POST /c ? [abcdefg]"])
        let continued = try exchange(["POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", "hello"])
        XCTAssertTrue(continued.hasPrefix("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"), continued)
        XCTAssertTrue(continued.hasSuffix("POST /e ? [hello]"), continued)
    }

    func testEscapesHTTP10AndHeaderInjection() throws {
        let text = try exchange(["GET /a%20b%00c?q=x+y%26z&q=second&flag HTTP/1.0\r\n\r\n"])
        XCTAssertEqual(bodies(text), ["GET /a b%00c ?flag=&q=x y&z []"], "%00 stays escaped; a repeated name keeps its first value")
        XCTAssertTrue(text.contains("Connection: close\r\n"), "HTTP/1.0 without keep-alive is closed")
        XCTAssertFalse(text.lowercased().contains("set-cookie"), "a header value with CR LF is left out, not split")
    }

    func testMalformedHeadsGetTheErrorContract() throws {
        for (head, status) in [("NOT HTTP\r\n\r\n", 400), ("GET /x HTTP/1.1\r\n\r\n", 400), ("GET /x HTTP/3.0\r\nHost: x\r\n\r\n", 505),
                               ("GET /x HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n", 400)] {
            let text = try exchange([head])
            XCTAssertTrue(text.hasPrefix("HTTP/1.1 \(status) "), text)
            XCTAssertTrue(text.contains(#"{"error":{"code":"#), text)
        }
    }
}
