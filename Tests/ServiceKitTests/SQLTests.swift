import Foundation
import Postgres
import XCTest

/// The statement a query sends and the values it binds: every value a parameter, numbered in order, through fragments.
final class SQLTests: XCTestCase {
    func testEachValueIsBoundInOrderAndNeverWrittenIntoTheStatement() {
        let id = UUID(), name = "Robert'); DROP TABLE users;--", missing: Int? = nil
        let sql: SQL = "SELECT a FROM t WHERE id = \(id) AND name = \(name) AND n IS NOT DISTINCT FROM \(missing)"
        XCTAssertEqual(sql.statement, "SELECT a FROM t WHERE id = $1 AND name = $2 AND n IS NOT DISTINCT FROM $3")
        XCTAssertEqual(sql.bindings.map { $0?.postgresText }, [id.postgresText, name, nil])
    }

    func testFragmentsJoinWithTheirValuesRenumbered() {
        let columns: SQL = "id, name"
        let filter: SQL = "owner = \(7) AND kind = \("a")"
        let sql: SQL = "SELECT \(columns) FROM t WHERE x = \(1) AND \(filter) \(unescaped: "FOR UPDATE")"
        XCTAssertEqual(sql.statement, "SELECT id, name FROM t WHERE x = $1 AND owner = $2 AND kind = $3 FOR UPDATE")
        XCTAssertEqual(sql.bindings.map { $0?.postgresText }, ["1", "7", "a"])
        let list = [1, 2, 3].map { "(\($0))" as SQL }.joined(separator: ", ")
        XCTAssertEqual(("VALUES " + list).statement, "VALUES ($1), ($2), ($3)")
    }

    func testPlacesPastNineAreNumberedInFullAndTextAroundThemKept() {
        let values = (1...12).map { "(\($0), 'é')" as SQL }.joined(separator: ",")
        XCTAssertEqual(values.statement, (1...12).map { "($\($0), 'é')" }.joined(separator: ","))
    }

    func testALiteralWithoutValuesIsSentAsWritten() {
        XCTAssertEqual(("SELECT '$1' AS dollars" as SQL).statement, "SELECT '$1' AS dollars")
    }
}
