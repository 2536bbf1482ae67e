@testable import HTTP
import Foundation
import HTTP
import Web
import XCTest

/// The parser against request smuggling and malformed heads, as RFC 9110 and 9112 say a server must read them: each
/// case is a request as an attacker (or a lenient proxy in front) might send it, with the answer it must get. A
/// request that is served echoes what the server understood, so a case also shows how the request was framed.
extension HTTPServerTests {
    /// The status of every answer, in order, and the body of the first.
    func answers(_ text: String) -> (statuses: [Int], firstBody: String) {
        let parts = text.components(separatedBy: "HTTP/1.1 ").dropFirst()
        return (parts.compactMap { Int($0.prefix(3)) }, bodies(text).first ?? "")
    }

    func testTheCorpusGetsItsAnswers() throws {
        let post = "POST /p HTTP/1.1\r\nHost: x\r\n"
        let cases: [(name: String, request: String, statuses: [Int], body: String?)] = [
            // Content-Length and Transfer-Encoding together: refused, whichever comes first (CL.TE, TE.CL).
            ("CL.TE", post + "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG", [400], nil),
            ("TE.CL", post + "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n5c\r\nGPOST / HTTP/1.1\r\n\r\n0\r\n\r\n", [400], nil),
            // Obfuscated Transfer-Encoding.
            ("TE not chunked", post + "Transfer-Encoding: xchunked\r\n\r\n", [400], nil),
            ("TE space before colon", post + "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n", [400], nil),
            ("TE chunked then identity, one line", post + "Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", [400], nil),
            ("TE chunked then identity, two lines", post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n", [400], nil),
            ("TE chunked twice", post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", [400], nil),
            ("TE gzip, chunked", post + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", [501], nil),
            ("TE with a tab", post + "Transfer-Encoding:\tchunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n", [200], "POST /p ? [abc]"),
            ("TE in HTTP/1.0", "POST /p HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", [400], nil),
            // obs-fold, whitespace and control characters in the head.
            ("obs-fold", post + "X-A: one\r\n two\r\n\r\n", [400], nil),
            ("a header line starting with a space", "GET / HTTP/1.1\r\n Host: x\r\n\r\n", [400], nil),
            ("NUL in a value", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\u{0}b\r\n\r\n", [400], nil),
            ("NUL in the target", "GET /a\u{0}b HTTP/1.1\r\nHost: x\r\n\r\n", [400], nil),
            ("bare CR in a value", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", [400], nil),
            ("bare CR ending the request line", "GET / HTTP/1.1\rHost: x\r\n\r\n", [400], nil),
            // Content-Length.
            ("two different lengths", post + "Content-Length: 1\r\nContent-Length: 2\r\n\r\nab", [400], nil),
            ("a length list", post + "Content-Length: 1, 1\r\n\r\na", [400], nil),
            ("the same length twice", post + "Content-Length: 1\r\nContent-Length: 1\r\nConnection: close\r\n\r\na", [200], "POST /p ? [a]"),
            ("a signed length", post + "Content-Length: +1\r\n\r\na", [400], nil),
            // Host.
            ("two Host lines", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", [400], nil),
            ("Host with a space, a slash and an at", "GET / HTTP/1.1\r\nHost: a b/c@d\r\n\r\n", [400], nil),
            ("Host with a bad port", "GET / HTTP/1.1\r\nHost: a:8o\r\n\r\n", [400], nil),
            ("Host an IPv6 literal", "GET / HTTP/1.1\r\nHost: [::1]:8081\r\nConnection: close\r\n\r\n", [200], "GET / ? []"),
            ("Host a name and port", "GET / HTTP/1.1\r\nHost: api.example.com:443\r\nConnection: close\r\n\r\n", [200], "GET / ? []"),
            ("Host empty", "GET / HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n", [200], "GET / ? []"),
            ("no Host in HTTP/1.1", "GET / HTTP/1.1\r\n\r\n", [400], nil),
            // Chunked framing.
            ("a chunk size overflowing", post + "Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFF\r\n", [400], nil),
            ("a chunk size in 0x form", post + "Transfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n", [400], nil),
            ("a chunk line ending in a bare LF", post + "Transfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", [400], nil),
            ("chunk data ending in a bare LF", post + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\n0\r\n\r\n", [400], nil),
            ("an extension that is not one", post + "Transfer-Encoding: chunked\r\n\r\n2 zz\r\nab\r\n0\r\n\r\n", [400], nil),
            ("extensions as the grammar has them", post + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2 ; a=b;c=\"d;e\"\r\nab\r\n0\r\n\r\n",
             [200], "POST /p ? [ab]"),
            ("a trailer line that is not a field", post + "Transfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\njunk\r\n\r\n", [400], nil),
            ("a trailer field", post + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nab\r\n0\r\nX-T: 1\r\n\r\n",
             [200], "POST /p ? [ab]"),
            ("a trailer past its limit", post + "Transfer-Encoding: chunked\r\n\r\n0\r\n" + String(repeating: "X-T: 1234567890\r\n", count: 600) + "\r\n",
             [400], nil),
            // Lengths.
            ("a request line past 8 KiB", "GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: x\r\n\r\n", [414], nil),
            ("a head past 32 KiB", "GET / HTTP/1.1\r\nHost: x\r\n" + String(repeating: "X-A: 1234567890123456789012345\r\n", count: 1100) + "\r\n",
             [431], nil),
            ("blank lines before the request line count", String(repeating: "\r\n", count: 17 << 10) + "GET / HTTP/1.1\r\nHost: x\r\n\r\n", [431], nil),
            ("a few blank lines before the request line", "\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", [200], "GET / ? []"),
            // Repeated list headers combine in order (RFC 9110, 5.3): the forwarding chain is the whole chain.
            ("two X-Forwarded-For lines", "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-For: 10.0.0.1\r\nConnection: close\r\n\r\n",
             [200], "GET / ? xff=6.6.6.6, 10.0.0.1 []"),
        ]
        for c in cases {
            let (statuses, body) = answers(try exchange(c.request))
            XCTAssertEqual(statuses, c.statuses, c.name)
            if let expected = c.body { XCTAssertEqual(body, expected, c.name) }
        }
    }

    func testAStreamOfBlankLinesIsRefusedAtTheHeadLimitAndClosed() throws {
        let socket = try TestSocket(port: server.boundPort)
        let began = Date()
        let chunk = String(repeating: "\r\n", count: 4096)
        for _ in 0..<256 { socket.send(chunk) }  // 2 MiB, as the probe sent
        let text = socket.read(for: 5)
        XCTAssertTrue(text.hasPrefix("HTTP/1.1 431 "), text)
        XCTAssertLessThan(Date().timeIntervalSince(began), 3, "refused at once, not at the head deadline")
    }

    func testThePathIsSplitBeforeItsSegmentsAreDecoded() {
        var router = Router()
        router.add("GET", "/metrics") { _ in Response(status: 200) }
        router.add("GET", "/v1/users/{id}") { _ in Response(status: 200) }
        if case .found = router.match(method: "GET", path: "/%6detrics") { XCTFail("an escaped letter is not the literal segment") }
        if case .found = router.match(method: "GET", path: "/v1%2Fusers/x") { XCTFail("%2F does not split a segment") }
        guard case .found(_, let params) = router.match(method: "GET", path: "/v1/users/a%2Fb%20c") else {
            return XCTFail("a parameter may hold escapes")
        }
        XCTAssertEqual(params["id"], "a/b c", "decoded after the split: the slash stays inside its segment")
    }
}

/// The parser against h11, a strict independent HTTP/1.1 parser, on requests hypothesis generates (h11_differential.py
/// beside this file): for each, either our server refuses it, or h11 reads the same bytes as one complete request
/// with the same method, path, headers and body.
final class HTTPParserDifferentialTests: XCTestCase {
    func testWhatWeAcceptH11ReadsTheSame() throws {
        let st = try XCTUnwrap(ProcessInfo.processInfo.environment["SCHEMATHESIS_BIN"], "run the tests with deploy/local/stack test")
        let server = HTTPServer(port: 0, threads: 1, route: { _, _ in .notFound }) { request, match in
            if case .refused(let error) = match { return error.response }
            let echo: [String: Any] = ["method": request.method, "path": request.path, "headers": request.headers,
                                       "body": Data(request.body).base64EncodedString()]
            let body = (try? JSONSerialization.data(withJSONObject: echo, options: [.sortedKeys])) ?? Data()
            return Response(status: 200, headers: [("Content-Type", "application/json")], body: Array(body))
        }
        try server.start()
        defer { server.stop(grace: 1) }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("h11_differential.py")
        let python = Process()
        python.executableURL = URL(fileURLWithPath: st).deletingLastPathComponent().appendingPathComponent("python")
        python.arguments = [script.path, String(server.boundPort), "1000"]
        let output = Pipe()
        python.standardOutput = output
        python.standardError = output
        try python.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        python.waitUntilExit()
        XCTAssertEqual(python.terminationStatus, 0, text.suffix(4000).description)
        print(text)
    }
}
