import Foundation
import HTTP
import XCTest

/// A client holding many connections, or sending its request head a byte at a time, cannot take a service offline.
final class ConnectionLimitTests: XCTestCase {
    var database: TestDatabase!
    override func setUpWithError() throws { database = try TestDatabase() }
    override func tearDown() { database?.drop() }

    func testAThousandIdleConnectionsFromOneClientDoNotTurnAwayAnother() throws {
        let auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url, "HTTP_MAX_CONNECTIONS_PER_CLIENT": "512"])
        defer { auth.stop() }
        // More than the per-client limit, all from 127.0.0.1 and all silent.
        var idle: [RawConnection] = []
        for _ in 0..<1_100 { if let c = try? RawConnection(port: auth.port) { idle.append(c) } }
        let other = try RawConnection(port: auth.port, from: "127.0.0.2")
        other.write("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        other.read(for: 1)
        XCTAssertEqual(other.status, 200, "another client is served at once")
        XCTAssertTrue(other.body.contains(#"http_refused_total{reason="per_client"}"#), "turning the flood away is counted")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 5) { auth.log.contains(#""reason":"per_client""#) },
                      "and logged")
        idle.removeAll()
        XCTAssertEqual(try APIClient(port: auth.port).get("/healthz").status, 200, "the client is served again once it lets go")
    }

    func testARequestHeadSentAByteAtATimeIsCutOffAtTheDeadline() throws {
        let auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url, "HTTP_HEAD_TIMEOUT_SECONDS": "2"])
        defer { auth.stop() }
        let slow = try RawConnection(port: auth.port)
        slow.write("GET /healthz HTTP/1.1\r\n")
        let started = Date()
        var closed = false
        while !closed && Date().timeIntervalSince(started) < 10 {
            slow.write("X")  // one byte of a header that never ends
            closed = slow.read(for: 0.5)
        }
        XCTAssertTrue(closed, "the connection was closed")
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "at the 2 s deadline, though bytes kept coming")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 3) { auth.log.contains(#""reason":"head_timeout""#) }, auth.log)
    }
}
