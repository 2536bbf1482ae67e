import Foundation
import XCTest

/// What `deploy/containers/check` (which builds the images and runs docker-compose.yml for real) cannot see: the
/// parts of the compose file that only operators' infrastructure uses (the Apache Kafka image and the
/// kafka-cluster profile), that `.env.example` documents every setting the compose file takes, and that the local
/// stack and CI start what the package builds.
final class DeploymentTests: XCTestCase {
    let root = TestEnvironment.root
    let ports = ["auth": 8081, "stories": 8082, "chat": 8083, "dispatch": 8084, "curation": 8085]

    func read(_ path: String) throws -> String { try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8) }

    /// The services the package builds (executable products that are services).
    func services() throws -> [String] {
        let package = try read("Package.swift")
        return ports.keys.filter { package.contains(".executable(name: \"\($0)\"") }.sorted()
    }

    /// docker-compose.yml as compose reads it (anchors and merge keys resolved), through PyYAML in the stack's venv.
    func compose() throws -> [String: Any] {
        let json = try IntegrationTests.run([try TestEnvironment.venvPython(), "-c", "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
                                             root.appendingPathComponent("docker-compose.yml").path])
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
    }

    func testComposeRunsEveryServiceWithItsSettingsAndLimits() throws {
        let defined = try compose()["services"] as? [String: Any] ?? [:]
        XCTAssertFalse(try services().isEmpty)
        for name in try services() {
            guard let service = defined[name] as? [String: Any] else { XCTFail("compose has no \(name)"); continue }
            let build = service["build"] as? [String: Any]
            XCTAssertEqual(build?["target"] as? String, "service")
            XCTAssertEqual((build?["args"] as? [String: Any])?["SERVICE"] as? String, name)
            XCTAssertEqual(service["init"] as? Bool, true, "\(name): a PID 1 that forwards signals")
            let env = service["environment"] as? [String: Any] ?? [:]
            XCTAssertEqual(env["PORT"] as? String, String(ports[name]!))
            for key in ["DATABASE_URL", "KAFKA_BROKERS", "AUTH_JWKS_URL", "SERVICE_TOKEN", "KAFKA_REPLICATION_FACTOR"] {
                XCTAssertNotNil(env[key], "\(name) \(key)")
            }
            let limits = ((service["deploy"] as? [String: Any])?["resources"] as? [String: Any])?["limits"] as? [String: Any]
            XCTAssertNotNil(limits?["memory"], "\(name) has a memory limit")
            let depends = service["depends_on"] as? [String: Any] ?? [:]
            XCTAssertEqual((depends["topics"] as? [String: Any])?["condition"] as? String, "service_completed_successfully",
                           "\(name) starts after the topics exist")
            // A database of its own (docs/operations.md, "A database per service"), made by the databases job first.
            XCTAssertTrue((env["DATABASE_URL"] as? String ?? "").hasSuffix("@postgres:5432/\(name)"), "\(name)'s own database")
            XCTAssertEqual((depends["databases"] as? [String: Any])?["condition"] as? String, "service_completed_successfully",
                           "\(name) starts after its database exists")
        }
    }

    /// The real Kafka image and the kafka-cluster profile (the check runs Tansu in their place).
    func testKafkaCreatesNoTopicsByItselfAndTheClusterProfileHasThreeBrokers() throws {
        let defined = try compose()["services"] as? [String: Any] ?? [:]
        let brokers = defined.filter { ($0.value as? [String: Any])?["image"] as? String == "apache/kafka:3.8.1" }
        XCTAssertEqual(brokers.keys.sorted(), ["kafka", "kafka-2", "kafka-3"])
        for (name, value) in brokers {
            let broker = value as? [String: Any] ?? [:]
            let env = broker["environment"] as? [String: Any] ?? [:]
            XCTAssertEqual(env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] as? String, "false", name)
            XCTAssertEqual(env["KAFKA_MIN_INSYNC_REPLICAS"] as? String, "${KAFKA_MIN_INSYNC_REPLICAS:-1}", name)
            XCTAssertEqual(env["KAFKA_DEFAULT_REPLICATION_FACTOR"] as? String, "${KAFKA_REPLICATION_FACTOR:-1}", name)
            if name != "kafka" { XCTAssertEqual(broker["profiles"] as? [String], ["kafka-cluster"]) }
        }
        let example = try read(".env.example")
        for line in ["KAFKA_REPLICATION_FACTOR=3", "KAFKA_MIN_INSYNC_REPLICAS=2", "KAFKA_QUORUM_VOTERS=1@kafka:9093,2@kafka-2:9093,3@kafka-3:9093"] {
            XCTAssertTrue(example.contains(line), ".env.example's kafka-cluster lines lack \(line)")
        }
        let topics = defined["topics"] as? [String: Any] ?? [:]
        XCTAssertEqual(topics["command"] as? [String], ["create-topics"])
        XCTAssertEqual((topics["environment"] as? [String: Any])?["KAFKA_REPLICATION_FACTOR"] as? String, "${KAFKA_REPLICATION_FACTOR:-1}")
    }

    /// Sign-in with Google can be turned on from .env, and a one-shot job imports the catalogue once curation is up
    /// (the check sees both work; this, that the file says so).
    func testComposeCanTurnOnGoogleSignInAndImportsTheCatalogue() throws {
        let defined = try compose()["services"] as? [String: Any] ?? [:]
        let auth = (defined["auth"] as? [String: Any])?["environment"] as? [String: Any] ?? [:]
        XCTAssertEqual(auth["GOOGLE_CLIENT_IDS"] as? String, "${GOOGLE_CLIENT_IDS:-}")
        let curation = (defined["curation"] as? [String: Any])?["environment"] as? [String: Any] ?? [:]
        XCTAssertEqual(curation["YOUTUBE_API_KEY"] as? String, "${YOUTUBE_API_KEY:-}")
        let job = defined["catalogue"] as? [String: Any] ?? [:]
        XCTAssertEqual(job["command"] as? [String], ["import", "/catalogue/videos.jsonl"])
        XCTAssertEqual(job["volumes"] as? [String], ["${CURATION_CATALOGUE_DIR:-./deploy/demo/curation}:/catalogue:ro"])
        XCTAssertEqual(((job["depends_on"] as? [String: Any])?["curation"] as? [String: Any])?["condition"] as? String, "service_healthy")
        XCTAssertTrue(FileManager.default.fileExists(atPath: root.appendingPathComponent("deploy/demo/curation/videos.jsonl").path))
    }

    /// Every variable the compose file takes is documented in .env.example, and no secret has a default.
    func testEnvExampleDocumentsEverySettingAndSecretsHaveNoDefault() throws {
        let text = try read("docker-compose.yml")
        let used = Set(text.matches(of: /\$\{([A-Z_0-9]+)/).map { String($0.1) })
        let example = try read(".env.example")
        for name in used { XCTAssertTrue(example.contains("\(name)="), ".env.example does not document \(name)") }
        for secret in ["POSTGRES_PASSWORD", "SERVICE_TOKEN", "SIGNING_KEY_ENCRYPTION_KEY", "MEDIA_URL_KEYS"] {
            XCTAssertTrue(text.contains("${\(secret):?"), "\(secret) must be required, not defaulted")
            XCTAssertTrue(example.contains("\n\(secret)=\n"), ".env.example must not carry a value for \(secret)")
        }
        XCTAssertFalse(try read("deploy/docker/Dockerfile").contains("TOKEN="), "no secret baked into an image")
    }

    func testTheLocalStackAndCIStartEveryService() throws {
        let stack = try read("deploy/local/stack")
        let line = stack.split(separator: "\n").first { $0.hasPrefix("SERVICES=(") } ?? ""
        for name in try services() { XCTAssertTrue(line.contains(name), "stack does not start \(name)") }
        let check = try read("deploy/containers/check")
        let checked = check.split(separator: "\n").first { $0.hasPrefix("SERVICES=(") } ?? ""
        for name in try services() { XCTAssertTrue(checked.contains(name), "the container check does not build \(name)") }
        let readme = try read("README.md")
        for command in ["deploy/local/stack up", "deploy/local/stack test", "deploy/containers/check"] {
            XCTAssertTrue(readme.contains(command), "README lacks \(command)")
        }
        let ci = try read(".ci/run")
        XCTAssertTrue(ci.contains("deploy/local/stack test"))
        XCTAssertTrue(ci.contains("deploy/containers/check"))
    }
}
