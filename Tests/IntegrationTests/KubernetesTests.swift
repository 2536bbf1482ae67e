import Foundation
import XCTest

/// `deploy/kubernetes`, checked without a cluster by `deploy/kubernetes/check`: both overlays render with
/// `kubectl kustomize` and validate against the Kubernetes API's schemas (kubernetes-validate, offline), hold to
/// docker-compose.yml (settings, images), and probe paths the services really answer. The check is also run on a
/// copy broken on purpose, so that it is known to fail.
final class KubernetesTests: XCTestCase {
    let root = TestEnvironment.root

    /// Runs the check; its exit status and what it printed.
    func check(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try runForStatus([root.appendingPathComponent("deploy/kubernetes/check").path] + arguments)
    }

    func testBothOverlaysRenderValidateAndHoldToComposeAndToWhatTheServicesAnswer() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let services = try ServiceProcess.startAll(database: database)
        defer { services.forEach { _ = $0.stop() } }
        let (status, output) = try check(services.flatMap { ["--probe", "\($0.name)=http://127.0.0.1:\($0.port)"] })
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains("0 problems; validated against Kubernetes 1.32.0; probes asked of: auth, chat, curation, dispatch, notify, stories"), output)
        for overlay in ["small", "production"] {
            XCTAssertTrue(output.contains("\(overlay): "), output)
        }
        XCTAssertTrue(output.contains("StatefulSet"), "the small overlay brings its own PostgreSQL and Kafka: \(output)")
    }

    func testTheCheckFailsOnAManifestBrokenOnPurpose() throws {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("kubernetes-broken-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: copy) }
        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: root.appendingPathComponent("docker-compose.yml"), to: copy.appendingPathComponent("docker-compose.yml"))
        try FileManager.default.copyItem(at: root.appendingPathComponent("deploy"), to: copy.appendingPathComponent("deploy"))
        func edit(_ path: String, _ old: String, _ new: String) throws {
            let url = copy.appendingPathComponent(path)
            let text = try String(contentsOf: url, encoding: .utf8)
            XCTAssertTrue(text.contains(old), "\(path) no longer holds \(old)")
            try text.replacingOccurrences(of: old, with: new).write(to: url, atomically: true, encoding: .utf8)
        }
        // A setting compose passes, left out; an image tag that differs from compose's; a readiness path no service
        // serves; a field of the wrong type; a Secret key nobody makes; a migration run on another service's database.
        try edit("deploy/kubernetes/base/settings.env", "SMTP_URL=\n", "")
        try edit("deploy/kubernetes/base/gateway.yaml", "image: nginx:1.27-bookworm", "image: nginx:1.25-bookworm")
        try edit("deploy/kubernetes/base/service-pod.yaml", "path: /readyz", "path: /ready")
        try edit("deploy/kubernetes/base/availability.yaml", "averageUtilization: 70", "averageUtilization: seventy")
        try edit("deploy/kubernetes/base/services.yaml", "key: SIGNING_KEY_ENCRYPTION_KEY}", "key: SIGNING_KEY}")
        try edit("deploy/kubernetes/base/prepare.yaml", "value: \"$(DATABASE_SERVER_URL)/chat\"", "value: \"$(DATABASE_SERVER_URL)/auth\"")

        let database = try TestDatabase()
        defer { database.drop() }
        let auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url])
        defer { _ = auth.stop() }
        let (status, output) = try check(["--root", copy.path, "--probe", "auth=http://127.0.0.1:\(auth.port)"])
        XCTAssertEqual(status, 1, output)
        for expected in ["production: Deployment notify/notify lacks SMTP_URL, which compose passes to notify",
                         "small: Deployment gateway/gateway runs nginx:1.25-bookworm, compose's gateway nginx:1.27-bookworm",
                         "small: Deployment auth's readinessProbe asks /ready, which auth answers with 404",
                         "production: does not validate against Kubernetes 1.32.0",
                         "'seventy' is not of type 'integer'",
                         "small: auth/auth reads SIGNING_KEY, which Secret backend-secrets-",
                         "base: prepare/migrate-chat does not run on chat's own database"] {
            XCTAssertTrue(output.contains(expected), "the check did not say \"\(expected)\":\n\(output)")
        }
        XCTAssertFalse(output.contains("asks /healthz"), "/healthz is served: \(output)")
    }
}
