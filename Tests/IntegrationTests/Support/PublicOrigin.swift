import Foundation
import XCTest

/// The backend as a client meets it: the six services on a database of the test's own, behind the nginx gateway,
/// the one origin (their image URLs name it), their consumer groups the run's (`groups`). `api` is the gateway.
final class PublicOrigin {
    static let names = ["auth", "stories", "chat", "dispatch", "curation", "notify"]
    let database: TestDatabase
    let gatewayPort = TestEnvironment.freePort()
    private(set) var services: [String: ServiceProcess] = [:]
    private(set) var gateway: Gateway!
    var api: APIClient { APIClient(port: gatewayPort) }
    private let environment: [String: String]
    private let settings: [String: [String: String]]

    /// `settings`: a service's own, beyond the shared ones; `prepare` runs on the database before the services start
    /// (a catalogue import, as an operator's job would).
    init(settings: [String: [String: String]] = [:], prepare: ((TestDatabase) throws -> Void)? = nil) throws {
        database = try TestDatabase()
        let ports = Dictionary(uniqueKeysWithValues: Self.names.map { ($0, TestEnvironment.freePort()) })
        environment = ["DATABASE_URL": database.url, "AUTH_JWKS_URL": "http://127.0.0.1:\(ports["auth"]!)/v1/auth/jwks",
                       "TRUSTED_PROXIES": "127.0.0.1", "PUBLIC_BASE_URL": "http://127.0.0.1:\(gatewayPort)",
                       "SERVICE_TOKEN": String(repeating: "s", count: 40),
                       // notify's Web Push identity (a key made for the tests), and the push endpoint a test starts.
                       "VAPID_PRIVATE_KEY": PushEndpoint.testKey, "PUSH_ALLOWED_ORIGINS": "http://127.0.0.1:*"]
        let sources = Self.names.dropFirst().map { "\($0)=http://127.0.0.1:\(ports[$0]!)" }.joined(separator: ",")
        self.settings = settings.merging(["auth": ["EXPORT_SOURCES": sources, "STORIES_URL": "http://127.0.0.1:\(ports["stories"]!)"], "notify": ["STORIES_URL": "http://127.0.0.1:\(ports["stories"]!)",
                                                                                         "CHAT_URL": "http://127.0.0.1:\(ports["chat"]!)"]]) {
            own, shared in own.merging(shared) { $1 }
        }
        do {
            try prepare?(database)
            services["auth"] = try ServiceProcess.startReady("auth", port: ports["auth"]!, environment: environment.merging(self.settings["auth"] ?? [:]) { $1 })
            for name in Self.names.dropFirst() { services[name] = try start(name, port: ports[name]) }
            for name in Self.names.dropFirst() { try services[name]!.waitReady() }
            gateway = try Gateway(upstreams: Self.names.map { ($0, services[$0]!.port) }, signInRate: "6000r/m", httpPort: gatewayPort)
            for name in Self.names.dropFirst() { try waitForConsumers(name) }
        } catch {
            stop(failed: true)
            throw error
        }
    }

    /// The consumer groups of every public origin of a run: each origin's services go on from where the last one's
    /// stopped, instead of reading every event the run's broker holds from the beginning (a backlog that grows with
    /// the suite, and once kept chat half a minute behind a test). A test process that is one of several workers of a
    /// run (`deploy/local/stack test` gives each its own KAFKA_GROUP_PREFIX) goes on from that worker's last origin.
    static let groups = TestEnvironment.env["KAFKA_GROUP_PREFIX"].map { $0 + "o-" } ?? "t" + UUID().uuidString.prefix(8).lowercased() + "-"

    private func start(_ name: String, groups: String = PublicOrigin.groups, port: Int? = nil) throws -> ServiceProcess {
        var env = environment.merging(settings[name] ?? [:]) { $1 }.merging(["KAFKA_GROUP_PREFIX": groups]) { $1 }
        if name == "notify" {
            // notify acts on news only: groups of its own that start at the topics' ends, as a first deployment's would
            // (the run's other events would otherwise be a backlog it works through before the test's own).
            env.merge(["KAFKA_GROUP_PREFIX": "n" + UUID().uuidString.prefix(8).lowercased() + "-", "KAFKA_NEW_GROUP_START": "latest"]) { $1 }
        }
        return try ServiceProcess(name, port: port ?? TestEnvironment.freePort(), environment: env)
    }

    /// Waits until a service's consumers hold their partitions; a group Tansu wedged is left behind, and the service
    /// starts again on its port under new group ids.
    private func waitForConsumers(_ name: String) throws {
        if consumersAssigned(services[name]!, timeout: 30) { return }
        let port = services[name]!.port
        services[name]!.stop()
        services[name] = try start(name, groups: "t" + UUID().uuidString.prefix(8).lowercased() + "-", port: port)
        try services[name]!.waitReady()
        guard consumersAssigned(services[name]!, timeout: 60) else {
            throw TestFailure("\(name)'s consumers were not assigned partitions:\n\(services[name]!.log.suffix(2000))")
        }
    }

    /// A `prepare` that imports the first `lines` videos of the shipped catalogue (all: nil), as the deployment's
    /// one-shot job does.
    static func catalogue(first lines: Int? = nil) -> (TestDatabase) throws -> Void {
        { database in
            var path = CurationTestCase.shipped
            if let lines {
                let chosen = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").prefix(lines)
                path = FileManager.default.temporaryDirectory.appendingPathComponent("catalogue-\(UUID().uuidString).jsonl").path
                try chosen.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
            }
            let importer = try ServiceProcess("curation", environment: ["DATABASE_URL": database.url], arguments: ["import", path])
            importer.process.waitUntilExit()
            guard importer.process.terminationStatus == 0 else { throw TestFailure("the catalogue import failed: \(importer.log)") }
        }
    }

    func stop(failed: Bool) {
        if failed {
            for (name, service) in services.sorted(by: { $0.key < $1.key }) { print("--- \(name) log ---\n\(service.log.suffix(2000))") }
            print("--- gateway log ---\n\(gateway?.log.suffix(2000) ?? "")")
        }
        gateway?.stop()
        services.values.forEach { $0.stop() }
        database.drop()
    }
}

/// Whether every consumer of `service` holds partitions, by its metrics, within `timeout`.
func consumersAssigned(_ service: ServiceProcess, timeout: TimeInterval) -> Bool {
    let client = APIClient(port: service.port)
    return TestEnvironment.waitUntil(timeout: timeout) {
        let metrics = (try? client.get("/metrics")).map { String(decoding: $0.body, as: UTF8.self) } ?? ""
        let lines = metrics.split(separator: "\n").filter { $0.hasPrefix("kafka_consumer_assigned_partitions{") }
        return !lines.isEmpty && lines.allSatisfy { !$0.hasSuffix(" 0.0") }
    }
}
