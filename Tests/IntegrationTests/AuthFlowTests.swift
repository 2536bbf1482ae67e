import AuthCore
import Foundation
import Identity
import Runtime
import ServiceKit
import XCTest

/// Auth in-process (`Harness`): its own tokens, from its own answers.
class AuthHarnessCase: HarnessTestCase {
    override var serviceName: String { "auth" }
    override var make: (Environment) throws -> ServiceApp { AuthService.makeApp }

    /// Signs up as a client app does.
    func signup(_ name: String = "u" + String(UUID().uuidString.lowercased().prefix(12)).replacingOccurrences(of: "-", with: ""),
                password: String = "correct horse battery") throws -> APIResponse {
        try service.send("POST", "/v1/auth/signup", json: ["username": name, "email": "\(name)@example.com", "password": password,
                                                           "fullName": "Test \(name)"])
    }

    func post(_ path: String, _ json: Any, headers: [String: String] = [:]) throws -> APIResponse {
        try service.send("POST", path, json: json, headers: headers)
    }
}

/// What the tests read of auth's answers.
enum AuthViews {
    struct Session: Decodable {
        let user: User, accessToken: String, refreshToken: String, tokenType: String, deviceToken: String?
        /// The person whose requests carry this session's access token.
        var person: Harness.Person { Harness.Person(id: user.id, token: accessToken, username: user.username) }
    }
    struct User: Decodable {
        let id: String, username: String, email: String?, fullName: String?, avatarMediaId: String?, emailVerified: Bool?
        let phone: String?, postalAddress: String?, password: String?, passwordHash: String?
    }
    struct Failure: Decodable, Equatable {
        struct Detail: Decodable, Equatable { let code: String, message: String, field: String? }
        let error: Detail
    }
}

/// The account lifecycle as a client app drives it.
final class AuthFlowTests: AuthHarnessCase {
    /// Starting a direct chat or naming a recipient: someone by their exact username, never a list, never their e-mail
    /// address; who asks for names nobody has is held back, and then gets no answer at all for a while.
    func testSomeoneIsFoundByTheirExactUsernameAndGuessingIsLimited() throws {
        let ana = try signup("ana_lookup" + String(UUID().uuidString.prefix(6)).lowercased()).decode(AuthViews.Session.self).person
        let bob = try signup("Bob_Lookup" + String(UUID().uuidString.prefix(6)).lowercased()).decode(AuthViews.Session.self).person
        let bobName = bob.username
        let found = try service.get("/v1/usernames/\(bobName.uppercased())", as: ana, AuthViews.User.self)
        XCTAssertEqual(found.status, 200)
        XCTAssertEqual(found.view.id, bob.id)
        XCTAssertEqual(found.view.username, bobName)
        XCTAssertNil(found.view.email, "no e-mail address for others")
        assertClientError(try service.send("GET", "/v1/usernames/\(bobName)"), 401, "a token is needed")
        for i in 0..<20 {
            assertClientError(try service.send("GET", "/v1/usernames/nobody_\(i)_\(UUID().uuidString.prefix(4))", as: ana), 404, code: "not_found")
        }
        let held = try service.send("GET", "/v1/usernames/\(bobName)", as: ana)
        XCTAssertEqual(held.status, 429, "after 20 names nobody has, even a real one waits")
        XCTAssertNotNil(held.headers["retry-after"])
        XCTAssertEqual(try service.send("GET", "/v1/usernames/\(bobName)", as: bob).status, 200, "others are not held back")
    }

    func testSignupLoginMeRefreshLogoutThenTheOldTokenIsRefused() throws {
        let signedUp = try signup("Alice_01", password: "correct horse battery")
        XCTAssertEqual(signedUp.status, 201)
        let signup = try signedUp.decode(AuthViews.Session.self)
        XCTAssertEqual(signup.user.username, "alice_01", "usernames are case-insensitive and stored lower-case")
        XCTAssertNil(signup.user.password); XCTAssertNil(signup.user.passwordHash)
        XCTAssertEqual(signup.tokenType, "Bearer")
        XCTAssertEqual(signedUp.headers["cache-control"], "no-store", "tokens are kept by no cache")

        let loggedIn = try post("/v1/auth/login", ["email": "ALICE_01@example.com", "password": "correct horse battery"])
        XCTAssertEqual(loggedIn.status, 200)
        XCTAssertEqual(loggedIn.headers["cache-control"], "no-store")
        let login = try loggedIn.decode(AuthViews.Session.self)
        let me = try service.get("/v1/users/me", as: login.person, AuthViews.User.self)
        XCTAssertEqual(me.status, 200)
        XCTAssertEqual(me.view.id, signup.user.id)
        XCTAssertEqual(me.view.email, "Alice_01@example.com", "the email is kept as given")

        let refreshing = try post("/v1/auth/refresh", ["refreshToken": login.refreshToken])
        XCTAssertEqual(refreshing.status, 200)
        let refreshed = try refreshing.decode(AuthViews.Session.self)
        XCTAssertNotEqual(refreshed.refreshToken, login.refreshToken, "refresh tokens rotate")
        XCTAssertEqual(refreshing.headers["cache-control"], "no-store")
        XCTAssertEqual(try service.send("GET", "/v1/users/me", as: refreshed.person).status, 200)

        XCTAssertEqual(try service.send("POST", "/v1/auth/logout", json: [String: String](), as: refreshed.person).status, 204)
        assertClientError(try service.send("GET", "/v1/users/me", as: refreshed.person), 401, code: "unauthenticated")
        assertClientError(try service.send("GET", "/v1/users/me", as: login.person), 401, code: "unauthenticated",
                          "every access token of the session stops working")
        assertClientError(try post("/v1/auth/refresh", ["refreshToken": refreshed.refreshToken]), 401,
                          "a logged-out session cannot be refreshed")
        // The signup session is separate and still works.
        XCTAssertEqual(try service.send("GET", "/v1/users/me", as: signup.person).status, 200)
    }

    func testReusingARotatedRefreshTokenRevokesTheWholeSession() throws {
        let signedUp = try signup().decode(AuthViews.Session.self)
        let refreshing = try post("/v1/auth/refresh", ["refreshToken": signedUp.refreshToken])
        XCTAssertEqual(refreshing.status, 200)
        let first = try refreshing.decode(AuthViews.Session.self)
        assertClientError(try post("/v1/auth/refresh", ["refreshToken": signedUp.refreshToken]), 401, code: "unauthenticated")
        assertClientError(try post("/v1/auth/refresh", ["refreshToken": first.refreshToken]), 401,
                          "the legitimate holder's newer token is dead too")
        assertClientError(try service.send("GET", "/v1/users/me", as: first.person), 401)
    }

    func testLoginFailuresDoNotTellWhichPartWasWrong() throws {
        _ = try signup("bob_login")
        let wrongPassword = try post("/v1/auth/login", ["username": "bob_login", "password": "not the password"])
        let wrongUser = try post("/v1/auth/login", ["username": "nobody_here", "password": "not the password"])
        assertClientError(wrongPassword, 401, code: "unauthenticated")
        assertClientError(wrongUser, 401, code: "unauthenticated")
        XCTAssertEqual(try wrongPassword.decode(AuthViews.Failure.self), try wrongUser.decode(AuthViews.Failure.self))
        assertClientError(try post("/v1/auth/login", ["username": "bob_login", "email": "bob_login@example.com", "password": "x"]), 400,
                          "username and email together are ambiguous")
    }

    func testFailuresSlowAnAccountButNeverLockItsOwnerOutOnAKnownDevice() throws {
        let signedUp = try signup("carol_rl", password: "correct horse battery").decode(AuthViews.Session.self)
        let device = try XCTUnwrap(signedUp.deviceToken, "a sign-up names its device")
        for _ in 0..<10 {  // an attacker, anywhere
            assertClientError(try post("/v1/auth/login", ["username": "carol_rl", "password": "wrong guess 123"]), 401)
        }
        let slowed = try post("/v1/auth/login", ["username": "carol_rl", "password": "correct horse battery"])
        assertClientError(slowed, 429, code: "rate_limited")
        let wait = try XCTUnwrap(Int(slowed.headers["retry-after"] ?? ""), "429 carries Retry-After")
        XCTAssertLessThanOrEqual(wait, 2, "slowed, not locked for 15 minutes")
        let owner = try post("/v1/auth/login", ["username": "carol_rl", "password": "correct horse battery", "deviceToken": device])
        XCTAssertEqual(owner.status, 200, "the owner on a device she used before is not slowed")
        XCTAssertEqual(try owner.decode(AuthViews.Session.self).deviceToken, device)
        XCTAssertEqual(try post("/v1/auth/login", ["username": "carol_rl", "password": "correct horse battery", "deviceToken": "forged"]).status, 429,
                       "an unknown device token is no device")
        // A refused attempt records no failure, so asking again until the wait is over slows nothing down.
        var later: APIResponse?
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: Double(wait) + 5) {
            later = try? post("/v1/auth/login", ["username": "carol_rl", "password": "correct horse battery"])
            return later?.status == 200
        }, "after the wait, anyone with the password gets in")
        XCTAssertNotNil(try later?.decode(AuthViews.Session.self).deviceToken, "and that device is remembered")
    }

    /// Guessing which names exist from the throttle: failures slow a name the same way whether anyone has it or not,
    /// and an account's username and email are counted each as typed, so that failing with one and trying the other
    /// tells nobody that they belong together.
    func testTheThrottleAnswersTheSameForNamesNobodyHas() throws {
        _ = try signup("hana_rl", password: "correct horse battery")
        func attempts(_ username: String, _ email: String) throws -> [Int] {
            var statuses: [Int] = []
            for i in 0..<12 {  // half by username, half by email, then each again
                let identifier = i % 2 == 0 ? ["username": username] : ["email": email]
                statuses.append(try post("/v1/auth/login", identifier.merging(["password": "wrong guess 123"]) { a, _ in a }).status)
            }
            for _ in 0..<5 { statuses.append(try post("/v1/auth/login", ["username": username, "password": "wrong guess 123"]).status) }
            return statuses
        }
        let known = try attempts("hana_rl", "hana_rl@example.com")
        let unknown = try attempts("hana_nobody", "hana_nobody@example.com")
        XCTAssertEqual(known, unknown, "an account that exists answers as one nobody has")
        XCTAssertEqual(known.last, 429, "and both are slowed after ten failures of one name")
        XCTAssertEqual(Array(known.prefix(12)), Array(repeating: 401, count: 12), "six failures of each name slow neither")
    }

    func testFailuresForRandomNamesFromOneAddressDoNotLockOthersOut() throws {
        _ = try signup("erin_shared", password: "correct horse battery")
        for i in 0..<12 {
            assertClientError(try post("/v1/auth/login", ["username": "ghost\(i)", "password": "wrong guess 123"]), 401)
        }
        XCTAssertEqual(try post("/v1/auth/login", ["username": "erin_shared", "password": "correct horse battery"]).status, 200,
                       "behind one NAT, one guesser does not lock everyone out")
    }

    func testDuplicatesConflictCaseInsensitively() throws {
        XCTAssertEqual(try signup("dave_dup").status, 201)
        let sameName = try post("/v1/auth/signup", ["username": "DAVE_DUP", "email": "other@example.com",
                                                    "password": "correct horse battery", "fullName": "D"])
        assertClientError(sameName, 409, code: "conflict")
        XCTAssertEqual(sameName.errorField, "username")
        // An address nobody proved reserves nothing; once proven (the mail's link, written here as it would), it is taken.
        let unproven = try post("/v1/auth/signup", ["username": "dave_other", "email": "Dave_Dup@Example.com",
                                                    "password": "correct horse battery", "fullName": "D"])
        XCTAssertEqual(unproven.status, 201, "an unconfirmed sign-up's address is no one's yet")
        try service.database.connect().execute("UPDATE auth.users SET email_verified = true WHERE id = $1::uuid",
                                               [try unproven.decode(AuthViews.Session.self).user.id])
        let sameEmail = try post("/v1/auth/signup", ["username": "dave_third", "email": "dave_dup@example.COM",
                                                     "password": "correct horse battery", "fullName": "D"])
        assertClientError(sameEmail, 409, code: "conflict")
        XCTAssertEqual(sameEmail.errorField, "email")
        XCTAssertEqual(try service.count("users"), 2)
    }

    func testProfileUpdateAndItsConflicts() throws {
        let a = try signup("erin_a").decode(AuthViews.Session.self).person
        _ = try signup("erin_b")
        // An avatar is checked with stories (AvatarTests), which this auth alone cannot ask: refused, nothing changed.
        let unchecked = try service.send("PATCH", "/v1/users/me", json: ["fullName": "Erin", "avatarMediaId": UUID().uuidString.lowercased()], as: a)
        assertClientError(unchecked, 400, code: "validation_failed")
        XCTAssertEqual(unchecked.errorField, "avatarMediaId")
        let updated = try service.patch("/v1/users/me", ["fullName": "  Erin Example "], as: a, AuthViews.User.self)
        XCTAssertEqual(updated.status, 200)
        XCTAssertEqual(updated.view.fullName, "Erin Example")
        XCTAssertNil(updated.view.avatarMediaId)
        let cleared = try service.patch("/v1/users/me", ["avatarMediaId": NSNull()], as: a, AuthViews.User.self)
        XCTAssertNil(cleared.view.avatarMediaId, "null clears the avatar")
        assertClientError(try service.send("PATCH", "/v1/users/me", json: ["username": "erin_b"], as: a), 409, code: "conflict")
        assertClientError(try service.send("PATCH", "/v1/users/me", json: ["fullName": NSNull()], as: a), 400, code: "validation_failed")
        XCTAssertEqual(try service.get("/v1/users/me", as: a, AuthViews.User.self).view.username, "erin_a")
    }

    func testPhoneAndPostalAddressAreTheirOwnersAndANewEmailIsNotProven() throws {
        let a = try signup("fay_a").decode(AuthViews.Session.self).person, b = try signup("fay_b").decode(AuthViews.Session.self).person
        XCTAssertEqual(try service.get("/v1/users/me", as: a, AuthViews.User.self).view.emailVerified, false, "nobody proved it yet")
        let updated = try service.patch("/v1/users/me", ["phone": "+40 721 000 111", "postalAddress": "Strada Lungă 3\nBrașov"], as: a,
                                        AuthViews.User.self).view
        XCTAssertEqual(updated.phone, "+40 721 000 111")
        XCTAssertEqual(updated.postalAddress, "Strada Lungă 3\nBrașov")
        let seen = try service.get("/v1/usernames/fay_a", as: b, AuthViews.User.self).view
        XCTAssertNil(seen.phone, "others never see the phone")
        XCTAssertNil(seen.postalAddress, "nor the address")
        for bad in [["phone": "call me"], ["phone": "12\n"], ["postalAddress": String(repeating: "a", count: 301)]] {
            assertClientError(try service.send("PATCH", "/v1/users/me", json: bad, as: a), 400, code: "validation_failed")
        }
        let cleared = try service.patch("/v1/users/me", ["phone": NSNull(), "postalAddress": NSNull()], as: a, AuthViews.User.self).view
        XCTAssertNil(cleared.phone)
        XCTAssertNil(cleared.postalAddress)
    }

    func testPasswordChangeEndsOtherSessionsButKeepsThisOne() throws {
        let signedUp = try signup("frank_pw", password: "correct horse battery").decode(AuthViews.Session.self)
        let other = try post("/v1/auth/login", ["username": "frank_pw", "password": "correct horse battery"]).decode(AuthViews.Session.self)
        assertClientError(try service.send("POST", "/v1/users/me/password", json: ["currentPassword": "wrong password!", "newPassword": "new secret phrase"],
                                           as: signedUp.person), 403, code: "forbidden")
        assertClientError(try service.send("POST", "/v1/users/me/password", json: ["currentPassword": "correct horse battery", "newPassword": "short"],
                                           as: signedUp.person), 400, code: "validation_failed")
        let changed = try service.send("POST", "/v1/users/me/password", json: ["currentPassword": "correct horse battery",
                                                                               "newPassword": "new secret phrase"], as: signedUp.person)
        XCTAssertEqual(changed.status, 204)
        XCTAssertEqual(try service.send("GET", "/v1/users/me", as: signedUp.person).status, 200)
        assertClientError(try service.send("GET", "/v1/users/me", as: other.person), 401)
        assertClientError(try post("/v1/auth/refresh", ["refreshToken": other.refreshToken]), 401)
        assertClientError(try post("/v1/auth/login", ["username": "frank_pw", "password": "correct horse battery"]), 401)
        XCTAssertEqual(try post("/v1/auth/login", ["username": "frank_pw", "password": "new secret phrase"]).status, 200)
    }

    func testSignupWithAnIdempotencyKeyCreatesOnce() throws {
        let body: [String: Any] = ["username": "gina_idem", "email": "gina@example.com", "password": "correct horse battery", "fullName": "Gina"]
        let firstAnswer = try post("/v1/auth/signup", body, headers: ["Idempotency-Key": "k-123"])
        let retryAnswer = try post("/v1/auth/signup", body, headers: ["Idempotency-Key": "k-123"])
        XCTAssertEqual(firstAnswer.status, 201)
        XCTAssertEqual(retryAnswer.status, 201)
        let first = try firstAnswer.decode(AuthViews.Session.self), retry = try retryAnswer.decode(AuthViews.Session.self)
        XCTAssertEqual(retry.user.id, first.user.id)
        XCTAssertEqual(retryAnswer.headers["idempotent-replayed"], "true")
        XCTAssertEqual(try service.count("users"), 1)
        XCTAssertEqual(try service.count("sessions"), 2, "the retry gets a session of its own")
        XCTAssertNotEqual(retry.accessToken, first.accessToken)
        XCTAssertEqual(try service.send("GET", "/v1/users/me", as: retry.person).status, 200)
        let kept = try service.database.connect().first("SELECT convert_from(body, 'UTF8') AS body FROM auth.idempotency_keys")?["body", as: String.self]
        XCTAssertEqual(kept, first.user.id, "only a reference is kept, not the tokens")
        var other = body; other["username"] = "gina_other"
        assertClientError(try post("/v1/auth/signup", other, headers: ["Idempotency-Key": "k-123"]), 409,
                          "a reused key with another body is refused")

        // A retry is the same request however its JSON is written: names in another order, spaces, escapes.
        let written = #"{ "password" : "correct horse battery", "fullName": "G\u0069na", "username":"gina_idem","email":"gina@example.com" }"#
        let rewritten = try service.send("POST", "/v1/auth/signup", raw: Array(written.utf8),
                                         headers: ["Idempotency-Key": "k-123", "Content-Type": "application/json"])
        XCTAssertEqual(rewritten.status, 201, String(decoding: rewritten.body, as: UTF8.self))
        XCTAssertEqual(try rewritten.decode(AuthViews.Session.self).user.id, first.user.id)
        XCTAssertEqual(rewritten.headers["idempotent-replayed"], "true")
        // A key kept before bodies were compared by value (the hash of the bytes) still answers the same bytes again.
        let db = try service.database.connect()
        try db.execute("""
            UPDATE auth.idempotency_keys SET request_hash = encode(sha256(convert_to(E'POST /v1/auth/signup\\n' || $1, 'UTF8')), 'hex')
            """, [written])
        XCTAssertEqual(try service.send("POST", "/v1/auth/signup", raw: Array(written.utf8),
                                        headers: ["Idempotency-Key": "k-123", "Content-Type": "application/json"])
            .decode(AuthViews.Session.self).user.id, first.user.id)
        XCTAssertEqual(try service.count("users"), 1)
    }

    func testJWKSPublishesTheKeyThatSignsTokens() throws {
        let jwks = try service.get("/v1/auth/jwks", as: nil, JWKSet.self)
        XCTAssertEqual(jwks.status, 200)
        let keys = jwks.view.keys
        XCTAssertEqual(keys.count, 1)
        XCTAssertEqual(keys.first?.kty, "OKP")
        XCTAssertEqual(keys.first?.crv, "Ed25519")
        let token = try signup().decode(AuthViews.Session.self).accessToken
        struct Header: Decodable { let alg: String, kid: String? }
        let header = try JSONDecoder().decode(Header.self, from: try XCTUnwrap(Data(base64URL: String(token.split(separator: ".")[0]))))
        XCTAssertEqual(header.alg, "EdDSA")
        XCTAssertEqual(header.kid, keys.first?.kid)
    }
}

/// What takes auth processes: instances side by side, a restart, a burst on few handler threads, a trusted proxy.
final class AuthInstanceTests: AuthTestCase {
    /// `GET /v1/users/me` answers from each instance's memory; a change is shown by the instance that made it at once,
    /// and by every other instance as soon as PostgreSQL's notification reaches it (whoever wrote: an instance, or SQL).
    func testEveryInstanceShowsAChangeOrALogoutAtItsNextReads() throws {
        let other = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url])
        defer { other.stop() }
        let there = APIClient(port: other.port)
        let username = "instances" + String(UUID().uuidString.prefix(6)).lowercased()
        let signup = try api.signup(username)
        let token = signup.accessToken
        func name(_ client: APIClient) throws -> String? { try client.get("/v1/users/me", token: token)["fullName"] as? String }
        func shows(_ client: APIClient, _ expected: String?) throws -> Bool {
            try TestEnvironment.waitUntil(timeout: 5) { try name(client) == expected }
        }
        let first = try XCTUnwrap(try name(api))
        XCTAssertEqual(try name(there), first)

        XCTAssertEqual(try api.patch("/v1/users/me", ["fullName": "Renamed Here"], token: token).status, 200)
        XCTAssertEqual(try name(api), "Renamed Here", "the instance that made the change shows it at once")
        XCTAssertTrue(try shows(there, "Renamed Here"), "and the other one at its next reads")

        try database.connect().execute("UPDATE auth.users SET full_name = 'Renamed By SQL' WHERE id = $1::uuid", [signup.userId])
        XCTAssertTrue(try shows(api, "Renamed By SQL"), "a change made outside the service is shown too")
        XCTAssertTrue(try shows(there, "Renamed By SQL"))

        let login = try api.post("/v1/auth/login", ["username": username, "password": "correct horse battery"])
        XCTAssertEqual(login.status, 200)
        XCTAssertEqual(try there.get("/v1/users/me", token: login.accessToken).status, 200)
        XCTAssertEqual(try api.post("/v1/auth/logout", token: token).status, 204)
        assertClientError(try api.get("/v1/users/me", token: token), 401, "logged out: refused at once where it happened")
        XCTAssertTrue(try TestEnvironment.waitUntil(timeout: 5) { try there.get("/v1/users/me", token: token).status == 401 },
                      "and on the other instance at its next reads")

        try database.connect().execute("UPDATE auth.sessions SET revoked_at = now() WHERE user_id = $1::uuid", [signup.userId])
        XCTAssertTrue(try TestEnvironment.waitUntil(timeout: 5) { try there.get("/v1/users/me", token: login.accessToken).status == 401 },
                      "a session ended by SQL")
    }

    func testTheAddressLimitUsesXForwardedForOnlyThroughTrustedProxies() throws {
        for trusted in [true, false] {
            let database = try TestDatabase()
            defer { database.drop() }
            var environment = ["DATABASE_URL": database.url, "LOGIN_ADDRESS_MAX_FAILURES": "3"]
            if trusted { environment["TRUSTED_PROXIES"] = "127.0.0.1" }
            let service = try ServiceProcess.startReady("auth", environment: environment)
            defer { service.stop() }
            let client = APIClient(port: service.port)
            _ = try client.signup("frank_proxy", password: "correct horse battery")
            for i in 0..<3 {
                let r = try client.post("/v1/auth/login", ["username": "ghost\(i)", "password": "wrong guess 123"],
                                        headers: ["X-Forwarded-For": trusted ? "203.0.113.7" : "198.51.100.\(i)"])
                assertClientError(r, 401)
            }
            let guesser = try client.post("/v1/auth/login", ["username": "ghost9", "password": "wrong guess 123"],
                                          headers: ["X-Forwarded-For": trusted ? "203.0.113.7" : "198.51.100.9"])
            assertClientError(guesser, 429, trusted ? "the guesser's own address is limited" : "a forged X-Forwarded-For changes nothing")
            let other = try client.post("/v1/auth/login", ["username": "frank_proxy", "password": "correct horse battery"],
                                        headers: ["X-Forwarded-For": "203.0.113.8"])
            XCTAssertEqual(other.status, trusted ? 200 : 429, trusted ? "another client behind the proxy gets in" : "untrusted: one address")
        }
    }

    func testTheSigningKeySurvivesARestart() throws {
        let token = try api.signup().accessToken
        let before = try api.get("/v1/auth/jwks")["keys"] as? NSArray
        XCTAssertEqual(auth.stop(), 0, "SIGTERM stops cleanly with status 0")
        auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url])
        api = APIClient(port: auth.port)
        XCTAssertEqual(try api.get("/v1/auth/jwks")["keys"] as? NSArray, before)
        XCTAssertEqual(try api.get("/v1/users/me", token: token).status, 200, "tokens issued before the restart still verify")
    }

    func testABurstOfSignupsIsQueuedOrAskedToRetryWhileOtherRoutesStayServed() throws {
        // 2 handler threads: one request at most runs or waits for a password hash, the other serves everything else
        // (with 8, four sign-ups had to overlap to see a refusal, and in one loaded run none did).
        auth.stop()
        auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url, "HTTP_HANDLER_THREADS": "2"])
        api = APIClient(port: auth.port)
        let outcomes = LockedBox<[(name: String, status: Int, retryAfter: String?)]>()
        outcomes.set([])
        let start = Gate()
        let signups = (0..<24).map { i in
            Thread { [port = auth.port] in
                _ = start.wait(until: Date().addingTimeInterval(10))
                let name = "burst_\(i)"
                let r = try? APIClient(port: port).signup(name)
                outcomes.update { $0 = ($0 ?? []) + [(name, r?.status ?? 0, r?.headers["retry-after"])] }
            }
        }
        signups.forEach { $0.start() }
        start.open()
        // Once one sign-up was asked to retry, the hashing queue is full: the other routes must still be served.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30, every: 0.005) { outcomes.get()?.contains { $0.status == 503 } == true },
                      "more sign-ups than the hashing queue holds")
        let began = Date()
        XCTAssertEqual(try APIClient(port: auth.port).get("/healthz").status, 200)
        XCTAssertLessThan(Date().timeIntervalSince(began), 1, "/healthz is answered during the burst")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 60) { outcomes.get()?.count == 24 })
        let all = outcomes.get() ?? []
        XCTAssertEqual(Set(all.map(\.status)).subtracting([201, 503]), [], "each sign-up is created or asked to retry")
        let refused = all.filter { $0.status == 503 }
        XCTAssertTrue(refused.allSatisfy { $0.retryAfter == "1" }, "a refusal says when to retry")
        XCTAssertEqual(try count("users"), all.count - refused.count, "a refused sign-up wrote nothing")
        for r in refused { XCTAssertEqual(try api.signup(r.name).status, 201, "\(r.name) succeeds on retry") }
    }
}

extension Data {
    init?(base64URL text: String) {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        self.init(base64Encoded: s)
    }
}
