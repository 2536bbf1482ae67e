import Foundation
import WireClient
import XCTest

/// The Prometheus rules and scrape configurations of `deploy/monitoring`, checked and tested by `promtool` (Debian's
/// `prometheus` package, which `deploy/local/stack install` puts in), every service's `/metrics` read by
/// `promtool check metrics`, and a real Prometheus that pages when a service stops.
final class MonitoringTests: XCTestCase {
    var monitoring: URL { TestEnvironment.root.appendingPathComponent("deploy/monitoring") }

    func promtool(_ arguments: [String]) throws -> String {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool") else {
            throw TestFailure("promtool is missing: deploy/local/stack install puts Debian's prometheus package in")
        }
        return try IntegrationTests.run(["promtool"] + arguments)
    }

    func testTheRulesAndScrapeConfigurationsPassPromtoolAndEveryAlertHasATestAndARunbook() throws {
        for config in ["prometheus.yml", "compose.yml"] {
            XCTAssertTrue(try promtool(["check", "config", monitoring.appendingPathComponent(config).path]).contains("SUCCESS"), config)
        }
        XCTAssertTrue(try promtool(["test", "rules", monitoring.appendingPathComponent("tests.yml").path]).contains("SUCCESS"))

        let rules = try String(contentsOf: monitoring.appendingPathComponent("rules.yml"), encoding: .utf8)
        let tests = try String(contentsOf: monitoring.appendingPathComponent("tests.yml"), encoding: .utf8)
        let operations = try String(contentsOf: TestEnvironment.root.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        let alerts = rules.split(separator: "\n").compactMap { line -> String? in
            let t = line.trimmingCharacters(in: .whitespaces)
            return t.hasPrefix("- alert: ") ? String(t.dropFirst("- alert: ".count)) : nil
        }
        XCTAssertGreaterThanOrEqual(alerts.count, 14)
        for alert in alerts {
            // A test in which it fires: its name, then expected alerts with labels.
            let firing = tests.components(separatedBy: "alertname: \(alert)\n").dropFirst().contains {
                $0.trimmingCharacters(in: .whitespaces).hasPrefix("exp_alerts:\n") && $0.contains("exp_labels")
            }
            XCTAssertTrue(firing, "\(alert) has no promtool test in which it fires")
            // A slow burn shares its fast twin's runbook.
            let section = alert.hasSuffix("Slow") ? String(alert.dropLast(4)) : alert
            let anchor = "operations.md#\(section.lowercased())"
            let runbook = rules.components(separatedBy: "- alert: \(alert)\n").dropFirst().first?.components(separatedBy: "- alert:").first ?? ""
            XCTAssertTrue(runbook.contains(anchor), "\(alert)'s runbook_url is not \(anchor)")
            XCTAssertTrue(operations.contains("\n### \(section)\n"), "docs/operations.md has no runbook heading ### \(section)")
        }
    }

    func testEveryServiceMetricsPassPromtoolAndPrometheusPagesWhenAServiceStops() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let services = try ServiceProcess.startAll(database: database)
        defer { services.forEach { _ = $0.stop() } }
        // A replication slot that reserves WAL and that nobody reads: every service reports it (the cluster's).
        let slot = "monitoring_\(UUID().uuidString.prefix(8).lowercased())"
        let admin = try database.connect()
        _ = try admin.first("SELECT pg_create_physical_replication_slot($1, true)", [slot])
        defer { _ = try? admin.first("SELECT pg_drop_replication_slot($1)", [slot]) }
        for service in services {
            let text = try HTTPClient(port: service.port, timeout: 5).request("GET", "/metrics").body
            let lines = String(decoding: text, as: UTF8.self).split(separator: "\n")
            XCTAssertTrue(lines.contains { $0.hasPrefix("postgres_replication_slot_active{slot=\"\(slot)\"} 0") }, "\(service.name) reports the slot")
            XCTAssertTrue(lines.contains { $0.hasPrefix("postgres_replication_slot_retained_wal_bytes{slot=\"\(slot)\"} ") }, service.name)
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(service.name)-\(UUID().uuidString.prefix(6)).txt")
            try Data(text).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            XCTAssertNoThrow(try IntegrationTests.run(["sh", "-c", "promtool check metrics < '\(file.path)'"]), "\(service.name)'s /metrics")
            XCTAssertTrue(String(decoding: text, as: UTF8.self).contains("service_ready"), service.name)
        }

        // Prometheus scrapes them every second with the repository's rules; dispatch stops, and it pages.
        let port = TestEnvironment.freePort()
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("prometheus-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let jobs = services.map { "  - job_name: \($0.name)\n    static_configs: [{targets: [\"127.0.0.1:\($0.port)\"]}]" }.joined(separator: "\n")
        try """
            global: {scrape_interval: 1s, evaluation_interval: 1s}
            rule_files: ["\(monitoring.appendingPathComponent("rules.yml").path)"]
            scrape_configs:
            \(jobs)
            """.write(to: work.appendingPathComponent("prometheus.yml"), atomically: true, encoding: .utf8)
        let prometheus = Process()
        prometheus.executableURL = URL(fileURLWithPath: "/usr/bin/prometheus")
        prometheus.arguments = ["--config.file=\(work.path)/prometheus.yml", "--storage.tsdb.path=\(work.path)/data",
                                "--web.listen-address=127.0.0.1:\(port)"]
        let log = work.appendingPathComponent("prometheus.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        prometheus.standardError = try FileHandle(forWritingTo: log)
        prometheus.standardOutput = prometheus.standardError
        try prometheus.run()
        defer { prometheus.terminate(); prometheus.waitUntilExit() }
        let api = HTTPClient(port: port, timeout: 5)
        func get(_ path: String) -> [String: Any] {
            guard let r = try? api.request("GET", path), r.status == 200 else { return [:] }
            return ((try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any])?["data"] as? [String: Any] ?? [:]
        }
        let up = TestEnvironment.waitUntil(timeout: 30) {
            let targets = get("/api/v1/targets")["activeTargets"] as? [[String: Any]] ?? []
            return targets.count == 6 && targets.allSatisfy { $0["health"] as? String == "up" }
        }
        XCTAssertTrue(up, "every service's target up: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            let ready = (get("/api/v1/query?query=service_ready")["result"] as? [[String: Any]]) ?? []
            return ready.count == 6 && ready.allSatisfy { (($0["value"] as? [Any])?.last as? String) == "1" }
        }, "service_ready is 1 for all six")
        let dispatch = try XCTUnwrap(services.first { $0.name == "dispatch" })
        _ = dispatch.stop()
        // ServiceDown waits a minute (`for: 1m`) before it pages.
        var alerts: [[String: Any]] = []
        let fired = TestEnvironment.waitUntil(timeout: 100) {
            alerts = get("/api/v1/alerts")["alerts"] as? [[String: Any]] ?? []
            return alerts.contains { ($0["labels"] as? [String: Any])?["alertname"] as? String == "ServiceDown" && $0["state"] as? String == "firing" }
        }
        XCTAssertTrue(fired, "\(alerts)")
        let down = alerts.filter { ($0["labels"] as? [String: Any])?["alertname"] as? String == "ServiceDown" }
        XCTAssertEqual(down.compactMap { ($0["labels"] as? [String: Any])?["job"] as? String }, ["dispatch"], "only the stopped service")
    }
}
