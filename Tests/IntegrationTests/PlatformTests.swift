import Foundation
import HTTP
import Identity
import Kafka
import Runtime
import XCTest

/// What every service serves and what other services use from the kit, tried against auth.
final class PlatformTests: AuthTestCase {
    func testAnotherServicesVerifierRefusesALoggedOutTokenWithinASecond() throws {
        // What stories or dispatch do: keys from the JWKS URL, revocations from session.revoked.
        var kafka = KafkaConfig(brokers: TestEnvironment.brokers, clientId: "test-verifier")
        kafka.log = { _, _ in }
        let logger = Logger(service: "test", minimum: .error)
        let topicsReady = Gate()
        topicsReady.open()
        let revocations = SessionRevocations(kafka: kafka, topicsReady: topicsReady, logger: logger, fetchList: nil)
        let group = ServiceGroup(logger: logger) { _, _ in }
        group.start(revocations.feed)
        defer { group.stop(deadline: Date().addingTimeInterval(10)) }
        let verifier = TokenVerifier(jwksURL: "http://127.0.0.1:\(auth.port)/v1/auth/jwks", revocations: revocations, logger: logger)
        XCTAssertTrue(verifier.refreshKeys())
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { revocations.isReady })

        let session = try api.signup()
        let request = Request(method: "GET", path: "/", headers: ["Authorization": "Bearer \(session.accessToken)"])
        XCTAssertEqual(try verifier.authenticate(request).userId.uuidString.lowercased(), session.userId)

        let loggedOut = Date()
        XCTAssertEqual(try api.post("/v1/auth/logout", token: session.accessToken).status, 204)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) { (try? verifier.authenticate(request)) == nil })
        let latency = Date().timeIntervalSince(loggedOut)
        print("revocation took effect in \(Int(latency * 1000)) ms")
        XCTAssertLessThan(latency, 1.0, "a logged-out token stops working everywhere within a second")

        var tampered = request
        tampered.headers["authorization"] = "Bearer " + session.accessToken.dropLast(2) + "AA"
        XCTAssertThrowsError(try verifier.authenticate(tampered))
    }

    func testHealthReadinessMetricsAndOpenAPIAreServed() throws {
        XCTAssertEqual(try api.get("/healthz").status, 200)
        let ready = try api.get("/readyz")
        XCTAssertEqual(ready.status, 200)
        XCTAssertEqual(ready["database"] as? String, "ok")
        XCTAssertEqual(ready["broker"] as? String, "ok")

        _ = try api.signup()
        _ = try api.get("/v1/users/me")
        let metrics = String(decoding: try api.get("/metrics").body, as: UTF8.self)
        XCTAssertTrue(metrics.contains(#"http_server_request_duration_seconds_count{method="POST",route="/v1/auth/signup",status="201"} 1"#), metrics)
        XCTAssertTrue(metrics.contains(#"route="/v1/users/me",status="401""#))
        XCTAssertTrue(metrics.contains("db_pool_connections{state=\"in_use\"}"))
        XCTAssertTrue(metrics.contains("outbox_oldest_pending_age_seconds 0.0"), metrics)
        XCTAssertTrue(metrics.contains("outbox_unconfirmed_wal_bytes"))
    }

    func testTheOpenAPIDocumentListsEveryRouteAndMatchesRealResponses() throws {
        let doc = try api.get("/openapi.json").json
        XCTAssertEqual(doc["openapi"] as? String, "3.1.0")
        let paths = doc["paths"] as? [String: [String: Any]] ?? [:]
        let expected = ["POST /v1/auth/signup", "POST /v1/auth/login", "POST /v1/auth/refresh", "POST /v1/auth/logout",
                        "POST /v1/auth/stream-tickets", "GET /v1/auth/jwks", "GET /v1/users/me", "PATCH /v1/users/me", "POST /v1/users/me/password",
                        "GET /v1/usernames/{username}", "DELETE /v1/users/me", "GET /v1/users/me/sessions", "DELETE /v1/users/me/sessions",
                        "DELETE /v1/users/me/sessions/{id}", "GET /v1/users/me/blocks", "PUT /v1/users/me/blocks/{userId}", "GET /v1/users/me/export",
                        "DELETE /v1/users/me/blocks/{userId}", "POST /v1/users/{id}/reports",
                        "POST /v1/auth/password-reset", "POST /v1/auth/password-reset/confirm", "POST /v1/auth/email-verification",
                        "GET /v1/auth/email-verification", "POST /v1/users/me/email-verification", "GET /healthz", "GET /readyz", "GET /metrics",
                        "GET /openapi.json", "GET /reset-password", "POST /reset-password", "GET /verify-email"]
        let documented = paths.flatMap { path, ops in ops.keys.map { "\($0.uppercased()) \(path)" } }
        XCTAssertEqual(Set(documented), Set(expected))
        // Every documented operation is really routed (no 404 for the path, no 405 for the method).
        for op in documented {
            let parts = op.split(separator: " ")
            let r = try api.send(String(parts[0]), String(parts[1]), raw: [])
            XCTAssertFalse([404, 405].contains(r.status), "\(op) is documented but not routed")
        }
        // Real responses validate against the documented schemas.
        func schema(_ method: String, _ path: String, _ status: Int) -> SchemaValidator {
            let op = paths[path]?[method] as? [String: Any]
            let response = (op?["responses"] as? [String: Any])?[String(status)] as? [String: Any]
            let content = (response?["content"] as? [String: Any])?["application/json"] as? [String: Any]
            return SchemaValidator(schema: content?["schema"] as? [String: Any] ?? ["type": "null"])
        }
        let signup = try api.signup()
        XCTAssertEqual(schema("post", "/v1/auth/signup", 201).validate(signup.json), [])
        XCTAssertEqual(schema("get", "/v1/users/me", 200).validate(try api.get("/v1/users/me", token: signup.accessToken).json), [])
        XCTAssertEqual(schema("get", "/v1/auth/jwks", 200).validate(try api.get("/v1/auth/jwks").json), [])
        let errorSchema = SchemaValidator(schema: (doc["components"] as? [String: Any]).flatMap { ($0["schemas"] as? [String: Any])?["Error"] } as? [String: Any] ?? [:])
        XCTAssertEqual(errorSchema.validate(try api.get("/v1/users/me").json), [])
    }

    func testLogsAreJSONLinesWithoutSecrets() throws {
        let password = "very secret passphrase"
        let session = try api.signup("logcheck", password: password)
        _ = try api.post("/v1/auth/login", ["username": "logcheck", "password": password])
        _ = try api.post("/v1/auth/refresh", ["refreshToken": session.refreshToken])
        _ = try api.send("GET", "/v1/users/me", token: session.accessToken, headers: ["X-Request-Id": "log-test-1"])
        let log = auth.log
        for line in log.split(separator: "\n") {
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            XCTAssertNotNil(object, "not JSON: \(line)")
            for key in ["time", "level", "service", "msg"] { XCTAssertNotNil(object?[key], "\(key) missing: \(line)") }
        }
        XCTAssertFalse(log.contains(password))
        XCTAssertFalse(log.contains(session.accessToken))
        XCTAssertFalse(log.contains(session.refreshToken))
        let request = log.split(separator: "\n").first { $0.contains("log-test-1") }
        let fields = request.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] } ?? [:]
        XCTAssertEqual(fields["route"] as? String, "/v1/users/me")
        XCTAssertEqual(fields["status"] as? Int, 200)
        XCTAssertEqual(fields["method"] as? String, "GET")
        XCTAssertNotNil(fields["durationMs"])
    }

    func testSIGTERMFinishesInFlightRequestsAndExitsZero() throws {
        // A signup takes tens of milliseconds of Argon2; start one, then ask the process to stop.
        let port = auth.port
        let result = LockedBox<Int>()
        let thread = Thread {
            let r = try? APIClient(port: port).post("/v1/auth/signup", ["username": "inflight", "email": "inflight@example.com",
                                                                       "password": "correct horse battery", "fullName": "I"])
            result.set(r?.status ?? -1)
        }
        thread.start()
        XCTAssertEqual(auth.stop(), 0)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) { result.get() != nil })
        if result.get() == 201 { XCTAssertEqual(try count("users"), 1) } else { XCTAssertEqual(try count("users"), 0, "no half-written change (client saw \(String(describing: result.get())))") }
        XCTAssertTrue(auth.log.contains("\"msg\":\"stopped\""))
    }
}

/// A value shared with a helper thread.
final class LockedBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T?
    func set(_ v: T) { lock.lock(); value = v; lock.unlock() }
    func get() -> T? { lock.lock(); defer { lock.unlock() }; return value }
    /// Changes the value in one step (a `set` of what `get` returned would lose updates made in between).
    func update(_ change: (inout T?) -> Void) { lock.lock(); change(&value); lock.unlock() }
}
