import Foundation
import XCTest

/// The fault run (`deploy/local/stack faults`: writers on stories and parcels while a service, PostgreSQL and the
/// broker are killed with SIGKILL; then every acknowledged write and its one event are checked) on a stack of its own:
/// its own PostgreSQL cluster, broker, stand-ins and ports, running the tests' build. So it runs beside the rest of the
/// suite rather than after it, and what it kills is its own.
final class FaultRunTests: XCTestCase {
    func testKillingAServicePostgreSQLAndTheBrokerUnderWritesLosesNoCommittedChangeOrEvent() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("faults-\(UUID().uuidString.prefix(8))").path
        let environment = try stackEnvironment(state: state)
        defer {
            _ = try? Self.stack("down", environment: environment, timeout: 120)
            try? FileManager.default.removeItem(atPath: state)
        }
        let (status, output) = try Self.stack("faults", environment: environment, timeout: 900)
        XCTAssertEqual(status, 0, "the fault run failed:\n\(output.suffix(8000))")
    }

    /// Only what a person would set (the stack derives the rest), with every port taken from this worker's range.
    private func stackEnvironment(state: String) throws -> [String: String] {
        let inherited = ProcessInfo.processInfo.environment
        var environment = ["PATH", "HOME", "LANG", "TMPDIR", "USER"].reduce(into: [String: String]()) { $0[$1] = inherited[$1] }
        environment["STACK_STATE_DIR"] = state
        environment["STACK_BUILD"] = "debug"
        environment["STACK_BIN_DIR"] = TestEnvironment.binDir
        environment["STACK_PORT_BASE"] = String(try TestEnvironment.freeRun(of: 7))  // the gateway, then the six services
        for name in ["STACK_PG_PORT", "STACK_KAFKA_PORT", "STACK_GATEWAY_TLS_PORT", "STACK_MAIL_PORT", "STACK_STRIPE_PORT",
                     "STACK_APNS_PORT", "STACK_FCM_PORT"] {
            environment[name] = String(TestEnvironment.freePort())
        }
        return environment
    }

    /// Runs `deploy/local/stack <command>` to its end: its status and what it wrote. The shell writes its status to a
    /// file, which is waited for: the services the stack leaves running inherit whatever Foundation watches to see
    /// a child end (and what it writes to), so `waitUntilExit` would wait for them too.
    private static func stack(_ command: String, environment: [String: String], timeout: TimeInterval) throws -> (Int32, String) {
        let files = FileManager.default.temporaryDirectory.appendingPathComponent("stack-\(command)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: files) }
        let log = files.appendingPathComponent("log").path, status = files.appendingPathComponent("status").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", #""$0" "$1" >"$2" 2>&1 </dev/null; echo $? >"$3.part" && mv "$3.part" "$3""#,
                             TestEnvironment.root.appendingPathComponent("deploy/local/stack").path, command, log, status]
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let ended = TestEnvironment.waitUntil(timeout: timeout, every: 0.5) { FileManager.default.fileExists(atPath: status) }
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        guard ended, let code = Int32((try? String(contentsOfFile: status, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") else {
            throw TestFailure("deploy/local/stack \(command) did not end within \(Int(timeout)) s:\n\(output.suffix(8000))")
        }
        return (code, output)
    }
}
