import Foundation
import XCTest

/// The one public origin: nginx (`deploy/gateway/`) in front of the five services, its route table generated from
/// their OpenAPI documents. The table must be up to date, give every public route to the service that serves it,
/// and the gateway must pass what clients rely on: event streams as they come, uploads up to their limit, HTTP/2 over
/// TLS, the error contract for what it refuses itself, a sign-in rate limit, and schemathesis's checks of the merged
/// document. Regenerate the table with
///   UPDATE_GATEWAY=1 deploy/local/stack test --filter GatewayTests/testTheRouteTableIsGeneratedFromTheServicesDocuments
final class GatewayTests: XCTestCase {
    var database: TestDatabase!
    var services: [String: ServiceProcess] = [:]
    /// Apple's keys and key set for Sign in with Apple: its route exists only with them.
    var apple: AppleStandIn!
    private var started: Gateway?
    /// The gateway in front of this test's services, started on first use (the generation test writes its table first).
    var gateway: Gateway {
        get throws {
            if let started { return started }
            started = try Gateway(upstreams: names.map { ($0, services[$0]!.port) }, signInRate: "6000r/m", httpPort: gatewayPort)
            return started!
        }
    }
    let names = PublicOrigin.names
    let gatewayPort = TestEnvironment.freePort()

    override func setUpWithError() throws {
        database = try TestDatabase()
        apple = try AppleStandIn()
        let authPort = TestEnvironment.freePort()
        let environment = ["DATABASE_URL": database.url, "AUTH_JWKS_URL": "http://127.0.0.1:\(authPort)/v1/auth/jwks",
                           "TRUSTED_PROXIES": "127.0.0.1", "PUBLIC_BASE_URL": "http://127.0.0.1:\(gatewayPort)"]
        // Every route a deployment may switch on: sign-in with Google (its keys fetched from nowhere: the route exists,
        // the table is what counts here) and with Apple, dispatch's operator routes, Stripe's webhook (a key and a provider that is
        // nowhere) and the moderators' queues of reports.
        let operatorToken = ["OPERATOR_TOKEN": String(repeating: "o", count: 40), "STRIPE_SECRET_KEY": "sk_test_nowhere",
                             "STRIPE_API_URL": "http://127.0.0.1:9", "STRIPE_WEBHOOK_SECRET": "whsec_" + String(repeating: "w", count: 32)]
        services["auth"] = try ServiceProcess("auth", port: authPort, environment: environment.merging([
            "GOOGLE_CLIENT_IDS": "backend-tests.apps.googleusercontent.com", "GOOGLE_JWKS_URL": "http://127.0.0.1:9/certs"]) { $1 }
            .merging(operatorToken) { $1 }.merging(apple.environment) { $1 })
        for name in names.dropFirst() {
            services[name] = try ServiceProcess(name, environment: environment.merging(operatorToken) { $1 })
        }
        for name in names { try services[name]!.waitReady() }
    }

    override func tearDown() {
        if let run = testRun, run.failureCount > 0 { print("--- gateway log ---\n\(started?.log.suffix(3000) ?? "")") }
        started?.stop()
        services.values.forEach { $0.stop() }
        apple?.stop()
        database?.drop()
    }

    func testTheRouteTableIsGeneratedFromTheServicesDocuments() throws {
        let update = ProcessInfo.processInfo.environment["UPDATE_GATEWAY"] == "1"
        let sources = names.map { "\($0)=http://127.0.0.1:\(services[$0]!.port)/openapi.json" }
        XCTAssertNoThrow(try IntegrationTests.run(["python3", TestEnvironment.root.appendingPathComponent("deploy/gateway/routes.py").path]
                                 + (update ? [] : ["--check"]) + sources))
        // The gateway serves the merged document it was generated with.
        let gateway = try self.gateway
        let served = try APIClient(port: gateway.httpPort).get("/openapi.json")
        XCTAssertEqual(served.status, 200)
        XCTAssertEqual(served.body, Array(try Data(contentsOf: TestEnvironment.root.appendingPathComponent("deploy/gateway/openapi.json"))))
    }

    func testEveryPublicRouteReachesTheServiceThatServesIt() throws {
        let gateway = try self.gateway
        var expected: [String: String] = [:]  // a concrete path -> the service
        for name in names {
            let doc = try APIClient(port: services[name]!.port).get("/openapi.json").json
            for (pattern, operations) in doc["paths"] as? [String: [String: Any]] ?? [:] {
                guard !["/healthz", "/readyz", "/metrics", "/openapi.json"].contains(pattern), !pattern.hasPrefix("/v1/internal/") else { continue }
                let path = pattern.split(separator: "/").map { $0.hasPrefix("{") ? Substring(UUID().uuidString.lowercased()) : $0 }
                    .joined(separator: "/")
                expected["/" + path] = name
                for method in operations.keys.map({ $0.uppercased() }) {  // without a token: no stream is opened
                    let r = try APIClient(port: gateway.httpPort).send(method, "/" + path)
                    XCTAssertNotEqual(r.status, 502, "\(method) \(pattern)")
                    XCTAssertFalse(r.status == 404 && r.errorCode == "not_found" && r.body.count < 60 && pattern.allSatisfy { $0 != "{" },
                                   "\(method) \(pattern) is not routed")
                }
            }
        }
        XCTAssertGreaterThan(expected.count, 70)
        // The gateway's access log names the upstream of each request. nginx writes a line after the client has its
        // answer, so the last requests' lines may still be coming: wait for every path's.
        var seen: [String: String] = [:]
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 5) {
            seen = [:]
            for entry in gateway.accessLog { if let path = entry["path"] as? String, let up = entry["upstream"] as? String { seen[path] = up } }
            return expected.keys.allSatisfy { seen[$0] != nil }
        })
        for (path, service) in expected.sorted(by: { $0.key < $1.key }) {
            XCTAssertEqual(seen[path], service, path)
        }
        // A method the gateway refuses itself (TRACE) gets the error contract and the path's Allow, as the services give.
        let trace = try APIClient(port: gateway.httpPort).send("TRACE", "/v1/videos/\(UUID().uuidString.lowercased())/like")
        XCTAssertEqual(trace.status, 405)
        XCTAssertEqual(trace.errorCode, "method_not_allowed")
        XCTAssertEqual(trace.headers["allow"], "DELETE, PUT")
        // What no service serves, and what only other services may call, is the gateway's 404.
        for path in ["/v1/nothing", "/v1/internal/revoked-sessions", "/metrics", "/readyz", "/%6detrics"] {
            let r = try APIClient(port: gateway.httpPort).get(path)
            XCTAssertEqual(r.status, 404, path)
            XCTAssertEqual(r.errorCode, "not_found", path)
        }
        // A request nginx cannot parse gets the error contract too, with the code the services' own parser gives.
        let long = String(repeating: "a", count: 20_000)
        for (request, status, code) in [
            ("GET /v1/subjects HTTP/1.1\r\nHost: x\r\nX: a\r\n folded\r\n\r\n", 400, "bad_request"),
            ("GET /v1/subjects/%ZZ HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad_request"),
            ("GET /v1/subjects?q=\(long) HTTP/1.1\r\nHost: x\r\n\r\n", 414, "uri_too_long"),
            ("GET /v1/subjects HTTP/1.1\r\nHost: x\r\nX-Long: \(long)\r\n\r\n", 431, "header_too_large"),
            ("POST /v1/groups HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "not_implemented"),
            ("GET /v1/subjects HTTP/3.0\r\nHost: x\r\n\r\n", 505, "http_version_not_supported"),
        ] {
            try RawConnection.assertRefused(request, port: gateway.httpPort, status: status, code: code)
        }
    }

    func testAChatJourneyThroughTheGatewayStreamsLiveAndCarriesItsUploads() throws {
        let gateway = try self.gateway
        let client = APIClient(port: gateway.httpPort)
        let ana = try client.signup("ana_gw").accessToken
        let room = try client.post("/v1/rooms", ["name": "Gateway"], token: ana)
        XCTAssertEqual(room.status, 201)
        let roomId = try XCTUnwrap(room["id"] as? String)
        XCTAssertNotNil(room.headers["x-request-id"])
        let stream = try SSEReader(port: gateway.httpPort, path: "/v1/rooms/\(roomId)/events", token: ana)
        XCTAssertEqual(stream.status, 200)
        _ = stream.next(timeout: 2)  // whatever the stream opens with
        let began = Date()
        XCTAssertEqual(try client.post("/v1/rooms/\(roomId)/messages", ["text": "through the gateway"], token: ana).status, 201)
        var got = false
        while let event = stream.next(timeout: 3) { if event.data.contains("through the gateway") { got = true; break } }
        XCTAssertTrue(got, "the message arrives on the stream")
        XCTAssertLessThan(Date().timeIntervalSince(began), 2, "unbuffered")
        // An upload bigger than JSON's 1 MiB passes the gateway to chat (which checks what it is); past 10 MiB it does not.
        let photo = try client.send("POST", "/v1/chat/media", raw: Images.png, token: ana, headers: ["Content-Type": "image/png"])
        XCTAssertEqual(photo.status, 201)
        XCTAssertTrue((photo["url"] as? String ?? "").hasPrefix("http://127.0.0.1:\(gateway.httpPort)/v1/chat/media/\(photo["id"] as? String ?? "")?"),
                      "the public origin's URL")
        XCTAssertEqual(try load(photo["url"]).body, Images.stored(Images.png), "the image loads by the URL the view gave, through the gateway, without a token")
        let big = try client.send("POST", "/v1/chat/media", raw: [UInt8](repeating: 0, count: 2 << 20), token: ana,
                                  headers: ["Content-Type": "image/png"])
        XCTAssertEqual(big.status, 415, "2 MiB reaches chat, which sees it is no image")
        let tooBig = try client.send("POST", "/v1/auth/login", raw: [UInt8](repeating: 0x20, count: 2 << 20), headers: ["Content-Type": "application/json"])
        XCTAssertEqual(tooBig.status, 413)
        XCTAssertEqual(tooBig.errorCode, "payload_too_large")
    }

    func testTLSWithHTTP2AndTheForwardingHeaders() throws {
        let gateway = try self.gateway
        let out = try IntegrationTests.run(["curl", "-sk", "--http2", "-o", "/dev/null", "-w", "%{http_version} %{http_code}",
                           "https://127.0.0.1:\(gateway.httpsPort)/healthz"])
        XCTAssertEqual(out, "2 200")
        let traced = try IntegrationTests.run(["curl", "-sk", "-D", "-", "-o", "/dev/null", "-H", "X-Request-Id: my-request-1",
                              "-H", "X-Forwarded-For: 6.6.6.6", "https://127.0.0.1:\(gateway.httpsPort)/v1/subjects"])
        XCTAssertEqual(traced.lowercased().components(separatedBy: "x-request-id: my-request-1").count, 2, "once: \(traced)")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 5) {
            services["curation"]!.log.contains(#""requestId":"my-request-1""#)
        }, "the client's request id reaches the service")
        var entry: [String: Any]?
        TestEnvironment.waitUntil(timeout: 5) { entry = gateway.accessLog.last { ($0["requestId"] as? String) == "my-request-1" }; return entry != nil }
        XCTAssertEqual(entry?["client"] as? String, "127.0.0.1", "the forged X-Forwarded-For is not the client")
        XCTAssertNotNil((entry?["traceparent"] as? String).flatMap { $0.range(of: #"^00-[0-9a-f]{32}-[0-9a-f]{16}-01$"#, options: .regularExpression) },
                        "a trace is started at the edge")
        let signedUp = try APIClient(port: gateway.httpPort).signup()  // Argon2: milliseconds, not thousandths of one
        let id = signedUp.headers["x-request-id"]
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 5) { gateway.accessLog.contains { ($0["requestId"] as? String) == id } })
        let logged = gateway.accessLog.last { ($0["requestId"] as? String) == id }
        XCTAssertGreaterThanOrEqual(logged?["durationMs"] as? Double ?? 0, 1, "durations are logged in milliseconds")
    }

    func testBrowsersOnAnAllowedOriginMayCallTheAPI() throws {
        let gateway = try self.gateway  // the stack's default: web clients on http://localhost or 127.0.0.1, any port
        let client = APIClient(port: gateway.httpPort)
        let preflight = try client.send("OPTIONS", "/v1/rooms", headers: ["Origin": "http://localhost:5173",
                                                                          "Access-Control-Request-Method": "POST",
                                                                          "Access-Control-Request-Headers": "authorization, content-type"])
        XCTAssertEqual(preflight.status, 204)
        XCTAssertEqual(preflight.headers["access-control-allow-origin"], "http://localhost:5173")
        XCTAssertEqual(preflight.headers["access-control-allow-methods"], "GET, POST", "the path's own methods")
        XCTAssertTrue(preflight.headers["access-control-allow-headers"]?.contains("Authorization") == true)
        XCTAssertEqual(preflight.headers["access-control-max-age"], "600")
        XCTAssertNil(preflight.headers["access-control-allow-credentials"], "bearer tokens, no cookies")
        let ana = try client.signup().accessToken
        let rooms = try client.send("GET", "/v1/rooms", token: ana, headers: ["Origin": "http://localhost:5173"])
        XCTAssertEqual(rooms.status, 200)
        XCTAssertEqual(rooms.headers["access-control-allow-origin"], "http://localhost:5173")
        XCTAssertTrue(rooms.headers["access-control-expose-headers"]?.contains("X-Request-Id") == true)
        XCTAssertEqual(rooms.headers["vary"], "Origin")
        for origin in ["https://evil.example", "http://localhost.evil.example", "null"] {
            let other = try client.send("GET", "/v1/rooms", token: ana, headers: ["Origin": origin])
            XCTAssertNil(other.headers["access-control-allow-origin"], origin)
            let otherPreflight = try client.send("OPTIONS", "/v1/rooms", headers: ["Origin": origin, "Access-Control-Request-Method": "POST"])
            XCTAssertNil(otherPreflight.headers["access-control-allow-methods"], origin)
        }
    }

    /// Headless Chromium (Debian's) on another origin, as a web client: a ticket with its bearer token (a CORS preflight),
    /// an `EventSource` on the gateway with the ticket, a message live; then the network drops, the browser reconnects
    /// by itself with the used ticket and is refused, and the page resumes with a new ticket after the last event it saw,
    /// missing nothing and getting nothing twice.
    func testABrowserOnAnotherOriginFollowsAChatStreamAndResumesAfterADrop() throws {
        let gateway = try self.gateway
        let client = APIClient(port: gateway.httpPort)
        let ana = try client.signup().accessToken, ben = try client.signup().accessToken
        let room = try client.post("/v1/rooms", ["name": "Browsers"], token: ana)
        let roomId = try XCTUnwrap(room["id"] as? String)
        XCTAssertEqual(try client.post("/v1/rooms/join", ["inviteCode": room["inviteCode"] as? String ?? ""], token: ben).status, 200)

        let browser = try Browser(gatewayPort: gateway.httpPort, query: "token=\(ben)&room=\(roomId)")
        defer { browser.stop() }
        func waitFor(_ what: String, _ matches: ([String: Any]) -> Bool) throws -> [String: Any] {
            var found: [String: Any]?
            TestEnvironment.waitUntil(timeout: 30) { found = browser.reports.first(where: matches); return found != nil }
            guard let found else { throw TestFailure("the page never reported \(what): \(browser.reports)\n\(browser.log.suffix(3000))") }
            return found
        }
        _ = try waitFor("the stream opening") { $0["kind"] as? String == "open" }
        XCTAssertEqual(try client.post("/v1/rooms/\(roomId)/messages", ["text": "first"], token: ana).status, 201)
        let first = try waitFor("the first message") { $0["text"] as? String == "first" }

        browser.dropConnections()
        XCTAssertEqual(try client.post("/v1/rooms/\(roomId)/messages", ["text": "while away"], token: ana).status, 201)
        let reopened = try waitFor("the stream reopening") { $0["kind"] as? String == "open" && $0["opens"] as? Int == 2 }
        XCTAssertEqual(reopened["resumedAfter"] as? String, first["id"] as? String, "resumed after the last event seen")
        XCTAssertEqual(try client.post("/v1/rooms/\(roomId)/messages", ["text": "after"], token: ana).status, 201)
        _ = try waitFor("the message after the drop") { $0["text"] as? String == "after" }

        let kinds = browser.reports.compactMap { $0["kind"] as? String }.filter { $0 != "message" }
        XCTAssertEqual(kinds, ["open", "reconnecting", "closed", "open"],
                       "the browser reconnected by itself, its used ticket was refused, and the page took a new one")
        XCTAssertEqual(browser.reports.compactMap { $0["text"] as? String }, ["first", "while away", "after"],
                       "every message once, in order")
        browser.stop()  // nginx logs a stream when it ends
        var streams: [Int?] = []
        TestEnvironment.waitUntil(timeout: 5) {
            streams = gateway.accessLog.filter { ($0["path"] as? String) == "/v1/rooms/\(roomId)/events" }.map { $0["status"] as? Int }
            return streams.count >= 3
        }
        XCTAssertEqual(streams, [200, 401, 200], "the reconnect with the used ticket was refused")
    }

    func testSignInsAreRateLimitedPerClientAddress() throws {
        let strict = try Gateway(upstreams: names.map { ($0, services[$0]!.port) }, signInRate: "6r/m")
        defer { strict.stop() }
        // Different names each time, so that auth's own throttle (per account) stays out of it: these 429s are the gateway's.
        var limited: [APIResponse] = []
        for i in 0..<30 {
            let r = try APIClient(port: strict.httpPort).post("/v1/auth/login", ["username": "nobody\(i)", "password": "wrong password"])
            if r.status == 429 { limited.append(r) } else { XCTAssertEqual(r.status, 401) }
        }
        XCTAssertGreaterThanOrEqual(limited.count, 8, "past the burst of 20 (and one more each 10 s), 429")
        for r in limited {
            XCTAssertEqual(r.errorCode, "rate_limited")
            XCTAssertNotNil(r.headers["retry-after"])
        }
        // nginx logs a request after its answer is sent: wait for the last lines rather than read the log at once.
        var logged: [[String: Any]] = []
        TestEnvironment.waitUntil(timeout: 5) { logged = strict.accessLog; return logged.count >= 30 }
        let refusedHere = logged.filter { $0["status"] as? Int == 429 && ["", "-"].contains($0["upstreamAddr"] as? String ?? "") }
        XCTAssertEqual(refusedHere.count, limited.count, "answered by the gateway, never reaching auth")
        XCTAssertEqual(try APIClient(port: strict.httpPort).get("/v1/subjects").status, 200, "other routes are not limited")
    }

    /// Issue 62's attack on the gateway: one address sends bodies a byte at a time (never idle long enough for
    /// client_body_timeout). It holds at most its limit of requests in progress (8 here): the next get 429 at once,
    /// while another address is served; the bodies never reach a service; one that stops is cut within the 10 s
    /// client_body_timeout.
    func testATricklingClientHoldsAtMostItsAddresssRequestsInProgress() throws {
        let strict = try Gateway(upstreams: names.map { ($0, services[$0]!.port) }, signInRate: "6000r/m", connectionsPerClient: 8)
        defer { strict.stop() }
        var trickling: [RawConnection] = []
        for _ in 0..<20 {
            let c = try RawConnection(port: strict.httpPort, from: "127.0.0.2")
            c.write("POST /v1/rooms HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n{")
            trickling.append(c)
        }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 5) {
            trickling.forEach { $0.read(for: 0) }
            return trickling.filter { $0.status == 429 }.count == 12
        }, "past 8, refused at once: \(trickling.map(\.status))")
        for refused in trickling where refused.status == 429 {
            XCTAssertTrue(refused.body.contains(#""code":"rate_limited""#), refused.body)
        }
        let held = trickling.filter { $0.status == nil }
        XCTAssertEqual(held.count, 8)
        // Another address (127.0.0.1) is served meanwhile, bodies included; the held ones trickle on.
        let client = APIClient(port: strict.httpPort)
        for _ in 0..<3 {
            held.forEach { $0.write("x") }
            XCTAssertEqual(try client.get("/v1/subjects").status, 200)
            XCTAssertEqual(try client.post("/v1/auth/login", ["username": "nobody", "password": "wrong password"]).status, 401)
        }
        // They stop: cut within client_body_timeout (10 s), answered by the gateway (a body never reached chat).
        let stopped = Date()
        XCTAssertTrue(held.allSatisfy { $0.read(for: 13) }, "every stalled body was cut off")
        XCTAssertLessThan(Date().timeIntervalSince(stopped), 12)
        var timedOut: [[String: Any]] = []
        TestEnvironment.waitUntil(timeout: 5) {
            timedOut = strict.accessLog.filter { $0["path"] as? String == "/v1/rooms" && $0["status"] as? Int == 408 }
            return timedOut.count == 8
        }
        XCTAssertEqual(timedOut.count, 8, "\(strict.accessLog)")
        XCTAssertTrue(timedOut.allSatisfy { ["", "-"].contains($0["upstreamAddr"] as? String ?? "") }, "never passed to chat")
    }

    /// HTTP/1.0 needs no Host; the services, asked in HTTP/1.1, do: the gateway gives one (it gave none, and chat said 400).
    func testAnHTTP10RequestWithoutHostGetsTheServicesAnswer() throws {
        let gateway = try self.gateway
        let old = try RawConnection(port: gateway.httpPort)
        old.write("GET /v1/subjects HTTP/1.0\r\n\r\n")
        XCTAssertTrue(old.read(for: 3), "closed after the answer (HTTP/1.0)")
        XCTAssertEqual(old.status, 200, old.head)
        XCTAssertTrue(old.body.hasPrefix("{"), old.body)
    }

    func testSchemathesisFindsTheMergedDocumentTrue() throws {
        let gateway = try self.gateway
        let st = try XCTUnwrap(ProcessInfo.processInfo.environment["SCHEMATHESIS_BIN"], "run the tests with deploy/local/stack test")
        let token = try APIClient(port: gateway.httpPort).signup().accessToken
        let started = Date()
        do {
            // Every operation with its examples and the boundary and negative cases of the coverage phase: what the
            // gateway could change (a route, a status, a header, a body) shows there. Random fuzzing of what the
            // services do with those requests is SchemathesisTests' work, and through the gateway it would double
            // the suite's costliest test.
            try schemathesis(st, document: "http://127.0.0.1:\(gateway.httpPort)/openapi.json", token: token, phases: "examples,coverage")
        } catch {
            XCTFail(String(describing: error).suffix(8000).description)
        }
        print("schemathesis through the gateway: \(Int(Date().timeIntervalSince(started))) s")
        for name in names { XCTAssertTrue(services[name]!.process.isRunning, "\(name) is still up") }
    }
}

/// nginx with the gateway's configuration (`deploy/gateway/configure`) in front of services on this machine.
final class Gateway {
    let httpPort: Int
    let httpsPort = TestEnvironment.freePort()
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-\(UUID().uuidString.prefix(8))")
    private let process = Process()

    /// `httpPort`: the one the services' image URLs name (their `PUBLIC_BASE_URL`), when they were started first;
    /// `connectionsPerClient`: the requests in progress one address may have (configure's default when nil).
    init(upstreams: [(String, Int)], signInRate: String, connectionsPerClient: Int? = nil,
         httpPort: Int = TestEnvironment.freePort()) throws {
        self.httpPort = httpPort
        let configure = TestEnvironment.root.appendingPathComponent("deploy/gateway/configure").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: configure)
        p.arguments = [directory.path, String(httpPort), String(httpsPort)] + upstreams.map { "\($0.0)=127.0.0.1:\($0.1)" }
        p.environment = ProcessInfo.processInfo.environment.merging(["GATEWAY_SIGNIN_RATE": signInRate]) { $1 }
            .merging(connectionsPerClient.map { ["GATEWAY_CONNECTIONS_PER_CLIENT": String($0)] } ?? [:]) { $1 }
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw TestFailure("deploy/gateway/configure failed") }
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
        process.arguments = ["-p", directory.path, "-c", directory.appendingPathComponent("nginx.conf").path, "-g", "daemon off;"]
        // What nginx says before its own error log is open (a configuration it refuses).
        let errors = directory.appendingPathComponent("stderr.log")
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: errors)
        try process.run()
        guard TestEnvironment.waitUntil(timeout: 10, { (try? APIClient(port: httpPort).get("/healthz"))?.status == 200 }) else {
            throw TestFailure("the gateway did not start: \(log)")
        }
    }

    var log: String {
        ["stderr.log", "error.log"].map { (try? String(contentsOf: directory.appendingPathComponent($0), encoding: .utf8)) ?? "" }
            .joined(separator: "\n")
    }

    /// The access log's entries, oldest first.
    var accessLog: [[String: Any]] {
        let text = (try? String(contentsOf: directory.appendingPathComponent("access.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    func stop() {
        if process.isRunning { process.terminate(); process.waitUntilExit() }
        if ProcessInfo.processInfo.environment["KEEP_GATEWAY"] == nil { try? FileManager.default.removeItem(at: directory) }
    }
}

/// Headless Chromium with a page on another origin (`browser_origin.py`: the page on http://localhost, the API through a
/// relay on 127.0.0.1 to the gateway, which the test can cut). `reports` are what the page told its origin.
final class Browser {
    private let origin = Process()
    private let chromium = Process()
    private let pagePort = TestEnvironment.freePort()
    private let relayPort = TestEnvironment.freePort()
    private let directory = FileManager.default.temporaryDirectory.appendingPathComponent("browser-\(UUID().uuidString.prefix(8))")

    init(gatewayPort: Int, query: String) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for name in ["reports.jsonl", "origin.log", "chromium.log"] {
            _ = FileManager.default.createFile(atPath: directory.appendingPathComponent(name).path, contents: nil)
        }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("browser_origin.py")
        origin.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        origin.arguments = [script.path, String(pagePort), String(relayPort), String(gatewayPort),
                            directory.appendingPathComponent("reports.jsonl").path]
        origin.standardOutput = try FileHandle(forWritingTo: directory.appendingPathComponent("origin.log"))
        origin.standardError = origin.standardOutput
        try origin.run()
        guard TestEnvironment.waitUntil(timeout: 10, { self.file("origin.log").contains("ready") }) else {
            throw TestFailure("browser_origin.py did not start: \(file("origin.log"))")
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") else {
            throw TestFailure("Chromium is missing: deploy/local/stack install puts Debian's chromium package in")
        }
        chromium.executableURL = URL(fileURLWithPath: "/usr/bin/chromium")
        // No sandbox: the tests may run as root, where Chromium's sandbox refuses to start.
        chromium.arguments = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
                              "--user-data-dir=\(directory.appendingPathComponent("profile").path)", "--enable-logging=stderr",
                              "http://localhost:\(pagePort)/?api=http://127.0.0.1:\(relayPort)&\(query)"]
        chromium.standardOutput = try FileHandle(forWritingTo: directory.appendingPathComponent("chromium.log"))
        chromium.standardError = chromium.standardOutput
        try chromium.run()
    }

    private func file(_ name: String) -> String {
        (try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)) ?? ""
    }

    /// What the page reported, in order.
    var reports: [[String: Any]] {
        file("reports.jsonl").split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// Chromium's own log (the page's console included) and the origin's.
    var log: String { file("chromium.log") + "\n" + file("origin.log") }

    /// Cuts every connection between the browser and the gateway, as a network drop would.
    func dropConnections() {
        _ = try? APIClient(port: pagePort).send("POST", "/drop")
    }

    func stop() {
        for p in [chromium, origin] where p.isRunning { p.terminate(); p.waitUntilExit() }
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}
