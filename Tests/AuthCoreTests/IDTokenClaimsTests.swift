@testable import AuthCore
import Foundation
import XCTest

/// What Google's and Apple's ID tokens must say before an account is signed in by one.
final class IDTokenClaimsTests: XCTestCase {
    func testTheAudienceMustBeOneOfOurAppsAsAStringOrInAList() throws {
        let ours: Set<String> = ["com.example.tapestry", "web-client"]
        XCTAssertEqual(try IDTokenClaims.audience(["aud": "web-client"], among: ours), "web-client")
        XCTAssertEqual(try IDTokenClaims.audience(["aud": ["other", "com.example.tapestry"]], among: ours), "com.example.tapestry")
        XCTAssertThrowsError(try IDTokenClaims.audience(["aud": "someone-elses-app"], among: ours)) { XCTAssertEqual($0 as? TokenRefused, .audience) }
        XCTAssertThrowsError(try IDTokenClaims.audience([:], among: ours)) { XCTAssertEqual($0 as? TokenRefused, .audience) }
    }

    func testTimesAllowAMinuteOfClockSkewAndNoMore() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let t = now.timeIntervalSince1970
        XCTAssertNoThrow(try IDTokenClaims.times(["exp": t - 59, "iat": t + 59], now: now))
        XCTAssertThrowsError(try IDTokenClaims.times(["exp": t - 61, "iat": t - 3600], now: now)) { XCTAssertEqual($0 as? TokenRefused, .expired) }
        XCTAssertThrowsError(try IDTokenClaims.times(["exp": t + 3600, "iat": t + 61], now: now)) { XCTAssertEqual($0 as? TokenRefused, .notYetValid) }
        XCTAssertThrowsError(try IDTokenClaims.times(["iat": t], now: now)) { XCTAssertEqual($0 as? TokenRefused, .expired) }
    }

    func testAFlagIsTrueAsABooleanOrAsAppleWritesIt() {
        XCTAssertTrue(IDTokenClaims.flag(["email_verified": true], "email_verified"))
        XCTAssertTrue(IDTokenClaims.flag(["email_verified": "true"], "email_verified"))
        XCTAssertFalse(IDTokenClaims.flag(["email_verified": "false"], "email_verified"))
        XCTAssertFalse(IDTokenClaims.flag([:], "email_verified"))
    }

    func testTheSubjectIsPresentAndBounded() throws {
        XCTAssertEqual(try IDTokenClaims.subject(["sub": "001234.apple"]), "001234.apple")
        XCTAssertThrowsError(try IDTokenClaims.subject(["sub": ""]))
        XCTAssertThrowsError(try IDTokenClaims.subject(["sub": String(repeating: "x", count: 256)]))
        XCTAssertThrowsError(try IDTokenClaims.subject(["sub": 42]))
    }
}
