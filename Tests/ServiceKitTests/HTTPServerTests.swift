@testable import HTTP
import Foundation
import Glibc
import HTTP
import XCTest

/// A plain TCP connection to an in-process server, for what well-behaved clients do not send.
final class TestSocket {
    let fd: Int32
    private(set) var received: [UInt8] = []

    /// Connects to 127.0.0.1:`port` from the loopback address `source` (another client, as the server sees it).
    init(port: UInt16, from source: String = "127.0.0.1") throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { close(fd); throw NSError(domain: "TestSocket", code: Int(errno)) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = port.bigEndian
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(fd); throw NSError(domain: "TestSocket", code: Int(errno)) }
        var tv = timeval(tv_sec: 0, tv_usec: 50_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads until `done` holds for what arrived, the server closes, or `timeout` passes; returns what arrived.
    @discardableResult
    func read(for timeout: TimeInterval = 5, until done: (String) -> Bool = { _ in false }) -> String {
        let deadline = Date().addingTimeInterval(timeout)
        var chunk = [UInt8](repeating: 0, count: 65536)
        while Date() < deadline && !done(text) {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { break }
            if n > 0 { received += chunk[0..<n] }
        }
        return text
    }

    var text: String { String(decoding: received, as: UTF8.self) }
}

/// The server's reading of HTTP/1.1 as clients really send it: heads and bodies in pieces, pipelined requests,
/// `Expect: 100-continue`, escapes. The handler echoes what it was given.
final class HTTPServerTests: XCTestCase {
    var server: HTTPServer!

    override func setUpWithError() throws {
        server = HTTPServer(port: 0, threads: 2, route: { _, _ in .notFound }) { request, match in
            if case .refused(let error) = match { return error.response }
            let query = request.query.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "&")
            let forwarded = request.headers["x-forwarded-for"].map { " xff=\($0)" } ?? ""
            let text = "\(request.method) \(request.path) ?\(query)\(forwarded) [\(String(decoding: request.body, as: UTF8.self))]"
            return Response(status: 200, headers: [("Content-Type", "text/plain"), ("X-Injected", "a\r\nSet-Cookie: x=1")],
                            body: Array(text.utf8))
        }
        try server.start()
    }

    override func tearDown() { server.stop(grace: 1) }

    /// Sends `text` on a new connection; returns all that came back until the server closed.
    func exchange(_ text: String) throws -> String {
        let socket = try TestSocket(port: server.boundPort)
        socket.send(text)
        return socket.read()
    }

    func bodies(_ text: String) -> [String] {
        text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.components(separatedBy: "\r\n\r\n").dropFirst().joined() }
    }

    func testAHeadArrivingAByteAtATimeIsReadOnceWhole() throws {
        let head = Array("\r\nGET /one?a=1 HTTP/1.1\r\nHost: x\r\nX-Long:  v v \r\n\r\nGET /next".utf8)
        let end = head.count - "GET /next".utf8.count
        var scan = Parser.Scan()
        for length in 1..<end {
            switch head[..<length].withUnsafeBytes({ Parser.head($0, scan: &scan) }) {
            case .incomplete: break
            default: XCTFail("complete or refused after \(length) of \(end) bytes")
            }
        }
        guard case .complete(let parsed, let consumed) = head.withUnsafeBytes({ Parser.head($0, scan: &scan) }) else {
            return XCTFail("not complete with the blank line")
        }
        XCTAssertEqual(consumed, end, "the next request's bytes are left")
        XCTAssertEqual([parsed.method, parsed.path, parsed.query["a"], parsed.headers["host"], parsed.headers["x-long"]],
                       ["GET", "/one", "1", "x", "v v"])
    }

    func testAChunkedBodyInPiecesIsReassembled() {
        let body = Array("4;ext=1\r\nabcd\r\n3\r\nefg\r\n0\r\nTrailer: t\r\n\r\nNEXT".utf8)
        // Every split into two pieces, the first piece's leftover carried into the second, as the server does.
        for split in 0...body.count {
            var chunked = Parser.Chunked(), out: [UInt8] = []
            var pending = Array(body[..<split])
            var rest = Array(body[split...])
            var finished: Int?
            for _ in 0..<2 {
                switch pending.withUnsafeBytes({ chunked.read($0, into: &out, limit: 100) }) {
                case .more(let consumed): pending = Array(pending[consumed...]) + rest; rest = []
                case .done(let consumed): finished = consumed; pending = Array(pending[consumed...])
                default: XCTFail("refused at split \(split)")
                }
                if finished != nil { break }
            }
            XCTAssertNotNil(finished, "split \(split)")
            XCTAssertEqual(String(decoding: out, as: UTF8.self), "abcdefg", "split \(split)")
            XCTAssertEqual(String(decoding: pending + rest, as: UTF8.self), "NEXT", "split \(split)")
        }
        var chunked = Parser.Chunked(), out: [UInt8] = []
        guard case .tooLarge = body.withUnsafeBytes({ chunked.read($0, into: &out, limit: 6) }) else {
            return XCTFail("a body past the limit is refused at the chunk that passes it")
        }
    }

    func testPipelinedRequestsAreAnsweredInOrderAndAChunkedBodyIsRead() throws {
        let text = try exchange("GET /one HTTP/1.1\r\nHost: x\r\n\r\n"
                                + "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nabcd\r\n3\r\nefg\r\n0\r\n\r\n"
                                + "GET /three HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(bodies(text), ["GET /one ? []", "POST /c ? [abcdefg]", "GET /three ? []"])
        XCTAssertTrue(text.hasSuffix("GET /three ? []"), "closed after the request that asked")
    }

    /// Stopping, a kept connection is not closed under a client that may be sending on it: its next request is
    /// answered with `Connection: close`, and one that stays idle ends cleanly (the end of the stream, not a reset).
    func testStoppingAnswersTheNextRequestOnAKeptConnectionAndEndsAnIdleOneCleanly() throws {
        let busy = try TestSocket(port: server.boundPort), idle = try TestSocket(port: server.boundPort)
        for socket in [busy, idle] {
            socket.send("GET /one HTTP/1.1\r\nHost: x\r\n\r\n")
            let first = socket.read(until: { $0.hasSuffix("GET /one ? []") })
            XCTAssertFalse(first.contains("Connection: close"), "kept: \(first)")
        }
        let stopped = DispatchSemaphore(value: 0)
        Thread { [server] in server!.stop(grace: 5); stopped.signal() }.start()
        // Stopping once the listener is closed (no new connection is taken).
        let asked = Date()
        while (try? TestSocket(port: server.boundPort)) != nil && Date().timeIntervalSince(asked) < 5 { usleep(1_000) }

        busy.send("GET /two HTTP/1.1\r\nHost: x\r\n\r\n")
        let second = busy.read()
        XCTAssertTrue(second.contains("Connection: close\r\n") && second.hasSuffix("GET /two ? []"), second)
        XCTAssertEqual(busy.read(for: 0.5), second, "then closed, with nothing more")

        let started = Date()
        var ending = ""
        var chunk = [UInt8](repeating: 0, count: 1024)
        while ending.isEmpty && Date().timeIntervalSince(started) < 5 {
            let n = recv(idle.fd, &chunk, chunk.count, 0)
            if n == 0 { ending = "end" } else if n > 0 { ending = "bytes" } else if errno != EAGAIN { ending = String(cString: strerror(errno)) }
        }
        XCTAssertEqual(ending, "end", "an idle connection ends with the end of the stream, nothing more")
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 0.5, "after its client had time to send a request")
        XCTAssertEqual(stopped.wait(timeout: .now() + 5), .success, "the stop ends once both are closed")
    }

    func testABodyIsSentOnlyAfter100Continue() throws {
        let socket = try TestSocket(port: server.boundPort)
        socket.send("POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(socket.read(until: { $0.hasSuffix("\r\n\r\n") }), "HTTP/1.1 100 Continue\r\n\r\n")
        socket.send("hello")
        let continued = socket.read()
        XCTAssertTrue(continued.contains("HTTP/1.1 200 OK\r\n"), continued)
        XCTAssertTrue(continued.hasSuffix("POST /e ? [hello]"), continued)
    }

    func testEscapesHTTP10AndHeaderInjection() throws {
        let text = try exchange("GET /a%20b%00c?q=x+y%26z&q=second&flag HTTP/1.0\r\n\r\n")
        XCTAssertEqual(bodies(text), ["GET /a%20b%00c ?flag=&q=x y&z []"],
                       "the path as sent (the router decodes segments); a repeated query name keeps its first value")
        XCTAssertTrue(text.contains("Connection: close\r\n"), "HTTP/1.0 without keep-alive is closed")
        XCTAssertFalse(text.lowercased().contains("set-cookie"), "a header value with CR LF is left out, not split")
    }

    func testMalformedHeadsGetTheErrorContract() throws {
        for (head, status) in [("NOT HTTP\r\n\r\n", 400), ("GET /x HTTP/1.1\r\n\r\n", 400), ("GET /x HTTP/3.0\r\nHost: x\r\n\r\n", 505),
                               ("GET /x HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n", 400)] {
            let text = try exchange(head)
            XCTAssertTrue(text.hasPrefix("HTTP/1.1 \(status) "), text)
            XCTAssertTrue(text.contains(#"{"error":{"code":"#), text)
        }
    }

    /// Slow uploads of one client (its own address, or the one a trusted proxy names) hold at most a quarter of the
    /// body memory: its next body gets 429 before it is read, while other clients' bodies are still read.
    func testOneClientHoldsAtMostItsShareOfTheBodyMemory() throws {
        // 4 MiB of body memory: a client's share is 1 MiB. 127.0.0.1 is the trusted proxy.
        let limits = ConnectionLimits(total: 64, perClient: 64, streams: 8, exempt: ["127.0.0.1"], bodyMemory: 4 << 20)
        let refusals = LockedRefusals()
        let shared = HTTPServer(port: 0, threads: 1, limits: limits, report: { refusals.add($0, $1) }, route: { _, _ in .notFound }) {
            request, match in
            if case .refused(let error) = match { return error.response }
            return Response(status: 200, body: Array("\(request.body.count) bytes".utf8))
        }
        try shared.start()
        defer { shared.stop(grace: 1) }
        func upload(from source: String, forwardedFor: String? = nil, length: Int = 600_000, send: Int = 1) throws -> TestSocket {
            let socket = try TestSocket(port: shared.boundPort, from: source)
            socket.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: \(length)\r\n"
                        + (forwardedFor.map { "X-Forwarded-For: \($0)\r\n" } ?? "") + "\r\n" + String(repeating: "x", count: send))
            return socket
        }
        func isRefused(_ socket: TestSocket) -> Bool {
            let text = socket.read(for: 1, until: { $0.contains("}") })
            return text.hasPrefix("HTTP/1.1 429 ") && text.contains("Retry-After: 1\r\n") && text.contains(#""code":"rate_limited""#)
        }

        // A client holding one upload (its first may be as large as the route admits) may not start a second,
        // whatever X-Forwarded-For it writes (it is no trusted proxy).
        var held: TestSocket? = try upload(from: "127.0.0.2")
        XCTAssertEqual(held?.read(for: 0.3), "", "the first upload is being read")
        XCTAssertTrue(isRefused(try upload(from: "127.0.0.2", forwardedFor: "203.0.113.9")))
        XCTAssertEqual(refusals.reasons, [.clientBodyMemory])
        XCTAssertEqual(refusals.addresses, ["127.0.0.2"])
        // Another client's upload is read and answered.
        let other = try upload(from: "127.0.0.3", send: 600_000)
        XCTAssertTrue(other.read(until: { $0.hasSuffix("600000 bytes") }).hasPrefix("HTTP/1.1 200 "), other.text)

        // Through the trusted proxy, each client it names has its own share: not the proxy's one address.
        let first = try upload(from: "127.0.0.1", forwardedFor: "198.51.100.1")
        XCTAssertEqual(first.read(for: 0.3), "", "being read")
        let second = try upload(from: "127.0.0.1", forwardedFor: "6.6.6.6, 198.51.100.2", send: 600_000)
        XCTAssertTrue(second.read(until: { $0.hasSuffix("600000 bytes") }).hasPrefix("HTTP/1.1 200 "), "another client behind the proxy")
        XCTAssertTrue(isRefused(try upload(from: "127.0.0.1", forwardedFor: "198.51.100.1")), "the first client's second upload")
        XCTAssertEqual(refusals.addresses.last, "198.51.100.1", "counted against the client, not the proxy")

        // Once its upload is over (here: its connection closed), the client may send another.
        held = nil
        var refusedAgain = true
        let deadline = Date().addingTimeInterval(3)
        while refusedAgain && Date() < deadline { refusedAgain = isRefused(try upload(from: "127.0.0.2")) }
        XCTAssertFalse(refusedAgain, "what the closed upload held is given back")
    }
}

/// What a server's limits turned away, as its `report` heard it.
final class LockedRefusals: @unchecked Sendable {
    private let lock = NSLock()
    private var heard: [(ConnectionRefusal, String)] = []

    func add(_ refusal: ConnectionRefusal, _ address: String) { lock.withLock { heard.append((refusal, address)) } }
    var reasons: [ConnectionRefusal] { lock.withLock { heard.map(\.0) } }
    var addresses: [String] { lock.withLock { heard.map(\.1) } }
}
