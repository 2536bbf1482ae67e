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

        // A new address waits until the mail to it is answered (here by the app, with the token); the proven one stays.
        let changed = try api.patch("/v1/users/me", ["email": "\(name)@new.example.com"], token: signup.accessToken)
        XCTAssertEqual(changed["email"] as? String, "\(name)@example.com", "the proven address stays in force")
        XCTAssertEqual(changed["emailVerified"] as? Bool, true)
        XCTAssertEqual(changed["pendingEmail"] as? String, "\(name)@new.example.com")
        let second = try XCTUnwrap(mailed(probe, "user.email_verification_requested", to: signup.userId, after: 1))
        XCTAssertEqual(second.data("email") as? String, "\(name)@new.example.com")
        // Asked again: a new mail, and only its token works.
        XCTAssertEqual(try api.post("/v1/users/me/email-verification", [:], token: signup.accessToken).status, 202)
        let third = try XCTUnwrap(mailed(probe, "user.email_verification_requested", to: signup.userId, after: 2))
        assertClientError(try api.post("/v1/auth/email-verification", ["token": second.data("token") as? String ?? ""]), 400)
        XCTAssertEqual(try api.post("/v1/auth/email-verification", ["token": third.data("token") as? String ?? ""]).status, 204)
        let proven = try api.get("/v1/users/me", token: signup.accessToken)
        XCTAssertEqual(proven["email"] as? String, "\(name)@new.example.com", "proven: the new address is in force")
        XCTAssertEqual(proven["emailVerified"] as? Bool, true)
        XCTAssertTrue(proven["pendingEmail"] is NSNull)
    }

    /// Squatting an address: an address given without proof (a changed one, or a sign-up's) reserves nothing; its owner
    /// signs up with it, proves it, and from then on it is hers alone: the squatters' proofs, sign-ins and resets by
    /// it reach nothing, and `user.updated` never carried it for them.
    func testAnUnprovenAddressReservesNothingAndWhoeverProvesItHoldsIt() throws {
        let probe = try EventProbe(topics: ["user.email_verification_requested", "user.password_reset_requested", "user.updated"])
        let victim = fresh("vic") + "@example.com"
        let changer = try api.signup(fresh("chg"), password: "changers secret")
        let changerOwn = try api.get("/v1/users/me", token: changer.accessToken)["email"] as? String
        let changed = try api.patch("/v1/users/me", ["email": victim], token: changer.accessToken)
        XCTAssertEqual(changed.status, 200)
        XCTAssertEqual(changed["email"] as? String, changerOwn, "the address in force stays until the new one is proven")
        XCTAssertEqual(changed["pendingEmail"] as? String, victim)
        let updated = try XCTUnwrap(mailed(probe, "user.updated", to: changer.userId))
        XCTAssertEqual(updated.data("email") as? String, changerOwn, "user.updated carries the address in force")
        let signer = try api.post("/v1/auth/signup", ["username": fresh("sgn"), "email": victim.uppercased(), "password": "signers secret",
                                                      "fullName": "Not Her"])
        XCTAssertEqual(signer.status, 201)

        let owner = try api.post("/v1/auth/signup", ["username": fresh("own"), "email": victim, "password": "owners secret", "fullName": "Her"])
        XCTAssertEqual(owner.status, 201, "the owner signs up with her address: " + String(decoding: owner.body, as: UTF8.self))
        let proof = try XCTUnwrap(mailed(probe, "user.email_verification_requested", to: owner.userId))
        XCTAssertEqual(try api.post("/v1/auth/email-verification", ["token": proof.data("token") as? String ?? ""]).status, 204)

        // Mailed to her too, and followed by her: the squatters' proofs do not work any more.
        for squatter in [changer, signer] {
            let theirs = try XCTUnwrap(mailed(probe, "user.email_verification_requested", to: squatter.userId,
                                              after: squatter.userId == changer.userId ? 1 : 0))  // the changer's sign-up had one
            XCTAssertEqual((theirs.data("email") as? String)?.lowercased(), victim)
            assertClientError(try api.post("/v1/auth/email-verification", ["token": theirs.data("token") as? String ?? ""]), 400)
            XCTAssertEqual(try api.get("/v1/users/me", token: squatter.accessToken)["emailVerified"] as? Bool, false)
        }
        XCTAssertEqual(try api.get("/v1/users/me", token: changer.accessToken)["email"] as? String, changerOwn)
        assertClientError(try api.post("/v1/auth/login", ["email": victim, "password": "signers secret"]), 401)
        XCTAssertEqual(try api.post("/v1/auth/login", ["email": victim, "password": "owners secret"]).userId, owner.userId)
        XCTAssertEqual(try api.post("/v1/auth/password-reset", ["email": victim]).status, 202)
        XCTAssertNotNil(mailed(probe, "user.password_reset_requested", to: owner.userId), "a reset goes to her account")
        XCTAssertTrue(probe.events(timeout: 0) {
            $0["type"] as? String == "user.password_reset_requested" && [changer.userId, signer.userId].contains($0["subject"] as? String ?? "")
        }.isEmpty, "and to no squatter's")
    }

    /// Whoever follows a reset mail sent for an unconfirmed sign-up holds the account from then on: every session of
    /// it ends, and an address its earlier holder changed to and would prove from their own mailbox goes too.
    func testAResetOfAnUnconfirmedSignUpLeavesItsEarlierHolderNothing() throws {
        let probe = try EventProbe(topics: ["user.email_verification_requested", "user.password_reset_requested"])
        let victim = fresh("vic") + "@example.com"
        let squatter = try api.post("/v1/auth/signup", ["username": fresh("sq"), "email": victim, "password": "squatters secret",
                                                        "fullName": "Not Her"])
        XCTAssertEqual(try api.patch("/v1/users/me", ["email": fresh("sq") + "@evil.example.com"], token: squatter.accessToken).status, 200)
        let theirs = try XCTUnwrap(mailed(probe, "user.email_verification_requested", to: squatter.userId, after: 1), "their own proof")

        XCTAssertEqual(try api.post("/v1/auth/password-reset", ["email": victim]).status, 202)
        let reset = try XCTUnwrap(mailed(probe, "user.password_reset_requested", to: squatter.userId))
        XCTAssertEqual(try api.post("/v1/auth/password-reset/confirm", ["token": reset.data("token") as? String ?? "", "newPassword": "owners secret"]).status,
                       204)
        assertClientError(try api.get("/v1/users/me", token: squatter.accessToken), 401)
        assertClientError(try api.post("/v1/auth/refresh", ["refreshToken": squatter.refreshToken]), 401)
        assertClientError(try api.post("/v1/auth/email-verification", ["token": theirs.data("token") as? String ?? ""]), 400,
                          "their address is no longer waiting to be proven")
        let owner = try api.post("/v1/auth/login", ["email": victim, "password": "owners secret"])
        XCTAssertEqual(owner.status, 200)
        let me = try api.get("/v1/users/me", token: owner.accessToken)
        XCTAssertEqual(me["email"] as? String, victim)
        XCTAssertEqual(me["emailVerified"] as? Bool, true)
        XCTAssertTrue(me["pendingEmail"] is NSNull)
    }

    /// A profile change that keeps the address mails nothing, and the link already mailed keeps working.
    func testAProfileChangeThatKeepsTheAddressMailsNothing() throws {
        let probe = try EventProbe(topics: ["user.email_verification_requested"])
        let name = fresh("kim")
        let signup = try api.signup(name)
        let first = try XCTUnwrap(mailed(probe, "user.email_verification_requested", to: signup.userId))
        for change: [String: Any] in [["fullName": "Kim Renamed"], ["phone": "+40 721 000 222"], ["username": fresh("kim")],
                                      ["email": "\(name.uppercased())@Example.com"]] {
            XCTAssertEqual(try api.patch("/v1/users/me", change, token: signup.accessToken).status, 200)
        }
        probe.drain(1)
        XCTAssertEqual(probe.events(timeout: 0) { $0["type"] as? String == "user.email_verification_requested" && $0["subject"] as? String == signup.userId }
            .count, 1, "no mail but the sign-up's")
        XCTAssertEqual(try api.post("/v1/auth/email-verification", ["token": first.data("token") as? String ?? ""]).status, 204,
                       "and its link still works")
    }

    func testAForgottenPasswordIsResetByTheMailedTokenAndEverySessionEnds() throws {
        let probe = try EventProbe(topics: ["user.password_reset_requested"])
        let name = fresh("rosa")
        let signup = try api.signup(name, password: "correct horse battery")
        let phone = try api.post("/v1/auth/login", ["username": name, "password": "correct horse battery"])
        XCTAssertEqual(phone.status, 200)

        // The same answer for an address nobody has and for hers, typed any way.
        let nobody = fresh("nobody") + "@example.com"
        XCTAssertEqual(try api.post("/v1/auth/password-reset", ["email": nobody]).status, 202)
        let asked = try api.post("/v1/auth/password-reset", ["email": " \(name.uppercased())@EXAMPLE.COM "])
        XCTAssertEqual(asked.status, 202)
        XCTAssertEqual(asked.body, [])
        let event = try XCTUnwrap(mailed(probe, "user.password_reset_requested", to: signup.userId))
        XCTAssertEqual(try SchemaValidator.event("user.password_reset_requested").validate(event.envelope), [])
        // (The run's broker holds other tests' requests too: hers and nobody's are counted.)
        XCTAssertEqual(probe.events { $0["type"] as? String == "user.password_reset_requested" && ($0["subject"] as? String == signup.userId
                                          || ($0["data"] as? [String: Any])?["email"] as? String == nobody) }.count, 1, "nothing for nobody")
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
