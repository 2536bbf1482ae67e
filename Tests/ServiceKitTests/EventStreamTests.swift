import Foundation
import HTTP
import WireClient
import XCTest

/// Server-Sent Events through the real server, in process.
final class EventStreamTests: XCTestCase {
    func freePort() -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return UInt16(bigEndian: addr.sin_port)
    }

    final class Box: @unchecked Sendable {
        let lock = NSLock()
        var streams: [EventStream] = []
        func add(_ s: EventStream) { lock.lock(); streams.append(s); lock.unlock() }
        var all: [EventStream] { lock.lock(); defer { lock.unlock() }; return streams }
    }

    func server(_ box: Box) throws -> HTTPServer {
        let server = HTTPServer(port: freePort(), threads: 2, route: { _, _ in .notFound }) { request, _ in
            let stream = EventStream()
            box.add(stream)
            if request.path == "/ticks" {
                // Sent from another thread, with pauses, so the server waits for each event in between.
                Thread {
                    for i in 1...3 {
                        Thread.sleep(forTimeInterval: 0.05)
                        stream.send(event: "tick", id: String(i), data: "n=\(i)\nline two")
                    }
                    stream.close()
                }.start()
            }
            return .eventStream(stream)
        }
        try server.start()
        return server
    }

    func testEventsArriveInOrderAndTheStreamEnds() throws {
        let box = Box()
        let server = try server(box)
        defer { server.stop(grace: 1) }
        let r = try HTTPClient(port: Int(server.port), timeout: 10).request("GET", "/ticks")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.headers["content-type"], "text/event-stream")
        XCTAssertEqual(r.text, (1...3).map { "id: \($0)\nevent: tick\ndata: n=\($0)\ndata: line two\n\n" }.joined())
        XCTAssertTrue(TestWait.until(5) { box.all.first?.isClosed == true })
    }

    func testStoppingTheServerEndsIdleStreams() throws {
        let box = Box()
        let server = try server(box)
        let port = Int(server.port)
        let result = ResultBox()
        let reader = Thread {
            result.set((try? HTTPClient(port: port, timeout: 10).request("GET", "/idle"))?.status ?? -1)
        }
        reader.start()
        XCTAssertTrue(TestWait.until(5) { !box.all.isEmpty })
        let started = Date()
        server.stop(grace: 5)
        XCTAssertLessThan(Date().timeIntervalSince(started), 4, "an idle stream does not hold the shutdown")
        XCTAssertTrue(TestWait.until(5) { result.get() == 200 }, "the client sees the stream end")
        XCTAssertTrue(box.all.allSatisfy(\.isClosed))
    }

    func testAClientThatFallsTooFarBehindIsCutOffNotBuffered() {
        let stream = EventStream()  // nobody reads it: as a client that stopped reading
        let closed = ResultBox()
        stream.onClose { closed.set(1) }
        let event = String(repeating: "x", count: 1000)
        var sent = 0
        while stream.send(event: "e", data: event) { sent += 1 }
        XCTAssertEqual(sent, EventStream.maxPending / "event: e\ndata: \(event)\n\n".utf8.count, "1 MiB is held for a slow client")
        XCTAssertTrue(stream.isClosed, "then the stream ends instead of growing")
        XCTAssertTrue(stream.send(data: "later"), "sends after the end are dropped quietly")
    }

    func testAClientThatGoesAwayIsNoticed() throws {
        let box = Box()
        let server = try server(box)
        defer { server.stop(grace: 1) }
        var client: TestSocket? = try TestSocket(port: server.port)
        client?.send("GET /idle HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(TestWait.until(5) { !box.all.isEmpty })
        client = nil  // closes the socket
        XCTAssertTrue(TestWait.until(10) { server.pingStreams(); return box.all.first?.isClosed == true },
                      "the server notices the closed socket")
        XCTAssertTrue(TestWait.until(5) { server.openStreams().isEmpty })
    }
}

final class ResultBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Int?
    func set(_ v: Int) { lock.lock(); value = v; lock.unlock() }
    func get() -> Int? { lock.lock(); defer { lock.unlock() }; return value }
}

enum TestWait {
    /// Polls `condition` every 20 ms for up to `seconds`.
    static func until(_ seconds: TimeInterval, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return condition()
    }
}
