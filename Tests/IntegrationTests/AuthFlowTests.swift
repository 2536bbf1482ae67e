import Foundation
import Runtime
import XCTest

/// The account lifecycle as a client app drives it.
final class AuthFlowTests: AuthTestCase {
    /// Starting a direct chat or naming a recipient: someone by their exact username, never a list, never their e-mail
    /// address; who asks for names nobody has is held back, and then gets no answer at all for a while.
    func testSomeoneIsFoundByTheirExactUsernameAndGuessingIsLimited() throws {
        let ana = try api.signup("ana_lookup" + String(UUID().uuidString.prefix(6)).lowercased())
        let bob = try api.signup("Bob_Lookup" + String(UUID().uuidString.prefix(6)).lowercased())
        let bobName = (bob["user"] as? [String: Any])?["username"] as? String ?? ""
        let found = try api.get("/v1/usernames/\(bobName.uppercased())", token: ana.accessToken)
        XCTAssertEqual(found.status, 200)
        XCTAssertEqual(found["id"] as? String, bob.userId)
        XCTAssertEqual(found["username"] as? String, bobName)
        XCTAssertNil(found["email"], "no e-mail address for others")
        assertClientError(try api.get("/v1/usernames/\(bobName)"), 401, "a token is needed")
        for i in 0..<20 {
            assertClientError(try api.get("/v1/usernames/nobody_\(i)_\(UUID().uuidString.prefix(4))", token: ana.accessToken), 404,
                              code: "not_found")
        }
        let held = try api.get("/v1/usernames/\(bobName)", token: ana.accessToken)
        XCTAssertEqual(held.status, 429, "after 20 names nobody has, even a real one waits")
        XCTAssertNotNil(held.headers["retry-after"])
        XCTAssertEqual(try api.get("/v1/usernames/\(bobName)", token: bob.accessToken).status, 200, "others are not held back")
    }

    func testSignupLoginMeRefreshLogoutThenTheOldTokenIsRefused() throws {
        let signup = try api.signup("Alice_01", password: "correct horse battery")
        XCTAssertEqual(signup.status, 201)
        let user = signup["user"] as? [String: Any]
        XCTAssertEqual(user?["username"] as? String, "alice_01", "usernames are case-insensitive and stored lower-case")
        XCTAssertNil(user?["password"]); XCTAssertNil(user?["passwordHash"])
        XCTAssertEqual(signup["tokenType"] as? String, "Bearer")
        XCTAssertEqual(signup.headers["cache-control"], "no-store", "tokens are kept by no cache")

        let login = try api.post("/v1/auth/login", ["email": "ALICE_01@example.com", "password": "correct horse battery"])
        XCTAssertEqual(login.status, 200)
        XCTAssertEqual(login.headers["cache-control"], "no-store")
        let me = try api.get("/v1/users/me", token: login.accessToken)
        XCTAssertEqual(me.status, 200)
        XCTAssertEqual(me["id"] as? String, signup.userId)
        XCTAssertEqual(me["email"] as? String, "Alice_01@example.com", "the email is kept as given")

        let refreshed = try api.post("/v1/auth/refresh", ["refreshToken": login.refreshToken])
        XCTAssertEqual(refreshed.status, 200)
        XCTAssertNotEqual(refreshed.refreshToken, login.refreshToken, "refresh tokens rotate")
        XCTAssertEqual(refreshed.headers["cache-control"], "no-store")
        XCTAssertEqual(try api.get("/v1/users/me", token: refreshed.accessToken).status, 200)

        XCTAssertEqual(try api.post("/v1/auth/logout", token: refreshed.accessToken).status, 204)
        assertClientError(try api.get("/v1/users/me", token: refreshed.accessToken), 401, code: "unauthenticated")
        assertClientError(try api.get("/v1/users/me", token: login.accessToken), 401, code: "unauthenticated",
                          "every access token of the session stops working")
        assertClientError(try api.post("/v1/auth/refresh", ["refreshToken": refreshed.refreshToken]), 401,
                          "a logged-out session cannot be refreshed")
        // The signup session is separate and still works.
        XCTAssertEqual(try api.get("/v1/users/me", token: signup.accessToken).status, 200)
    }

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

    func testReusingARotatedRefreshTokenRevokesTheWholeSession() throws {
        let signup = try api.signup()
        let first = try api.post("/v1/auth/refresh", ["refreshToken": signup.refreshToken])
        XCTAssertEqual(first.status, 200)
        assertClientError(try api.post("/v1/auth/refresh", ["refreshToken": signup.refreshToken]), 401, code: "unauthenticated")
        assertClientError(try api.post("/v1/auth/refresh", ["refreshToken": first.refreshToken]), 401,
                          "the legitimate holder's newer token is dead too")
        assertClientError(try api.get("/v1/users/me", token: first.accessToken), 401)
    }

    func testLoginFailuresDoNotTellWhichPartWasWrong() throws {
        _ = try api.signup("bob_login")
        let wrongPassword = try api.post("/v1/auth/login", ["username": "bob_login", "password": "not the password"])
        let wrongUser = try api.post("/v1/auth/login", ["username": "nobody_here", "password": "not the password"])
        assertClientError(wrongPassword, 401, code: "unauthenticated")
        assertClientError(wrongUser, 401, code: "unauthenticated")
        XCTAssertEqual(wrongPassword.json["error"] as? NSDictionary, wrongUser.json["error"] as? NSDictionary)
        assertClientError(try api.post("/v1/auth/login", ["username": "bob_login", "email": "bob_login@example.com", "password": "x"]), 400,
                          "username and email together are ambiguous")
    }

    func testFailuresSlowAnAccountButNeverLockItsOwnerOutOnAKnownDevice() throws {
        let signup = try api.signup("carol_rl", password: "correct horse battery")
        let device = try XCTUnwrap(signup["deviceToken"] as? String, "a sign-up names its device")
        for _ in 0..<10 {  // an attacker, anywhere
            assertClientError(try api.post("/v1/auth/login", ["username": "carol_rl", "password": "wrong guess 123"]), 401)
        }
        let slowed = try api.post("/v1/auth/login", ["username": "carol_rl", "password": "correct horse battery"])
        assertClientError(slowed, 429, code: "rate_limited")
        let wait = try XCTUnwrap(Int(slowed.headers["retry-after"] ?? ""), "429 carries Retry-After")
        XCTAssertLessThanOrEqual(wait, 2, "slowed, not locked for 15 minutes")
        let owner = try api.post("/v1/auth/login", ["username": "carol_rl", "password": "correct horse battery", "deviceToken": device])
        XCTAssertEqual(owner.status, 200, "the owner on a device she used before is not slowed")
        XCTAssertEqual(owner["deviceToken"] as? String, device)
        XCTAssertEqual(try api.post("/v1/auth/login", ["username": "carol_rl", "password": "correct horse battery", "deviceToken": "forged"]).status, 429,
                       "an unknown device token is no device")
        // A refused attempt records no failure, so asking again until the wait is over slows nothing down.
        var later: APIResponse?
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: Double(wait) + 5) {
            later = try? api.post("/v1/auth/login", ["username": "carol_rl", "password": "correct horse battery"])
            return later?.status == 200
        }, "after the wait, anyone with the password gets in")
        XCTAssertNotNil(later?["deviceToken"] as? String, "and that device is remembered")
    }

    /// Guessing which names exist from the throttle: failures slow a name the same way whether anyone has it or not,
    /// and an account's username and email are counted each as typed, so that failing with one and trying the other
    /// tells nobody that they belong together.
    func testTheThrottleAnswersTheSameForNamesNobodyHas() throws {
        _ = try api.signup("hana_rl", password: "correct horse battery")
        func attempts(_ username: String, _ email: String) throws -> [Int] {
            var statuses: [Int] = []
            for i in 0..<12 {  // half by username, half by email, then each again
                let identifier = i % 2 == 0 ? ["username": username] : ["email": email]
                statuses.append(try api.post("/v1/auth/login", identifier.merging(["password": "wrong guess 123"]) { a, _ in a }).status)
            }
            for _ in 0..<5 { statuses.append(try api.post("/v1/auth/login", ["username": username, "password": "wrong guess 123"]).status) }
            return statuses
        }
        let known = try attempts("hana_rl", "hana_rl@example.com")
        let unknown = try attempts("hana_nobody", "hana_nobody@example.com")
        XCTAssertEqual(known, unknown, "an account that exists answers as one nobody has")
        XCTAssertEqual(known.last, 429, "and both are slowed after ten failures of one name")
        XCTAssertEqual(Array(known.prefix(12)), Array(repeating: 401, count: 12), "six failures of each name slow neither")
    }

    func testFailuresForRandomNamesFromOneAddressDoNotLockOthersOut() throws {
        _ = try api.signup("erin_shared", password: "correct horse battery")
        for i in 0..<12 {
            assertClientError(try api.post("/v1/auth/login", ["username": "ghost\(i)", "password": "wrong guess 123"]), 401)
        }
        XCTAssertEqual(try api.post("/v1/auth/login", ["username": "erin_shared", "password": "correct horse battery"]).status, 200,
                       "behind one NAT, one guesser does not lock everyone out")
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

    func testDuplicatesConflictCaseInsensitively() throws {
        XCTAssertEqual(try api.signup("dave_dup").status, 201)
        let sameName = try api.post("/v1/auth/signup", ["username": "DAVE_DUP", "email": "other@example.com",
                                                        "password": "correct horse battery", "fullName": "D"])
        assertClientError(sameName, 409, code: "conflict")
        XCTAssertEqual(sameName.errorField, "username")
        // An address nobody proved reserves nothing; once proven (the mail's link, written here as it would), it is taken.
        let unproven = try api.post("/v1/auth/signup", ["username": "dave_other", "email": "Dave_Dup@Example.com",
                                                        "password": "correct horse battery", "fullName": "D"])
        XCTAssertEqual(unproven.status, 201, "an unconfirmed sign-up's address is no one's yet")
        try database.connect().execute("UPDATE auth.users SET email_verified = true WHERE id = $1::uuid", [unproven.userId])
        let sameEmail = try api.post("/v1/auth/signup", ["username": "dave_third", "email": "dave_dup@example.COM",
                                                         "password": "correct horse battery", "fullName": "D"])
        assertClientError(sameEmail, 409, code: "conflict")
        XCTAssertEqual(sameEmail.errorField, "email")
        XCTAssertEqual(try count("users"), 2)
    }

    func testProfileUpdateAndItsConflicts() throws {
        let a = try api.signup("erin_a")
        _ = try api.signup("erin_b")
        // An avatar is checked with stories (AvatarTests), which this auth alone cannot ask: refused, nothing changed.
        let unchecked = try api.patch("/v1/users/me", ["fullName": "Erin", "avatarMediaId": UUID().uuidString.lowercased()], token: a.accessToken)
        assertClientError(unchecked, 400, code: "validation_failed")
        XCTAssertEqual(unchecked.errorField, "avatarMediaId")
        let updated = try api.patch("/v1/users/me", ["fullName": "  Erin Example "], token: a.accessToken)
        XCTAssertEqual(updated.status, 200)
        XCTAssertEqual(updated["fullName"] as? String, "Erin Example")
        XCTAssertTrue(updated["avatarMediaId"] is NSNull)
        let cleared = try api.patch("/v1/users/me", ["avatarMediaId": NSNull()], token: a.accessToken)
        XCTAssertTrue(cleared["avatarMediaId"] is NSNull, "null clears the avatar")
        assertClientError(try api.patch("/v1/users/me", ["username": "erin_b"], token: a.accessToken), 409, code: "conflict")
        assertClientError(try api.patch("/v1/users/me", ["fullName": NSNull()], token: a.accessToken), 400, code: "validation_failed")
        XCTAssertEqual(try api.get("/v1/users/me", token: a.accessToken)["username"] as? String, "erin_a")
    }

    func testPhoneAndPostalAddressAreTheirOwnersAndANewEmailIsNotProven() throws {
        let a = try api.signup("fay_a"), b = try api.signup("fay_b")
        XCTAssertEqual(try api.get("/v1/users/me", token: a.accessToken)["emailVerified"] as? Bool, false, "nobody proved it yet")
        let updated = try api.patch("/v1/users/me", ["phone": "+40 721 000 111", "postalAddress": "Strada Lungă 3\nBrașov"], token: a.accessToken)
        XCTAssertEqual(updated["phone"] as? String, "+40 721 000 111")
        XCTAssertEqual(updated["postalAddress"] as? String, "Strada Lungă 3\nBrașov")
        let seen = try api.get("/v1/usernames/fay_a", token: b.accessToken)
        XCTAssertNil(seen["phone"], "others never see the phone")
        XCTAssertNil(seen["postalAddress"], "nor the address")
        for bad in [["phone": "call me"], ["phone": "12\n"], ["postalAddress": String(repeating: "a", count: 301)]] {
            assertClientError(try api.patch("/v1/users/me", bad, token: a.accessToken), 400, code: "validation_failed")
        }
        let cleared = try api.patch("/v1/users/me", ["phone": NSNull(), "postalAddress": NSNull()], token: a.accessToken)
        XCTAssertTrue(cleared["phone"] is NSNull)
        XCTAssertTrue(cleared["postalAddress"] is NSNull)
    }

    func testPasswordChangeEndsOtherSessionsButKeepsThisOne() throws {
        let signup = try api.signup("frank_pw", password: "correct horse battery")
        let other = try api.post("/v1/auth/login", ["username": "frank_pw", "password": "correct horse battery"])
        assertClientError(try api.post("/v1/users/me/password", ["currentPassword": "wrong password!", "newPassword": "new secret phrase"],
                                       token: signup.accessToken), 403, code: "forbidden")
        assertClientError(try api.post("/v1/users/me/password", ["currentPassword": "correct horse battery", "newPassword": "short"],
                                       token: signup.accessToken), 400, code: "validation_failed")
        let changed = try api.post("/v1/users/me/password", ["currentPassword": "correct horse battery", "newPassword": "new secret phrase"],
                                   token: signup.accessToken)
        XCTAssertEqual(changed.status, 204)
        XCTAssertEqual(try api.get("/v1/users/me", token: signup.accessToken).status, 200)
        assertClientError(try api.get("/v1/users/me", token: other.accessToken), 401)
        assertClientError(try api.post("/v1/auth/refresh", ["refreshToken": other.refreshToken]), 401)
        assertClientError(try api.post("/v1/auth/login", ["username": "frank_pw", "password": "correct horse battery"]), 401)
        XCTAssertEqual(try api.post("/v1/auth/login", ["username": "frank_pw", "password": "new secret phrase"]).status, 200)
    }

    func testSignupWithAnIdempotencyKeyCreatesOnce() throws {
        let body: [String: Any] = ["username": "gina_idem", "email": "gina@example.com", "password": "correct horse battery", "fullName": "Gina"]
        let first = try api.post("/v1/auth/signup", body, headers: ["Idempotency-Key": "k-123"])
        let retry = try api.post("/v1/auth/signup", body, headers: ["Idempotency-Key": "k-123"])
        XCTAssertEqual(first.status, 201)
        XCTAssertEqual(retry.status, 201)
        XCTAssertEqual(retry.userId, first.userId)
        XCTAssertEqual(retry.headers["idempotent-replayed"], "true")
        XCTAssertEqual(try count("users"), 1)
        XCTAssertEqual(try count("sessions"), 2, "the retry gets a session of its own")
        XCTAssertNotEqual(retry.accessToken, first.accessToken)
        XCTAssertEqual(try api.get("/v1/users/me", token: retry.accessToken).status, 200)
        let kept = try database.connect().first("SELECT convert_from(body, 'UTF8') AS body FROM auth.idempotency_keys")?["body", as: String.self]
        XCTAssertEqual(kept, first.userId, "only a reference is kept, not the tokens")
        var other = body; other["username"] = "gina_other"
        assertClientError(try api.post("/v1/auth/signup", other, headers: ["Idempotency-Key": "k-123"]), 409,
                          "a reused key with another body is refused")

        // A retry is the same request however its JSON is written: names in another order, spaces, escapes.
        let written = #"{ "password" : "correct horse battery", "fullName": "G\u0069na", "username":"gina_idem","email":"gina@example.com" }"#
        let rewritten = try api.send("POST", "/v1/auth/signup", raw: Array(written.utf8),
                                     headers: ["Idempotency-Key": "k-123", "Content-Type": "application/json"])
        XCTAssertEqual(rewritten.status, 201, String(decoding: rewritten.body, as: UTF8.self))
        XCTAssertEqual(rewritten.userId, first.userId)
        XCTAssertEqual(rewritten.headers["idempotent-replayed"], "true")
        // A key kept before bodies were compared by value (the hash of the bytes) still answers the same bytes again.
        let db = try database.connect()
        try db.execute("""
            UPDATE auth.idempotency_keys SET request_hash = encode(sha256(convert_to(E'POST /v1/auth/signup\\n' || $1, 'UTF8')), 'hex')
            """, [written])
        XCTAssertEqual(try api.send("POST", "/v1/auth/signup", raw: Array(written.utf8),
                                    headers: ["Idempotency-Key": "k-123", "Content-Type": "application/json"]).userId, first.userId)
        XCTAssertEqual(try count("users"), 1)
    }

    func testJWKSPublishesTheKeyThatSignsTokens() throws {
        let jwks = try api.get("/v1/auth/jwks")
        XCTAssertEqual(jwks.status, 200)
        let keys = jwks["keys"] as? [[String: Any]] ?? []
        XCTAssertEqual(keys.count, 1)
        XCTAssertEqual(keys.first?["kty"] as? String, "OKP")
        XCTAssertEqual(keys.first?["crv"] as? String, "Ed25519")
        let token = try api.signup().accessToken
        let header = try JSONSerialization.jsonObject(with: Data(base64URL: String(token.split(separator: ".")[0]))!) as? [String: Any]
        XCTAssertEqual(header?["alg"] as? String, "EdDSA")
        XCTAssertEqual(header?["kid"] as? String, keys.first?["kid"] as? String)
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
