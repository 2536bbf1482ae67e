import Features
import XCTest

/// Invite codes: 12 Crockford base32 symbols shown in fours, read back however they were typed.
final class InviteCodeTests: XCTestCase {
    func testATypedCodeIsReadWhateverItsCaseDashesSpacesAndLookAlikes() {
        XCTAssertEqual(InviteCode.normalise("ABCD-EFGH-JKMN"), "ABCDEFGHJKMN")
        XCTAssertEqual(InviteCode.normalise("abcd efgh jkmn"), "ABCDEFGHJKMN")
        XCTAssertEqual(InviteCode.normalise("oIlO-1234-5678"), "011012345678", "O is 0, I and L are 1")
        XCTAssertEqual(InviteCode.normalise(" a-b-c-d-e-f-g-h-j-k-m-n "), "ABCDEFGHJKMN")
    }

    func testWhatCannotBeACodeIsNone() {
        for typed in ["", "ABCD-EFGH-JKM", "ABCD-EFGH-JKMNP", "ABCD-EFGH-JKMU", "ABCD_EFGH_JKMN", "ÀBCD-EFGH-JKMN", "ABCD-EFGH-JK%N"] {
            XCTAssertNil(InviteCode.normalise(typed), typed)
        }
    }

    func testAFreshCodeIsTwelveSymbolsShownInFoursAndReadBackAsItself() {
        var seen = Set<String>()
        for _ in 0..<200 {
            let code = InviteCode.generate()
            XCTAssertEqual(code.count, 12)
            let shown = InviteCode.display(code)
            XCTAssertNotNil(shown.range(of: "^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}$", options: .regularExpression), shown)
            XCTAssertEqual(InviteCode.normalise(shown), code)
            seen.insert(code)
        }
        XCTAssertEqual(seen.count, 200, "60 random bits: no two alike")
        XCTAssertEqual(InviteCode.display("SHORT"), "SHORT", "only a whole code is grouped")
    }
}
