import Foundation
import XCTest

/// A test case with its own database, auth, and one more service on the shared broker. Subclasses name the
/// service and its extra settings; `startInstance()` starts further instances of it on the same database.
class ServiceTestCase: XCTestCase {
    var database: TestDatabase!
    var auth: ServiceProcess!
    var service: ServiceProcess!
    var accounts: APIClient!
    var api: APIClient!

    /// The executable under test.
    var serviceName: String { fatalError("override serviceName") }
    /// Settings beyond the database and the key set.
    var serviceSettings: [String: String] { [:] }
    /// Where the services keep images, beyond the harness's folder (`MEDIA_STORE`): an S3 variant's bucket.
    var mediaSettings: [String: String] { [:] }

    override func setUpWithError() throws {
        database = try TestDatabase()
        auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url])
        accounts = APIClient(port: auth.port)
        service = try startInstance()
        api = APIClient(port: service.port)
    }

    override func tearDown() {
        if let run = testRun, run.failureCount > 0 {
            for p in [auth, service].compactMap({ $0 }) {
                // What it said besides its requests, then its last lines: a long test's requests hide the rest.
                let said = p.log.split(separator: "\n").filter { !$0.contains(#""msg":"request""#) }.joined(separator: "\n")
                print("--- \(p.name) log, requests left out ---\n\(said.suffix(3000))\n--- \(p.name) log ---\n\(p.log.suffix(3000))")
            }
        }
        service?.stop()
        auth?.stop()
        database?.drop()
    }

    /// This test's consumer groups: a group Tansu wedges (see `waitForConsumers`) stays with the test that wedged it.
    private(set) var groupPrefix = ServiceTestCase.newGroupPrefix()
    private static func newGroupPrefix() -> String { "t" + UUID().uuidString.prefix(8).lowercased() + "-" }

    /// Waits until the service under test holds its partitions. Tansu now and then never completes a group's join;
    /// then the service starts once more under new group ids (the wedged group is left behind).
    func waitForServiceConsumers() throws {
        do {
            try waitForConsumers(service, timeout: 30)
        } catch {
            print("\(serviceName)'s consumer groups were never assigned; starting it again under new group ids")
            service.stop()
            groupPrefix = Self.newGroupPrefix()
            service = try startInstance()
            api = APIClient(port: service.port)
            try waitForConsumers(service)
        }
    }

    /// Starts an instance of the service on this test's database and waits until it is ready. `ownGroups` puts its
    /// consumers in groups of their own, for tests about what instances share through the database, not Kafka:
    /// Tansu now and then never completes the rebalance a second member of a group brings.
    func startInstance(ownGroups: Bool = false, settings: [String: String] = [:]) throws -> ServiceProcess {
        var environment = serviceSettings.merging(mediaSettings) { $1 }.merging(settings) { $1 }
        environment["DATABASE_URL"] = database.url
        environment["KAFKA_GROUP_PREFIX"] = ownGroups ? Self.newGroupPrefix() : groupPrefix
        environment["AUTH_JWKS_URL"] = "http://127.0.0.1:\(auth.port)/v1/auth/jwks"
        return try ServiceProcess.startReady(serviceName, environment: environment)
    }

    /// Waits until the service's consumers hold their partitions. Stopping a process while its group join is
    /// still pending leaves Tansu waiting for that member, and later joins of the group never complete.
    func waitForConsumers(_ service: ServiceProcess, timeout: TimeInterval = 60) throws {
        if !consumersAssigned(service, timeout: timeout) { throw TestFailure("\(service.name)'s consumers were not assigned partitions:\n\(service.log.suffix(2000))") }
    }

    /// A signed-up person: their id and access token.
    struct Person { let id: String; let token: String }

    func person(_ name: String = "p" + UUID().uuidString.prefix(10).lowercased().replacingOccurrences(of: "-", with: "")) throws -> Person {
        let r = try accounts.signup(name)
        XCTAssertEqual(r.status, 201)
        return Person(id: r.userId, token: r.accessToken)
    }

    /// Rows of a table in the service's schema matching `condition`.
    func count(_ table: String, _ condition: String = "true") throws -> Int {
        try database.connect().first("SELECT count(*) AS n FROM \(unescaped: serviceName).\(unescaped: table) WHERE \(unescaped: condition)")!["n"]
    }
}
