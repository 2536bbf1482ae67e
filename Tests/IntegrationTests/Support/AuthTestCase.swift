import Foundation
import XCTest

/// A test case with its own database and one auth process on the shared broker.
class AuthTestCase: XCTestCase {
    var database: TestDatabase!
    var auth: ServiceProcess!
    var api: APIClient!

    override func setUpWithError() throws {
        database = try TestDatabase()
        auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url])
        api = APIClient(port: auth.port)
    }

    override func tearDown() {
        if let auth, let run = testRun, run.failureCount > 0 {
            print("--- \(auth.name) log ---\n\(auth.log.suffix(4000))")
        }
        auth?.stop()
        database?.drop()
    }

    /// Rows in an auth table, to prove that a refused request wrote nothing.
    func count(_ table: String) throws -> Int {
        try database.connect().first("SELECT count(*) AS n FROM auth.\(unescaped: table)")!["n"]
    }
}
