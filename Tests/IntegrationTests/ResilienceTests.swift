import Foundation
import HTTP
import Kafka
import Postgres
import Synchronization
import XCTest

/// The broker or the database goes away and comes back; instances start together.
final class ResilienceTests: XCTestCase {
    var database: TestDatabase!
    override func setUpWithError() throws { database = try TestDatabase() }
    override func tearDown() { database?.drop() }

    func testWithTheBrokerDownSignupSucceedsAndItsEventIsDeliveredWhenTheBrokerIsBack() throws {
        let broker = try PrivateBroker()
        defer { broker.resume(); broker.stop() }
        let auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url, "KAFKA_BROKERS": broker.address])
        defer { auth.stop() }
        let api = APIClient(port: auth.port)

        broker.pause()
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 15) { (try? api.get("/readyz"))?.status == 503 },
                      "readiness tells the truth when the broker does not answer")
        let signup = try api.signup()
        XCTAssertEqual(signup.status, 201, "a change does not need the broker")
        XCTAssertEqual(try api.get("/healthz").status, 200)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 40) {
            let metrics = String(decoding: (try? api.get("/metrics"))?.body ?? [], as: UTF8.self)
            return metrics.contains("outbox_publish_failures_total") && !metrics.contains("outbox_oldest_pending_age_seconds 0.0\n")
        }, "a failed publication is counted, and the event waits\n\(auth.log.suffix(3000))")

        broker.resume()
        let probe = try EventProbe(topics: ["user.registered"], brokers: broker.address)
        XCTAssertNotNil(probe.first(timeout: 60) { $0["subject"] as? String == signup.userId },
                        "the outbox delivers the event once the broker is back\n\(auth.log.suffix(3000))")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { (try? api.get("/readyz"))?.status == 200 })
    }

    func testAfterTheBrokerLosesItsDataNewEventsFlowAndRepublishRestoresOldOnes() throws {
        let broker = try PrivateBroker()
        defer { broker.stop() }
        let environment = ["DATABASE_URL": database.url, "KAFKA_BROKERS": broker.address]
        let auth = try ServiceProcess.startReady("auth", environment: environment)
        defer { auth.stop() }
        let api = APIClient(port: auth.port)
        let before = try api.signup().userId
        XCTAssertNotNil(try EventProbe(topics: ["user.registered"], brokers: broker.address).first { $0["subject"] as? String == before })

        broker.stop()
        try broker.start()  // empty: every topic and offset is gone, the idempotent producer's id is unknown
        let after = try api.signup().userId
        let republish = try ServiceProcess("auth", environment: environment, arguments: ["republish", "--since", "2000-01-01T00:00:00Z"])
        republish.process.waitUntilExit()
        XCTAssertEqual(republish.process.terminationStatus, 0, republish.log)

        let probe = try EventProbe(topics: ["user.registered"], brokers: broker.address)
        for user in [after, before] {
            XCTAssertNotNil(probe.first(timeout: 60) { $0["subject"] as? String == user }, "\(user) missing\n\(auth.log.suffix(3000))")
        }
    }

    func testAfterTheBrokerIsKilledUnderLoadTheRelayPublishesAgainByItself() throws {
        let broker = try PrivateBroker()
        defer { broker.stop() }
        let auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url, "KAFKA_BROKERS": broker.address])
        defer { auth.stop() }
        let api = APIClient(port: auth.port)
        // Sign-ups run while the broker dies, so the producer has messages in flight to a broker that forgets it.
        let writing = Atomic<Bool>(true)
        let written = Atomic<Int>(0)
        let port = auth.port
        let writer = Thread {
            while writing.load(ordering: .relaxed) {
                if (try? APIClient(port: port).signup())?.status == 201 { written.wrappingAdd(1, ordering: .relaxed) }
            }
        }
        writer.start()
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { written.load(ordering: .relaxed) >= 10 })
        broker.kill9()
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 15) { (try? api.get("/readyz"))?.status == 503 }, "the service noticed")
        try broker.start()
        let before = written.load(ordering: .relaxed)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { written.load(ordering: .relaxed) >= before + 10 },
                      "sign-ups go on while the relay recovers")
        writing.store(false, ordering: .relaxed)
        let after = try api.signup().userId

        let probe = try EventProbe(topics: ["user.registered"], brokers: broker.address)
        XCTAssertNotNil(probe.first(timeout: 60) { $0["subject"] as? String == after },
                        "an event written after the broker came back is published without a restart\n\(auth.log.suffix(3000))")
        XCTAssertEqual(try Producer(config: KafkaConfig(brokers: broker.address, clientId: "test")).partitionCount("user.registered"), 3,
                       "the relay re-created the topic with the configured partitions before producing to it")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { (try? api.get("/readyz"))?.status == 200 }, String(auth.log.suffix(3000)))
    }

    func testARelayThatCannotPublishMakesTheServiceNotReadyAndNamesTheTopic() throws {
        let broker = try PrivateBroker()
        defer { broker.stop() }
        // The topic exists with a partition count other than the configured one: keys would land elsewhere.
        try Producer(config: KafkaConfig(brokers: broker.address, clientId: "test"))
            .createTopics(["user.registered"], partitions: 5, replicationFactor: 1)
        let auth = try ServiceProcess("auth", environment: ["DATABASE_URL": database.url, "KAFKA_BROKERS": broker.address,
                                                            "OUTBOX_MAX_DELAY_SECONDS": "3"])
        defer { auth.stop() }
        let api = APIClient(port: auth.port)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { (try? api.signup())?.status == 201 }, "a change needs no broker")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) {
            guard let ready = try? api.get("/readyz") else { return false }
            return ready.status == 503 && ready["outbox"] as? String == "stuck"
        }, String(auth.log.suffix(3000)))
        XCTAssertTrue(auth.log.contains("user.registered"), "the log names the topic with the wrong partition count")
        let probe = try EventProbe(topics: ["user.registered"], brokers: broker.address)
        probe.drain(2)
        XCTAssertTrue(probe.seen.isEmpty, "nothing is produced to a topic whose keys would move partitions")
    }

    func testRevokedTokensStayRefusedAfterTheBrokerLosesItsData() throws {
        let broker = try PrivateBroker()
        defer { broker.stop() }
        let authPort = TestEnvironment.freePort()
        let environment = ["DATABASE_URL": database.url, "KAFKA_BROKERS": broker.address,
                           "SERVICE_TOKEN": "service-token-" + UUID().uuidString,
                           "AUTH_JWKS_URL": "http://127.0.0.1:\(authPort)/v1/auth/jwks"]
        let auth = try ServiceProcess("auth", port: authPort, environment: environment)
        defer { auth.stop() }
        try auth.waitReady()
        let running = try ServiceProcess.startReady("stories", environment: environment)
        defer { running.stop() }
        let api = APIClient(port: auth.port)
        let groups = { (service: ServiceProcess, token: String) in (try? APIClient(port: service.port).get("/v1/groups", token: token))?.status }

        let early = try api.signup()
        XCTAssertEqual(try api.post("/v1/auth/logout", token: early.accessToken).status, 204)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { groups(running, early.accessToken) == 401 })

        broker.kill9()
        try broker.start()  // empty: the revocation is gone from the topic
        let restarted = try ServiceProcess.startReady("stories", environment: environment)
        defer { restarted.stop() }
        XCTAssertEqual(groups(restarted, early.accessToken), 401, "a service started after the loss reads the revocations from auth")

        let late = try api.signup()
        XCTAssertEqual(groups(running, late.accessToken), 200)
        XCTAssertEqual(try api.post("/v1/auth/logout", token: late.accessToken).status, 204)
        // Up to librdkafka's metadata refresh (10 s) before the listener sees the topic again, then the event.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 25) { groups(running, late.accessToken) == 401 },
                      "the running service's listener attached again to the re-created topic\n"
                      + running.log.split(separator: "\n").filter { !$0.contains("\"route\"") }.suffix(30).joined(separator: "\n"))

        // A service that cannot read the list yet takes no token: it cannot know which ones were logged out.
        let deaf = try ServiceProcess("stories", environment: environment.merging(
            ["AUTH_JWKS_URL": "http://127.0.0.1:\(TestEnvironment.freePort())/v1/auth/jwks",
             "JWT_PUBLIC_KEY": try XCTUnwrap((try api.get("/v1/auth/jwks")["keys"] as? [[String: Any]])?.first?["x"] as? String)]) { $1 })
        defer { deaf.stop() }
        let fresh = try api.signup()
        // Its routes are in place (the document route is added with them), but it has no list.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { (try? APIClient(port: deaf.port).get("/openapi.json"))?.status == 200 })
        let answer = try APIClient(port: deaf.port).get("/v1/groups", token: fresh.accessToken)
        XCTAssertEqual(answer.status, 503, "not 200: \(deaf.log.suffix(1500))")

        let list = "/v1/internal/revoked-sessions"
        XCTAssertEqual(try api.get(list).status, 401, "the list is for services only")
        XCTAssertEqual(try api.get(list, token: late.accessToken).status, 401, "a user's token is not the service token")
        let revoked = try api.get(list, token: environment["SERVICE_TOKEN"])
        let ids = (revoked["sessions"] as? [[String: Any]] ?? []).compactMap { $0["sessionId"] as? String }
        XCTAssertEqual(revoked.status, 200)
        XCTAssertEqual(ids.count, 2, "both logged-out sessions, nothing else")
    }

    func testSigningKeysRotateWithoutRefusingALiveTokenAndTheirSeedsAreSealed() throws {
        let sealing = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        let authPort = TestEnvironment.freePort()
        let environment = ["DATABASE_URL": database.url, "SIGNING_KEY_ENCRYPTION_KEY": sealing,
                           "AUTH_JWKS_URL": "http://127.0.0.1:\(authPort)/v1/auth/jwks"]
        let auth = try ServiceProcess("auth", port: authPort, environment: environment)
        defer { auth.stop() }
        try auth.waitReady()
        let stories = try ServiceProcess.startReady("stories", environment: environment)
        defer { stories.stop() }
        let api = APIClient(port: authPort)
        func kid(_ token: String) -> String? {
            var part = String(token.split(separator: ".").first ?? "").replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while part.count % 4 != 0 { part += "=" }
            return (Data(base64Encoded: part).flatMap { try? JSONSerialization.jsonObject(with: $0) } as? [String: Any])?["kid"] as? String
        }
        func published() throws -> [String] { (try api.get("/v1/auth/jwks")["keys"] as? [[String: Any]] ?? []).compactMap { $0["kid"] as? String } }

        let before = try api.signup()
        let old = try XCTUnwrap(kid(before.accessToken))
        let row = try database.connect().first("SELECT encrypted, length(seed) AS n FROM auth.signing_keys")
        XCTAssertEqual(try row?["encrypted", as: Bool.self], true, "the seed is sealed at rest")
        XCTAssertEqual(try row?["n", as: Int.self], 12 + 32 + 16)

        let rotate = try ServiceProcess("auth", environment: environment, arguments: ["rotate-keys", "--activate-in", "8"])
        rotate.process.waitUntilExit()
        XCTAssertEqual(rotate.process.terminationStatus, 0, rotate.log)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 7) { (try? published().count) == 2 }, "the new key is published first")
        XCTAssertEqual(kid(try api.signup().accessToken), old, "and does not sign yet")
        var after: APIResponse?
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            after = try? api.signup()
            return after.flatMap { kid($0.accessToken) }.map { $0 != old } ?? false
        }, "then it signs")
        for token in [before.accessToken, after?.accessToken ?? ""] {
            XCTAssertEqual(try api.get("/v1/users/me", token: token).status, 200, "auth takes tokens of both keys")
            XCTAssertEqual(try APIClient(port: stories.port).get("/v1/groups", token: token).status, 200, "so does stories")
        }
        XCTAssertEqual(try published().count, 2, "the old key stays published while its tokens live")

        var wrong = environment
        wrong["SIGNING_KEY_ENCRYPTION_KEY"] = String(repeating: "A", count: 43)
        let refused = try ServiceProcess("auth", environment: wrong)
        refused.process.waitUntilExit()
        XCTAssertNotEqual(refused.process.terminationStatus, 0)
        XCTAssertTrue(refused.log.contains("SIGNING_KEY_ENCRYPTION_KEY"), "a wrong sealing key stops the start, named: \(refused.log)")
    }

    func testThePoolRecoversFromADatabaseRestartWithoutRestartingTheService() throws {
        let cluster = try PrivateCluster()
        defer { cluster.stop() }
        let auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": cluster.url])
        defer { auth.stop() }
        let api = APIClient(port: auth.port)
        let before = try api.signup()
        XCTAssertEqual(before.status, 201)

        try cluster.stopServer()
        let during = try api.get("/v1/users/me", token: before.accessToken)
        XCTAssertEqual(during.status, 503, "an outage is a 503, not a hang or a crash")
        XCTAssertNotNil(during.headers["retry-after"])
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 5) { (try? api.get("/readyz"))?.status == 503 }, "readiness follows within its 1 s cache")

        try cluster.startServer()
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { (try? api.get("/readyz"))?.status == 200 })
        XCTAssertEqual(try api.get("/v1/users/me", token: before.accessToken).status, 200)
        XCTAssertEqual(try api.signup().status, 201)
        XCTAssertTrue(auth.process.isRunning)
    }

    func testTwoInstancesStartingTogetherOnAnEmptyDatabaseBothComeUpWithOneKey() throws {
        let a = try ServiceProcess("auth", environment: ["DATABASE_URL": database.url])
        let b = try ServiceProcess("auth", environment: ["DATABASE_URL": database.url])
        defer { a.stop(); b.stop() }
        try a.waitReady()
        try b.waitReady()
        let keysA = try APIClient(port: a.port).get("/v1/auth/jwks")["keys"] as? NSArray
        let keysB = try APIClient(port: b.port).get("/v1/auth/jwks")["keys"] as? NSArray
        XCTAssertEqual(keysA?.count, 1)
        XCTAssertEqual(keysA, keysB)
        let token = try APIClient(port: a.port).signup().accessToken
        XCTAssertEqual(try APIClient(port: b.port).get("/v1/users/me", token: token).status, 200)
    }

    func testAKilledInstanceLosesNoCommittedEvent() throws {
        let probe = try EventProbe(topics: ["user.registered"])
        let auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url])
        let api = APIClient(port: auth.port)
        var users: [String] = []
        for _ in 0..<5 { users.append(try api.signup().userId) }
        auth.kill9()
        let again = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url])
        defer { again.stop() }
        for user in users {
            XCTAssertNotNil(probe.first(timeout: 30) { $0["subject"] as? String == user }, "event of \(user) lost")
        }
    }

    func testABadSettingStopsTheProcessWithOneLineNamingIt() throws {
        for (variable, value) in [("PORT", "eighty"), ("DATABASE_URL", "mysql://x"), ("LOG_LEVEL", "loud"), ("DB_POOL_SIZE", "0"),
                                  ("KAFKA_BROKERS", "nohost")] {
            var environment = ["DATABASE_URL": database.url]
            environment[variable] = value
            let p = try ServiceProcess("auth", environment: environment)
            p.process.waitUntilExit()
            XCTAssertNotEqual(p.process.terminationStatus, 0, variable)
            let lines = p.log.split(separator: "\n")
            XCTAssertEqual(lines.count, 1, p.log)
            XCTAssertTrue(p.log.contains(variable), "the line names \(variable): \(p.log)")
            XCTAssertTrue(p.log.contains("\"level\":\"error\""), p.log)
        }
    }
}
