import Foundation
import XCTest

/// Every service's OpenAPI document, tried by schemathesis (a bounded run, fixed seed): no 5xx, every status, content
/// type and body as documented, schema-violating requests refused, the `Allow` header true. Only its
/// `positive_data_acceptance` check is left out: it expects any value the schema admits to be accepted, which
/// opaque cursors, cross-field rules (`from` before `to`, username or email) and references to rows that do not
/// exist cannot satisfy.
final class SchemathesisTests: XCTestCase {
    var database: TestDatabase!
    override func setUpWithError() throws { database = try TestDatabase() }
    override func tearDown() { database?.drop() }

    // One test per service, each in a process of its own (SPLIT_TESTS in deploy/local/stack): run one after another,
    // they were the suite's longest test.
    func testAuthAnswersAsItsDocumentSays() throws { try check("auth") }
    func testStoriesAnswersAsItsDocumentSays() throws { try check("stories") }
    func testChatAnswersAsItsDocumentSays() throws { try check("chat") }
    func testDispatchAnswersAsItsDocumentSays() throws { try check("dispatch") }
    func testCurationAnswersAsItsDocumentSays() throws { try check("curation") }
    func testNotifyAnswersAsItsDocumentSays() throws { try check("notify") }

    /// Schemathesis on `name`'s document, with auth beside it for the token.
    private func check(_ name: String) throws {
        let st = try XCTUnwrap(ProcessInfo.processInfo.environment["SCHEMATHESIS_BIN"], "run the tests with deploy/local/stack test")
        let authPort = TestEnvironment.freePort()
        let environment = ["DATABASE_URL": database.url, "AUTH_JWKS_URL": "http://127.0.0.1:\(authPort)/v1/auth/jwks"]
        let auth = try ServiceProcess("auth", port: authPort, environment: environment)
        defer { auth.stop() }
        try auth.waitReady()
        // Dispatch takes cards through a stand-in of Stripe, so its payment routes are tried too, and its operator
        // routes are on (tried with the operator's token, in a run of their own).
        let stripe = name == "dispatch" ? try StripeStandIn() : nil
        defer { stripe?.stop() }
        let operatorToken = String(repeating: "o", count: 40)
        let service = name == "auth" ? auth : try ServiceProcess.startReady(name, environment: stripe.map {
            environment.merging($0.environment()) { $1 }.merging(["OPERATOR_TOKEN": operatorToken]) { $1 }
        } ?? environment)
        defer { if service !== auth { service.stop() } }
        let token = try APIClient(port: authPort).signup().accessToken
        let started = Date()
        do {
            try schemathesis(st, document: "http://127.0.0.1:\(service.port)/openapi.json", token: token, ["--exclude-path-regex", "^/v1/operator/"])
            if stripe != nil {
                try schemathesis(st, document: "http://127.0.0.1:\(service.port)/openapi.json", token: operatorToken,
                                 ["--include-path-regex", "^/v1/operator/"])
            }
        } catch {
            XCTFail("\(name): \(String(describing: error).suffix(6000))")
        }
        print("schemathesis on \(name): \(Int(Date().timeIntervalSince(started))) s")
        XCTAssertTrue(service.process.isRunning, "\(name) is still up")
    }
}

/// One bounded schemathesis run (fixed seed) of the document at `document`, as `token`'s user, with `options`
/// (which operations), in `phases`; throws with its report.
func schemathesis(_ st: String, document: String, token: String, _ options: [String] = [], phases: String = "examples,coverage,fuzzing") throws {
    let report = FileManager.default.temporaryDirectory.appendingPathComponent("schemathesis-\(UUID().uuidString.prefix(8)).txt")
    do { try run([st, "run", document, "--checks", "all", "--exclude-checks", "positive_data_acceptance",
             "--phases", phases, "-n", "25", "--seed", "20261130", "--request-timeout", "5",
             "-H", "Authorization: Bearer \(token)",
             // They would end the session the run uses (the list of sessions names it).
             "--exclude-operation-id", "postV1AuthLogout", "--exclude-operation-id", "deleteV1UsersMeSessionsById",
             "--exclude-path-regex", "/events$",  // event streams do not end
             // Readiness answers 503 whenever a dependency is slow to answer, as it should; LifecycleTests and
             // ResilienceTests hold it to what it says.
             "--exclude-path", "/readyz"] + options)
    } catch {
        // The report is long (each failure with its curl command): its head names the failures, its tail sums up.
        let text = String(describing: error)
        try? text.write(to: report, atomically: true, encoding: .utf8)
        let failures = text.split(separator: "\n").filter { $0.hasPrefix("_") || $0.contains("] ") || $0.hasPrefix("- ") || $0.contains("Failed") }
        throw TestFailure("schemathesis failed (whole report: \(report.path)):\n" + failures.prefix(60).joined(separator: "\n").prefix(6000)
                          + "\n...\n" + text.suffix(1500))
    }
}
