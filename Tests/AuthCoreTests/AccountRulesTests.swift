@testable import AuthCore
import Crypto
import Foundation
import XCTest

/// How failed logins slow later ones: an account after ten failures, doubling to at most 15 minutes from the last
/// failure; an address only past its own limit; never a device the account used before.
final class LoginThrottleTests: XCTestCase {
    let throttle = LoginThrottle(addressFailures: 100, trustedProxies: [])

    func testAnAccountIsSlowedAfterTenFailuresTheWaitDoublingUpToFifteenMinutes() {
        XCTAssertNil(throttle.wait(device: false, (9, 0, 0, 0)))
        XCTAssertEqual(throttle.wait(device: false, (10, 0, 0, 0)), 1)
        XCTAssertEqual(throttle.wait(device: false, (11, 0, 0, 0)), 2)
        XCTAssertEqual(throttle.wait(device: false, (14, 0, 0, 0)), 16)
        XCTAssertEqual(throttle.wait(device: false, (19, 0, 0, 0)), 512)
        XCTAssertEqual(throttle.wait(device: false, (20, 0, 0, 0)), 900, "never more than 15 minutes")
        XCTAssertEqual(throttle.wait(device: false, (500, 0, 0, 0)), 900)
    }

    func testTheWaitCountsFromTheLastFailureInWholeSeconds() {
        XCTAssertEqual(throttle.wait(device: false, (14, 0, 10.5, 0)), 6)
        XCTAssertNil(throttle.wait(device: false, (14, 0, 16, 0)), "waited long enough")
    }

    func testAKnownDeviceIsNeverSlowedAndAnAddressOnlyPastItsLimit() {
        XCTAssertNil(throttle.wait(device: true, (500, 500, 0, 60)))
        XCTAssertNil(throttle.wait(device: false, (0, 99, 0, 60)))
        XCTAssertEqual(throttle.wait(device: false, (0, 100, 0, 60)), 60)
        XCTAssertEqual(throttle.wait(device: false, (0, 100, 0, 0)), 1, "at least a second")
    }
}

/// Key rotation: the last key activated signs; a key ahead of its activation is published already, and a replaced
/// one stays published until every token it signed has expired.
final class SigningKeyRotationTests: XCTestCase {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func key(_ kid: String, activatesIn offset: TimeInterval) throws -> SigningKeys.Key {
        SigningKeys.Key(kid: kid, key: try Ed25519PrivateKey(), activatesAt: now.addingTimeInterval(offset))
    }

    func testTheLastActivatedKeySignsAndAKeyAheadIsPublishedBeforeItSigns() throws {
        let arranged = try XCTUnwrap(SigningKeys.arrange([try key("next", activatesIn: 300), try key("old", activatesIn: -86_400)], now: now))
        XCTAssertEqual(arranged.signing.kid, "old")
        XCTAssertEqual(arranged.published.map(\.kid), ["old", "next"])
        XCTAssertEqual(Set(arranged.verification.keys), ["old", "next"])
    }

    func testAReplacedKeyStaysPublishedUntilEveryTokenItSignedHasExpired() throws {
        let keys = [try key("old", activatesIn: -86_400), try key("new", activatesIn: -60)]
        XCTAssertEqual(SigningKeys.arrange(keys, now: now)?.signing.kid, "new")
        // The new key activated 60 s ago: the old one goes `retiredFor` (a token's lifetime and a minute) after that.
        XCTAssertEqual(SigningKeys.retiredFor, 960)
        XCTAssertEqual(SigningKeys.arrange(keys, now: now.addingTimeInterval(899))?.published.map(\.kid), ["old", "new"])
        XCTAssertEqual(SigningKeys.arrange(keys, now: now.addingTimeInterval(900))?.published.map(\.kid), ["new"])
        XCTAssertEqual(SigningKeys.arrange(keys, now: now.addingTimeInterval(900))?.verification.keys.sorted(), ["new"])
    }

    func testBeforeAnyKeyActivatesTheFirstSignsAndWithoutKeysNothingDoes() throws {
        XCTAssertEqual(SigningKeys.arrange([try key("b", activatesIn: 120), try key("a", activatesIn: 60)], now: now)?.signing.kid, "a")
        XCTAssertNil(SigningKeys.arrange([], now: now))
    }
}

/// E-mail addresses: trimmed and kept as given; what cannot be an address is refused.
final class EmailAddressTests: XCTestCase {
    func testAnAddressIsTrimmedAndKeptAsGiven() throws {
        XCTAssertEqual(try Check.email("  Ann.Example+tag@Mail.Example.com "), "Ann.Example+tag@Mail.Example.com")
    }

    func testWhatCannotBeAnAddressIsRefused() {
        for bad in ["", "ann", "ann@", "@example.com", "ann@example", "ann@@example.com", "a b@example.com", "ann@exa mple.com",
                    "<ann>@example.com", "ann@-example.com", "ann@example-.com", "ann@example..com",
                    String(repeating: "a", count: 65) + "@example.com", "ann@" + String(repeating: "a", count: 64) + ".com"] {
            XCTAssertThrowsError(try Check.email(bad), bad) { XCTAssertEqual($0 as? AccountError, .invalidEmail, bad) }
        }
    }
}
