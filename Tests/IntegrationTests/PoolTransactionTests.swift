import Foundation
import Postgres
import XCTest

/// `Pool.withTransaction` sends BEGIN with the transaction's first statement (one round trip), and statements whose
/// results nobody reads (`enqueue`) with the next statement or the commit: the statements must still share one
/// transaction and run in order, a failure must still undo them and be reported, and the connection must come back
/// usable.
final class PoolTransactionTests: XCTestCase {
    private var pool: Pool!
    private let table = "pool_tx_\(UInt32.random(in: 0...UInt32.max))"

    override func setUpWithError() throws {
        pool = Pool(url: TestEnvironment.adminDatabaseURL, maxSize: 1)
        try pool.withConnection { _ = try $0.execute("CREATE TABLE \(unescaped: table) (id int PRIMARY KEY)") }
    }

    override func tearDownWithError() throws {
        try pool.withConnection { _ = try $0.execute("DROP TABLE \(unescaped: table)") }
    }

    private func count() throws -> Int {
        try pool.withConnection { try $0.first("SELECT count(*) AS n FROM \(unescaped: table)")?["n"] as Int? ?? -1 }
    }

    func testADatabaseNamedByItsHostNameIsReachedAndAnUnknownNameIsSaidSo() throws {
        var url = URLComponents(string: TestEnvironment.adminDatabaseURL)!
        url.host = "localhost"
        let connection = try Connection(url: url.string!)
        XCTAssertEqual(try connection.first("SELECT host(inet_server_addr()) AS address")?["address"] as String?, "127.0.0.1")
        url.host = "no-such-host.invalid"
        XCTAssertThrowsError(try Connection(url: url.string!)) {
            XCTAssertEqual(($0 as? PostgresError)?.kind, .unavailable)
            XCTAssertTrue(($0 as? PostgresError)?.serverMessage.hasPrefix("could not translate host name \"no-such-host.invalid\" to address") == true, "\($0)")
        }
    }

    func testTheStatementsOfATransactionShareItAndCommitTogether() throws {
        let ids = try pool.withTransaction { c -> [String] in
            try c.execute("INSERT INTO \(unescaped: table) VALUES (1)")
            return [try c.first("SELECT txid_current()::text AS id")?["id"] as String? ?? "", try c.first("SELECT txid_current()::text AS id")?["id"] as String? ?? ""]
        }
        XCTAssertEqual(ids[0], ids[1], "a second statement ran outside the first one's transaction")
        XCTAssertEqual(try count(), 1)
    }

    func testAThrowingBodyUndoesEverythingItDid() throws {
        struct Refused: Error {}
        XCTAssertThrowsError(try pool.withTransaction { c in
            try c.execute("INSERT INTO \(unescaped: table) VALUES (1)")
            try c.execute("INSERT INTO \(unescaped: table) VALUES (2)")
            throw Refused()
        })
        XCTAssertEqual(try count(), 0)
    }

    func testAFailingFirstStatementReportsItsErrorAndLeavesTheConnectionUsable() throws {
        try pool.withTransaction { _ = try $0.execute("INSERT INTO \(unescaped: table) VALUES (1)") }
        var hooked = false
        XCTAssertThrowsError(try pool.withTransaction { c in
            c.afterCommit { hooked = true }
            try c.execute("INSERT INTO \(unescaped: table) VALUES (1)")  // the transaction's first statement, with BEGIN
        }) { XCTAssertEqual(($0 as? PostgresError)?.kind, .uniqueViolation) }
        XCTAssertFalse(hooked, "an after-commit hook ran for a transaction that rolled back")
        // The pool's one connection, again: out of the pipeline and out of the failed transaction.
        try pool.withTransaction { _ = try $0.execute("INSERT INTO \(unescaped: table) VALUES (2)") }
        XCTAssertEqual(try count(), 2)
    }

    func testAfterCommitWaitsForTheCommitAndATransactionWithoutStatementsIsFine() throws {
        var hooked = false
        try pool.withTransaction { c in
            c.afterCommit { hooked = true }  // asked before any statement was sent
            XCTAssertFalse(hooked, "the hook ran before the transaction committed")
            try c.execute("INSERT INTO \(unescaped: table) VALUES (1)")
            XCTAssertFalse(hooked)
        }
        XCTAssertTrue(hooked)
        var empty = false
        try pool.withTransaction { $0.afterCommit { empty = true } }
        XCTAssertTrue(empty)
        XCTAssertEqual(try count(), 1)
    }

    func testQueuedStatementsRunInOrderBeforeTheNextAndWithTheCommit() throws {
        let seen = try pool.withTransaction { c -> Int in
            try c.enqueue("INSERT INTO \(unescaped: table) VALUES (\(1))")  // before BEGIN was sent: goes with it
            try c.enqueue("INSERT INTO \(unescaped: table) VALUES (\(2))")
            let seen = try c.first("SELECT count(*) AS n FROM \(unescaped: table)")?["n"] as Int? ?? -1
            try c.enqueue("INSERT INTO \(unescaped: table) VALUES (\(3))")  // goes with the COMMIT
            return seen
        }
        XCTAssertEqual(seen, 2, "the next statement did not see the queued ones")
        XCTAssertEqual(try count(), 3, "a statement queued last was not committed")
        // Outside a transaction a statement runs at once.
        try pool.withConnection { try $0.enqueue("INSERT INTO \(unescaped: table) VALUES (\(4))") }
        XCTAssertEqual(try count(), 4)
    }

    func testAFailingQueuedStatementFailsTheTransactionWithItsOwnError() throws {
        try pool.withTransaction { _ = try $0.execute("INSERT INTO \(unescaped: table) VALUES (1)") }
        // Failing at the next statement: that statement's own result is not what is reported, and nothing stays.
        XCTAssertThrowsError(try pool.withTransaction { c in
            try c.enqueue("INSERT INTO \(unescaped: table) VALUES (\(2))")
            try c.enqueue("INSERT INTO \(unescaped: table) VALUES (\(1))")  // taken
            _ = try c.first("SELECT 1 AS one")
            XCTFail("the statement after a failed one returned")
        }) { XCTAssertEqual(($0 as? PostgresError)?.kind, .uniqueViolation) }
        // Failing at the commit: the hook does not run, and nothing stays.
        var hooked = false
        XCTAssertThrowsError(try pool.withTransaction { c in
            c.afterCommit { hooked = true }
            try c.execute("INSERT INTO \(unescaped: table) VALUES (3)")
            try c.enqueue("INSERT INTO \(unescaped: table) VALUES (\(1))")
        }) { XCTAssertEqual(($0 as? PostgresError)?.kind, .uniqueViolation) }
        XCTAssertFalse(hooked, "an after-commit hook ran for a transaction that failed at its commit")
        // A body that throws drops what it queued.
        struct Refused: Error {}
        XCTAssertThrowsError(try pool.withTransaction { c in
            try c.enqueue("INSERT INTO \(unescaped: table) VALUES (\(5))")
            throw Refused()
        }) { XCTAssertTrue($0 is Refused) }
        XCTAssertEqual(try count(), 1)
        try pool.withTransaction { try $0.enqueue("INSERT INTO \(unescaped: table) VALUES (\(6))") }  // the connection is usable
        XCTAssertEqual(try count(), 2)
    }

    func testStatementsReadTogetherReturnTheirOwnRowsAndAFailureIsItsOwn() throws {
        let rows = try pool.withTransaction { c -> [[Row]] in
            try c.enqueue("INSERT INTO \(unescaped: table) VALUES (\(1))")
            return try c.rows(together: ["SELECT count(*) AS n FROM \(unescaped: table)", "SELECT \(41)::int + 1 AS n",
                                         "SELECT id AS n FROM \(unescaped: table) WHERE id > \(5)"])
        }
        XCTAssertEqual(try rows.map { try $0.map { try $0["n"] as Int } }, [[1], [42], []])
        XCTAssertThrowsError(try pool.withConnection { c in
            try c.rows(together: [("SELECT 1 AS n", []), ("SELECT 1 / $1::int AS n", [0]), ("SELECT 3 AS n", [])])
        }) { XCTAssertEqual(($0 as? PostgresError)?.sqlState, "22012", "\($0)") }
        XCTAssertEqual(try count(), 1, "the connection is not usable after a failed read")
    }

    func testASavepointUndoesOnlyItsOwnBodyAndTheTransactionGoesOn() throws {
        struct Refused: Error {}
        try pool.withTransaction { c in
            try c.execute("INSERT INTO \(unescaped: table) VALUES (1)")
            // Undone whether the body throws itself or a statement it queued fails when it ends.
            XCTAssertThrowsError(try c.withSavepoint { try c.execute("INSERT INTO \(unescaped: table) VALUES (2)"); throw Refused() })
            XCTAssertThrowsError(try c.withSavepoint { try c.enqueue("INSERT INTO \(unescaped: table) VALUES (\(1))") }) {
                XCTAssertEqual(($0 as? PostgresError)?.kind, .uniqueViolation)
            }
            try c.withSavepoint { try c.enqueue("INSERT INTO \(unescaped: table) VALUES (\(3))") }
        }
        XCTAssertEqual(try pool.withConnection { try $0.rows("SELECT id FROM \(unescaped: table) ORDER BY id").map { try $0["id"] as Int } }, [1, 3])
    }
}
