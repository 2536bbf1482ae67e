import Foundation
import XCTest

/// Proving an address and resetting a forgotten password. auth announces each mail's token in an event for the
/// notification service to deliver; the test reads the event as that service would, and follows the link.
final class EmailProofTests: AuthTestCase {
    func fresh(_ prefix: String) -> String { prefix + String(UUID().uuidString.prefix(8)).lowercased() }

    /// The mail of `type` to `user` after the first `seen` ones, once its event arrives.
    func mailed(_ probe: EventProbe, _ type: String, to user: String, after seen: Int = 0) -> [String: Any]? {
        let deadline = Date().addingTimeInterval(20)
        repeat {
            let found = probe.events(timeout: 0) { $0["type"] as? String == type && $0["subject"] as? String == user }
            if found.count > seen { return found[seen] }
            probe.drain(0.2)
        } while Date() < deadline
        return nil
    }

    func testSigningUpMailsAProofWhoseLinkConfirmsTheAddress() throws {
        let probe = try EventProbe(topics: ["user.email_verification_requested"])
        let name = fresh("vera")
        let signup = try api.signup(name)
        XCTAssertEqual((signup["user"] as? [String: Any])?["emailVerified"] as? Bool, false)
        let event = try XCTUnwrap(mailed(probe, "user.email_verification_requested", to: signup.userId))
        XCTAssertEqual(event.data("email") as? String, "\(name)@example.com")
        XCTAssertEqual(try SchemaValidator.event("user.email_verification_requested").validate(event.envelope), [])
        let token = event.data("token") as? String ?? ""

        // The mail's link, opened in a browser: a page, and the address is proven.
        let page = try api.get("/v1/auth/email-verification?token=\(token)")
        XCTAssertEqual(page.status, 200)
        XCTAssertEqual(page.headers["content-type"], "text/html; charset=utf-8")
        XCTAssertTrue(String(decoding: page.body, as: UTF8.self).contains("Address confirmed"))
        XCTAssertEqual(try api.get("/v1/users/me", token: signup.accessToken)["emailVerified"] as? Bool, true)
        // Once only.
        let used = try api.get("/v1/auth/email-verification?token=\(token)")
        XCTAssertTrue(String(decoding: used.body, as: UTF8.self).contains("This link no longer works"))
        assertClientError(try api.post("/v1/auth/email-verification", ["token": token]), 400, code: "validation_failed")
        assertClientError(try api.post("/v1/users/me/email-verification", [:], token: signup.accessToken), 409, code: "conflict")

        // A new address is unproven until the mail to it is answered (here by the app, with the token).
        let changed = try api.patch("/v1/users/me", ["email": "\(name)@new.example.com"], token: signup.accessToken)
        XCTAssertEqual(changed["emailVerified"] as? Bool, false)
        let second = try XCTUnwrap(mailed(probe, "user.email_verification_requested", to: signup.userId, after: 1))
        XCTAssertEqual(second.data("email") as? String, "\(name)@new.example.com")
        // Asked again: a new mail, and only its token works.
        XCTAssertEqual(try api.post("/v1/users/me/email-verification", [:], token: signup.accessToken).status, 202)
        let third = try XCTUnwrap(mailed(probe, "user.email_verification_requested", to: signup.userId, after: 2))
        assertClientError(try api.post("/v1/auth/email-verification", ["token": second.data("token") as? String ?? ""]), 400)
        XCTAssertEqual(try api.post("/v1/auth/email-verification", ["token": third.data("token") as? String ?? ""]).status, 204)
        XCTAssertEqual(try api.get("/v1/users/me", token: signup.accessToken)["emailVerified"] as? Bool, true)
    }

    func testAForgottenPasswordIsResetByTheMailedTokenAndEverySessionEnds() throws {
        let probe = try EventProbe(topics: ["user.password_reset_requested"])
        let name = fresh("rosa")
        let signup = try api.signup(name, password: "correct horse battery")
        let phone = try api.post("/v1/auth/login", ["username": name, "password": "correct horse battery"])
        XCTAssertEqual(phone.status, 200)

        // The same answer for an address nobody has and for hers, typed any way.
        XCTAssertEqual(try api.post("/v1/auth/password-reset", ["email": fresh("nobody") + "@example.com"]).status, 202)
        let asked = try api.post("/v1/auth/password-reset", ["email": " \(name.uppercased())@EXAMPLE.COM "])
        XCTAssertEqual(asked.status, 202)
        XCTAssertEqual(asked.body, [])
        let event = try XCTUnwrap(mailed(probe, "user.password_reset_requested", to: signup.userId))
        XCTAssertEqual(try SchemaValidator.event("user.password_reset_requested").validate(event.envelope), [])
        XCTAssertEqual(probe.events { $0["type"] as? String == "user.password_reset_requested" }.count, 1, "nothing for nobody")
        let token = event.data("token") as? String ?? ""

        assertClientError(try api.post("/v1/auth/password-reset/confirm", ["token": "forged", "newPassword": "a brand new secret"]), 400,
                          code: "validation_failed")
        assertClientError(try api.post("/v1/auth/password-reset/confirm", ["token": token, "newPassword": "short"]), 400,
                          code: "validation_failed")
        XCTAssertEqual(try api.post("/v1/auth/password-reset/confirm", ["token": token, "newPassword": "a brand new secret"]).status, 204)

        // Every session ended; the old password is gone, the new one works; the link works once.
        for session in [signup, phone] {
            XCTAssertEqual(try api.get("/v1/users/me", token: session.accessToken).status, 401)
            XCTAssertEqual(try api.post("/v1/auth/refresh", ["refreshToken": session.refreshToken]).status, 401)
        }
        XCTAssertEqual(try api.post("/v1/auth/login", ["username": name, "password": "correct horse battery"]).status, 401)
        let again = try api.post("/v1/auth/login", ["username": name, "password": "a brand new secret"])
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual((again["user"] as? [String: Any])?["emailVerified"] as? Bool, true, "the mail reached her: the address is hers")
        assertClientError(try api.post("/v1/auth/password-reset/confirm", ["token": token, "newPassword": "yet another secret"]), 400)
    }

    func testMailsToAnAddressAndRequestsFromAClientAreLimited() throws {
        let probe = try EventProbe(topics: ["user.password_reset_requested", "user.email_verification_requested"])
        let name = fresh("mia")
        let signup = try api.signup(name)  // one mail: the proof
        for _ in 0..<6 { XCTAssertEqual(try api.post("/v1/auth/password-reset", ["email": "\(name)@example.com"]).status, 202) }
        _ = mailed(probe, "user.email_verification_requested", to: signup.userId)
        probe.drain(2)
        let resets = probe.events(timeout: 0) { $0["subject"] as? String == signup.userId && $0["type"] as? String == "user.password_reset_requested" }
        XCTAssertEqual(resets.count, 4, "five mails an hour to one address, whoever asks; the answer never changes")
        // One client asking for many addresses is held back.
        var statuses: [Int] = []
        for _ in 0..<30 { statuses.append(try api.post("/v1/auth/password-reset", ["email": fresh("x") + "@example.com"]).status) }
        XCTAssertEqual(statuses.filter { $0 == 202 }.count, 24, "30 an hour from a client, six were asked above")
        let held = try api.post("/v1/auth/password-reset", ["email": "\(name)@example.com"])
        XCTAssertEqual(held.status, 429)
        XCTAssertNotNil(held.headers["retry-after"])
    }
}
