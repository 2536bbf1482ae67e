import AuthCore
import Foundation
import Runtime
import ServiceKit
import XCTest

/// A service run in this test process, as its executable would run it, on a port the system chooses.
final class InProcessService {
    let app: ServiceApp
    private let finished = Gate()
    private let failure = LockedBox<String>()

    /// Makes the service from `settings` (plus the broker and quiet logs) and runs it on a thread of its own until
    /// it answers `/readyz` with 200.
    init(_ make: (Environment) throws -> ServiceApp, settings: [String: String], timeout: TimeInterval = 60) throws {
        // A port known before the start, so that the image URLs the service signs name it.
        var values = ["PORT": String(TestEnvironment.freePort()), "KAFKA_BROKERS": TestEnvironment.brokers,
                      "KAFKA_SESSION_TIMEOUT_MS": "6000", "LOG_LEVEL": "warn", "SHUTDOWN_DELAY_SECONDS": "0",
                      "MEDIA_URL_KEYS": TestEnvironment.mediaURLKeys, "MEDIA_STORE": TestEnvironment.mediaStore]
        for (k, v) in settings { values[k] = v }
        let app = try make(Environment(values))
        self.app = app
        let (finished, failure) = (self.finished, self.failure)
        let thread = Thread {
            do { try app.run() } catch { failure.set("\(error)") }
            finished.open()
        }
        thread.start()
        let ready = TestEnvironment.waitUntil(timeout: timeout) {
            guard app.port != 0, !finished.isOpen else { return finished.isOpen }
            return (try? APIClient(port: app.port).get("/readyz"))?.status == 200
        }
        if !ready || finished.isOpen {
            app.stop()
            throw TestFailure("\(app.config.service) did not become ready in-process: \(failure.get() ?? "no error")")
        }
    }

    var port: Int { app.port }

    /// Waits until every consumer group of the service holds its partitions: stopping a member while its join is
    /// pending leaves Tansu waiting for it, and later joins can hang (see `ServiceTestCase.waitForConsumers`).
    @discardableResult
    func waitForConsumers(timeout: TimeInterval = 30) -> Bool {
        let client = APIClient(port: port)
        return TestEnvironment.waitUntil(timeout: timeout) {
            let metrics = (try? client.get("/metrics")).map { String(decoding: $0.body, as: UTF8.self) } ?? ""
            return metrics.split(separator: "\n").filter { $0.hasPrefix("kafka_consumer_assigned_partitions{") }.allSatisfy { !$0.hasSuffix(" 0.0") }
        }
    }

    /// Asks it to stop as SIGTERM would; true when `run` returned within `timeout`.
    @discardableResult
    func stop(timeout: TimeInterval = 20) -> Bool {
        app.stop()
        return finished.wait(until: Date().addingTimeInterval(timeout))
    }
}
