import Foundation
import XCTest

/// SIGTERM while keep-alive clients send requests back to back (issue 67, 5): every request the server read is
/// answered, and each connection's last answer says `Connection: close`, so no client is left with a request sent and
/// no answer (which it could not safely send again were it not idempotent). Precisely: a client sends nothing after
/// an answer saying `Connection: close` (as every client), and each of the six connections must end that way, with
/// the server's end of the stream after it (no reset, no stray bytes); any other ending (a request sent and no
/// complete answer, by reset or end of stream; a request that could not be sent on a connection the last answer kept)
/// fails, naming the round and connection.
final class DrainTests: XCTestCase {
    var database: TestDatabase!
    override func setUpWithError() throws { database = try TestDatabase() }
    override func tearDown() { database?.drop() }

    func testSIGTERMLeavesNoKeepAliveClientWithARequestUnanswered() throws {
        // A race: several rounds, each a fresh service stopped while six clients are mid-stream.
        for round in 1...5 {
            let auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url])
            let clients = try (0..<6).map { _ in try KeepAliveClient(port: auth.port) }
            let threads = clients.enumerated().map { index, client in
                // `/healthz` is answered by the connection's own thread, the key set by a handler thread: both paths.
                Thread { client.run(paths: index % 2 == 0 ? ["/healthz", "/v1/auth/jwks"] : ["/v1/auth/jwks", "/healthz"]) }
            }
            threads.forEach { $0.start() }
            XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { clients.allSatisfy { $0.answered >= 20 } },
                          "round \(round): the clients are sending")
            let stopping = Date()
            XCTAssertEqual(auth.stop(timeout: 20), 0, "round \(round): exit status 0")
            let took = Date().timeIntervalSince(stopping)
            XCTAssertTrue(TestEnvironment.waitUntil(timeout: 25) { threads.allSatisfy(\.isFinished) }, "round \(round): the clients are done")

            for (index, client) in clients.enumerated() {
                let what = "round \(round), connection \(index): \(client.answered) answered, then \(client.ending)"
                XCTAssertEqual(client.ending, .closedAfterItsAnswer, what)
                XCTAssertEqual(client.unexpectedStatuses, [], what)
            }
            print("round \(round): stopped in \(Int(took * 1000)) ms, \(clients.map(\.answered).reduce(0, +)) answers on six connections")
        }
    }
}

/// One keep-alive connection sending GETs back to back, as an HTTP client's pool does, until an answer says
/// `Connection: close` or the connection ends; it keeps how it ended.
private final class KeepAliveClient: @unchecked Sendable {
    enum Ending: Equatable, CustomStringConvertible {
        case running
        /// The last answer said `Connection: close`, and the server then closed cleanly (no reset, nothing more sent).
        case closedAfterItsAnswer
        /// The last answer said `Connection: close`, but the server then sent more bytes, or reset the connection.
        case closedUncleanly(String)
        /// A request fully sent got no complete answer (`partial`: bytes of an answer that did arrive): the race.
        case unanswered(partial: Int, how: String)
        /// A request could not be sent: the server closed a connection it had said it would keep.
        case notSent(String)

        var description: String {
            switch self {
            case .running: return "running"
            case .closedAfterItsAnswer: return "closed after an answer saying Connection: close"
            case .closedUncleanly(let how): return "Connection: close, then \(how)"
            case .unanswered(let partial, let how): return "a request sent and no answer (\(partial) bytes of one; \(how))"
            case .notSent(let how): return "a request not sent (\(how)) on a connection the last answer kept open"
            }
        }
    }

    private var fd: Int32
    private let state = NSLock()
    private var answeredValue = 0
    private var endingValue = Ending.running
    private var statuses: [Int] = []

    var answered: Int { state.lock(); defer { state.unlock() }; return answeredValue }
    var ending: Ending { state.lock(); defer { state.unlock() }; return endingValue }
    var unexpectedStatuses: [Int] { state.lock(); defer { state.unlock() }; return statuses.filter { $0 != 200 } }

    init(port: Int) throws {
        signal(SIGPIPE, SIG_IGN)
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        guard withUnsafePointer(to: &address, {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }) == 0 else { close(fd); throw TestFailure("cannot connect to port \(port)") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { if fd >= 0 { close(fd) } }

    private func end(_ ending: Ending) { state.lock(); endingValue = ending; state.unlock() }

    func run(paths: [String]) {
        // Closed once done, as a client closes a connection the server ended.
        defer { close(fd); fd = -1 }
        var n = 0
        var buffer: [UInt8] = []
        while true {
            let request = Array("GET \(paths[n % paths.count]) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
            n += 1
            var offset = 0
            while offset < request.count {
                let sent = request[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if sent <= 0 { return end(offset == 0 ? .notSent(String(cString: strerror(errno))) : .unanswered(partial: 0, how: "cut off while sending")) }
                offset += sent
            }
            // One whole answer (the server's carry a Content-Length), within 20 s.
            let deadline = Date().addingTimeInterval(20)
            var answer: (status: Int, close: Bool, length: Int)?
            while true {
                if let (status, close, headLength, bodyLength) = Self.head(buffer), buffer.count >= headLength + bodyLength {
                    buffer.removeFirst(headLength + bodyLength)
                    answer = (status, close, bodyLength)
                    break
                }
                let (bytes, how) = receive()
                if let how { return end(.unanswered(partial: buffer.count, how: how)) }
                buffer += bytes
                if Date() > deadline { return end(.unanswered(partial: buffer.count, how: "none within 20 s")) }
            }
            state.lock(); answeredValue += 1; statuses.append(answer!.status); state.unlock()
            guard answer!.close else { continue }
            // Told to close: the server's side ends cleanly, with nothing after the answer.
            let until = Date().addingTimeInterval(10)
            while Date() < until {
                let (bytes, how) = receive()
                if !bytes.isEmpty || !buffer.isEmpty { return end(.closedUncleanly("\(bytes.count + buffer.count) more bytes")) }
                if how == "closed" { return end(.closedAfterItsAnswer) }
                if let how { return end(.closedUncleanly(how)) }
            }
            return end(.closedUncleanly("not closed within 10 s"))
        }
    }

    /// What arrives within 100 ms; `how` says why nothing more will ("closed" at the end of the stream).
    private func receive() -> ([UInt8], String?) {
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 { return (Array(chunk[0..<n]), nil) }
        if n == 0 { return ([], "closed") }
        if errno == EAGAIN || errno == EINTR { return ([], nil) }
        return ([], String(cString: strerror(errno)))
    }

    /// A complete head at the start of `bytes`: its status, whether it says `Connection: close`, its length and the
    /// body's.
    private static func head(_ bytes: [UInt8]) -> (Int, Bool, Int, Int)? {
        guard let end = bytes.indices.dropLast(3).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 && bytes[$0 + 2] == 13 && bytes[$0 + 3] == 10 })
        else { return nil }
        let lines = String(decoding: bytes[..<end], as: UTF8.self).lowercased().components(separatedBy: "\r\n")
        let status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
        var length = 0, close = false
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2 else { continue }
            if parts[0] == "content-length" { length = Int(parts[1]) ?? 0 }
            if parts[0] == "connection" && parts[1] == "close" { close = true }
        }
        return (status, close, end + 4, length)
    }
}
