import Foundation
import XCTest

/// What one unauthenticated or hostile client tried against a service, each with the bounded answer it now gets:
/// uploads without credentials refused before their body, bodies in flight bounded in memory (in all and per client)
/// and in time, a locked table answered with a quick 503 while probes stay fast, a drain that load balancers
/// understand, IPv6.
final class EdgeTests: ServiceTestCase {
    override var serviceName: String { "chat" }
    override var serviceSettings: [String: String] {
        ["HTTP_BODY_MEMORY_MB": "16", "HTTP_BODY_TIMEOUT_SECONDS": "3", "DB_LOCK_TIMEOUT_MS": "1000"]
    }

    /// A raw upload head declaring `length` bytes of JPEG.
    func uploadHead(_ length: Int, token: String?) -> String {
        "POST /v1/chat/media HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\nContent-Length: \(length)\r\n"
            + (token.map { "Authorization: Bearer \($0)\r\n" } ?? "") + "\r\n"
    }

    func testAnUploadWithoutAValidTokenIsRefusedBeforeItsBody() throws {
        for token in [nil, "not.a.token", "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.AAAA"] as [String?] {
            let c = try RawConnection(port: service.port)
            let began = Date()
            c.write(uploadHead(10 << 20, token: token) + String(repeating: "x", count: 1000))
            XCTAssertTrue(c.read(for: 3), "the connection is closed after the answer (\(token ?? "no token"))")
            XCTAssertEqual(c.status, 401, c.head)
            XCTAssertTrue(c.head.contains("connection: close"), c.head)
            XCTAssertLessThan(Date().timeIntervalSince(began), 2, "answered from the head, not after 10 MiB")
        }
    }

    func testBodiesInFlightAreBoundedInMemoryAndInTime() throws {
        let ana = try person()
        // 16 MiB of body memory: one 10 MiB upload in flight leaves no room for a second (another client's).
        let first = try RawConnection(port: service.port)
        first.write(uploadHead(10 << 20, token: ana.token) + String(repeating: "x", count: 1 << 20))
        XCTAssertFalse(first.read(for: 0.5), "the first upload is being read")
        XCTAssertNil(first.status)
        let second = try RawConnection(port: service.port, from: "127.0.0.2")
        second.write(uploadHead(10 << 20, token: ana.token))
        XCTAssertTrue(second.read(for: 3), "refused and closed")
        XCTAssertEqual(second.status, 503, second.head)
        XCTAssertTrue(second.head.contains("retry-after: 1"), second.head)
        // A refusal by a limit, as an operator sees it: counted and warned of, not an error of the service.
        let metrics = String(decoding: try APIClient(port: service.port).get("/metrics").body, as: UTF8.self)
        XCTAssertTrue(metrics.contains(#"http_refused_total{reason="body_memory"}"#), metrics)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 3) { service.log.contains(#""reason":"body_memory""#) }, service.log)
        XCTAssertFalse(service.log.split(separator: "\n").contains { $0.contains(#""level":"error""#) && $0.contains(#""route":"refused""#) },
                       service.log)
        // The first trickles on, and is cut at the 3 s body deadline however steadily bytes come.
        let began = Date()
        var closed = false
        while !closed && Date().timeIntervalSince(began) < 10 {
            first.write("xxxx")
            closed = first.read(for: 0.3)
        }
        XCTAssertTrue(closed, "the slow body was cut off")
        XCTAssertEqual(first.status, 408, first.head)
        XCTAssertLessThan(Date().timeIntervalSince(began), 5, "at the 3 s deadline")
        // Its memory is given back: a new upload is admitted.
        let third = try RawConnection(port: service.port)
        third.write(uploadHead(10 << 20, token: ana.token))
        XCTAssertFalse(third.read(for: 0.5), "admitted and being read")
        XCTAssertNil(third.status)
    }

    /// The attack of issue 62 on an instance with the default 64 MiB of body memory: one client (127.0.0.2) starts six
    /// 10 MiB uploads and one of 4 MiB, trickling. It holds at most a quarter of the memory (its first upload, and the
    /// 4 MiB one that still fits its share); the others get 429 before they are read, another client's requests with
    /// a body are served, and what it holds is given back at the body deadline.
    func testSlowUploadsOfOneClientLeaveTheBodyMemoryToTheOthers() throws {
        let chat = try startInstance(settings: ["HTTP_BODY_MEMORY_MB": "64"])
        defer { chat.stop() }
        let mallory = try person(), ana = try person()
        var uploads: [RawConnection] = []
        for length in Array(repeating: 10 << 20, count: 6) + [4 << 20] {
            let upload = try RawConnection(port: chat.port, from: "127.0.0.2")
            upload.write(uploadHead(length, token: mallory.token) + "x")
            uploads.append(upload)
        }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 5) {
            uploads.forEach { $0.read(for: 0) }
            return uploads.filter { $0.status == 429 }.count == 5
        }, "five refused: \(uploads.map(\.status))")
        let held = uploads.filter { $0.status == nil }
        XCTAssertEqual(held.count, 2, "a 10 MiB upload and the 4 MiB one: 14 MiB, within the 16 MiB share")
        XCTAssertNil(uploads[6].status)
        for refused in uploads where refused.status != nil {
            XCTAssertTrue(refused.head.contains("retry-after: 1"), refused.head)
            XCTAssertTrue(refused.body.contains(#""code":"rate_limited""#), refused.body)
        }
        let metrics = String(decoding: try APIClient(port: chat.port).get("/metrics").body, as: UTF8.self)
        XCTAssertTrue(metrics.contains(#"http_refused_total{reason="client_body_memory"}"#), metrics)
        // Another client (127.0.0.1) is served: requests with a body, an upload of its own.
        let other = APIClient(port: chat.port)
        for i in 0..<10 { XCTAssertEqual(try other.post("/v1/rooms", ["name": "Room \(i)"], token: ana.token).status, 201) }
        let own = try RawConnection(port: chat.port)
        own.write(uploadHead(10 << 20, token: ana.token))
        XCTAssertFalse(own.read(for: 0.3), "admitted and being read")
        XCTAssertNil(own.status)
        // The held uploads trickle on and are cut at the 3 s body deadline; what they held is given back.
        let began = Date()
        var cut = false
        while !cut && Date().timeIntervalSince(began) < 10 {
            for upload in held { upload.write("x") }
            cut = held.map { $0.read(for: 0.15) }.allSatisfy { $0 }
        }
        XCTAssertTrue(cut, "both slow bodies were cut off")
        XCTAssertEqual(held.map(\.status), [408, 408])
        XCTAssertLessThan(Date().timeIntervalSince(began), 5, "at the 3 s deadline")
        let again = try RawConnection(port: chat.port, from: "127.0.0.2")
        again.write(uploadHead(10 << 20, token: mallory.token))
        XCTAssertFalse(again.read(for: 0.3), "the client may upload again")
        XCTAssertNil(again.status)
    }

    func testALockedTableGetsA503WithinTheLockTimeoutAndHealthStaysFast() throws {
        let ana = try person()
        XCTAssertEqual(try api.post("/v1/rooms", ["name": "Locked"], token: ana.token).status, 201)
        let locker = try database.connect()
        try locker.execute("BEGIN")
        try locker.execute("LOCK TABLE chat.rooms IN ACCESS EXCLUSIVE MODE")
        defer { _ = try? locker.execute("ROLLBACK") }
        // More requests on the locked table than there are handler threads.
        let results = LockedBox<[(status: Int, seconds: Double, retryAfter: String?)]>()
        results.set([])
        let threads = (0..<24).map { _ in
            Thread { [port = service.port] in
                let began = Date()
                let r = try? APIClient(port: port).get("/v1/rooms", token: ana.token)
                results.update { $0 = ($0 ?? []) + [(r?.status ?? 0, Date().timeIntervalSince(began), r?.headers["retry-after"])] }
            }
        }
        threads.forEach { $0.start() }
        // Probe once the handlers are stuck on the lock (PostgreSQL shows them waiting for it).
        let watcher = try database.connect()
        XCTAssertTrue(try TestEnvironment.waitUntil(timeout: 5) {
            let waiting: Int? = try watcher.first("SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()")?["n"]
            return (waiting ?? 0) > 0
        }, "requests wait on the lock")
        var slowest = 0.0
        for _ in 0..<20 {
            let began = Date()
            XCTAssertEqual(try APIClient(port: service.port).get("/healthz").status, 200)
            slowest = max(slowest, Date().timeIntervalSince(began))
        }
        XCTAssertLessThan(slowest, 0.25, "/healthz never waits for the handlers stuck on the lock")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 15) { results.get()?.count == 24 }, "every request was answered")
        for r in results.get() ?? [] {
            XCTAssertEqual(r.status, 503, "a clear 503, not a hang or a dropped connection")
            XCTAssertNotNil(r.retryAfter)
            XCTAssertLessThan(r.seconds, 8, "within the 1 s lock timeout, and the queue for a handler thread")
        }
        _ = try locker.execute("ROLLBACK")
        XCTAssertEqual(try api.get("/v1/rooms", token: ana.token).status, 200, "served again once the lock is gone")
    }

    func testSIGTERMTurnsReadinessAwayFirstThenClosesEveryConnectionAfterItsAnswer() throws {
        let draining = try startInstance(settings: ["SHUTDOWN_DELAY_SECONDS": "2"])
        let kept = try RawConnection(port: draining.port)
        kept.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertFalse(kept.read(for: 0.3))
        XCTAssertEqual(kept.status, 200)
        let silent = try RawConnection(port: draining.port)  // connected, never asks anything
        let signalled = Date()
        kill(draining.process.processIdentifier, SIGTERM)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 1) { (try? APIClient(port: draining.port).get("/readyz"))?.status == 503 },
                      "readiness falls at once")
        let during = try RawConnection(port: draining.port)
        during.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertFalse(during.read(for: 0.3), "a new connection is still served, and kept, during the delay")
        XCTAssertEqual(during.status, 200)
        XCTAssertFalse(during.head.contains("connection: close"), during.head)
        // After the delay: idle keep-alive connections are closed, the process exits cleanly.
        XCTAssertTrue(kept.read(for: 4), "the idle keep-alive connection is closed a second after the listener closes")
        XCTAssertTrue(during.read(for: 1))
        XCTAssertTrue(silent.read(for: 3), "a connection that never began a request is closed too, a second after")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) { !draining.process.isRunning })
        XCTAssertEqual(draining.process.terminationStatus, 0)
        // The delay, a second for an idle kept connection's next request, half a second of its reads dropped after the
        // close (so that a request crossing it meets no reset): well within the 10 s head deadline it must not wait for.
        XCTAssertLessThan(Date().timeIntervalSince(signalled), 2 + 4, "the delay, then a quick drain (not the head deadline)")
    }

    func testItListensOnIPv6AndIPv4() throws {
        for url in ["http://[::1]:\(service.port)/healthz", "http://127.0.0.1:\(service.port)/healthz"] {
            let curl = Process()
            curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
            curl.arguments = ["-sg", "-o", "/dev/null", "-w", "%{http_code}", url]
            let out = Pipe()
            curl.standardOutput = out
            try curl.run()
            curl.waitUntilExit()
            XCTAssertEqual(String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self), "200", url)
        }
    }

    func testTextWithControlCharactersIsRefusedNotTrimmed() throws {
        let ana = try person()
        for name in ["\u{0B}Launch", "\nLaunch", "Launch\u{85}"] {
            let r = try api.post("/v1/rooms", ["name": name], token: ana.token)
            XCTAssertEqual(r.status, 400, name.debugDescription)
            XCTAssertEqual(r.errorCode, "validation_failed", name.debugDescription)
        }
        XCTAssertEqual(try count("rooms"), 0, "nothing was written")
        XCTAssertEqual(try api.post("/v1/rooms", ["name": "  Launch  "], token: ana.token).status, 201, "white space is still trimmed")
    }
}
