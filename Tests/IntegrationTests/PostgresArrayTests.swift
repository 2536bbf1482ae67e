import Foundation
import Postgres
import XCTest

/// Array parameters as PostgreSQL reads them: binary for uuid, float8, bool and timestamptz elements
/// and for strings bound as `texts:`, text otherwise.
final class PostgresArrayTests: XCTestCase {
    func testBinaryArraysReadBackWhatWasSent() throws {
        let c = try Connection(url: TestEnvironment.adminDatabaseURL)
        let ids = [UUID(), UUID()]
        let times = [Date(timeIntervalSince1970: 1_796_004_000.123456), Date(timeIntervalSince1970: -0.25),
                     Date(timeIntervalSince1970: 946_684_799.999999)]  // now, before 1970, just before 2000 (PostgreSQL's epoch)
        let row = try XCTUnwrap(c.first("""
            SELECT $1::uuid[]::text AS ids, array_to_string($2::float8[], ',', 'null') AS numbers, $3::bool[]::text AS flags,
                   array_to_string(ARRAY(SELECT extract(epoch FROM t)::text FROM unnest($4::timestamptz[]) t), ',') AS times,
                   cardinality($5::uuid[]) AS empty
            """, [PostgresArray(ids), PostgresArray([1.5, nil, -0.0, 1e300]), PostgresArray([true, false]), PostgresArray(times),
                  PostgresArray([UUID]())]))
        XCTAssertEqual(try row["ids"] as String, "{" + ids.map { $0.uuidString.lowercased() }.joined(separator: ",") + "}")
        XCTAssertEqual(try row["numbers"] as String, "1.5,null,-0,1e+300")
        XCTAssertEqual(try row["flags"] as String, "{t,f}")
        XCTAssertEqual(try row["times"] as String, "1796004000.123456,-0.250000,946684799.999999")
        XCTAssertEqual(try row["empty"] as Int, 0)
    }

    func testABinaryArrayOfAnotherTypeIsRefusedWithoutHarm() throws {
        let c = try Connection(url: TestEnvironment.adminDatabaseURL)
        XCTAssertThrowsError(try c.execute("SELECT $1::text[]", [PostgresArray([UUID()])]))
        XCTAssertEqual(try c.first("SELECT $1::text[]::text AS names", [PostgresArray(["a\"b", "c"])])?["names"] as String?, #"{"a\"b",c}"#)
        XCTAssertEqual(try c.first("SELECT $1::text[]::text AS names", [PostgresArray(texts: ["a\"b", "c", "", "é ✓"])])?["names"] as String?,
                       #"{"a\"b",c,"","é ✓"}"#)
        XCTAssertEqual(try c.first("SELECT cardinality($1::text[]) AS n", [PostgresArray(texts: [])])?["n"] as Int?, 0)
        XCTAssertThrowsError(try c.execute("SELECT $1::uuid[]", [PostgresArray(texts: [UUID().uuidString])]))
    }
}
