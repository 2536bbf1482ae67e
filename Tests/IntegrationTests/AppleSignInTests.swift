import Crypto
import Foundation
import HTTP
import XCTest

/// Sign in with Apple against a stand-in Apple (`AppleStandIn`): its key set, its token and revoke endpoints.
final class AppleSignInTests: XCTestCase {
    var database: TestDatabase!
    var auth: ServiceProcess!
    var api: APIClient!
    var apple: AppleStandIn!
    /// Seals what auth keeps at rest, Apple's refresh tokens among it.
    let sealingKey = Base64URL.encode(Array(repeating: 7, count: 32))

    override func setUpWithError() throws {
        apple = try AppleStandIn()
        database = try TestDatabase()
        auth = try ServiceProcess.startReady("auth", environment: apple.environment.merging([
            "DATABASE_URL": database.url, "SIGNING_KEY_ENCRYPTION_KEY": sealingKey, "ACCOUNT_DELETION_GRACE_HOURS": "0"]) { $1 })
        api = APIClient(port: auth.port)
    }

    override func tearDown() {
        if let auth, let run = testRun, run.failureCount > 0 { print("--- auth log ---\n\(auth.log.suffix(3000))") }
        auth?.stop()
        apple?.stop()
        database?.drop()
    }

    /// A sign-in as the app makes it: a fresh raw nonce, the token carrying its hash, a fresh code, `extra` fields.
    func signIn(_ changes: [String: Any?] = [:], subject: String = "001234.apple.amelie", _ extra: [String: Any] = [:]) throws -> APIResponse {
        let nonce = UUID().uuidString
        var body: [String: Any] = ["idToken": try apple.token(changes.merging(["sub": subject]) { a, _ in a }, nonce: nonce),
                                   "nonce": nonce, "authorizationCode": apple.code(for: subject)]
        for (k, v) in extra { body[k] = v }
        return try api.post("/v1/auth/apple", body)
    }

    func count(_ sql: String, _ parameters: [String] = []) throws -> Int {
        try database.connect().first("SELECT count(*) AS n FROM \(sql)", parameters)!["n", as: Int.self]
    }

    func testAnAppleAccountIsCreatedWithTheAppsNameAndSignsInAgainWithoutAnAddress() throws {
        let first = try signIn([:], ["givenName": "Amélie", "familyName": "Apple"])
        XCTAssertEqual(first.status, 201, String(decoding: first.body, as: UTF8.self))
        XCTAssertEqual(first.headers["cache-control"], "no-store")
        let user = try XCTUnwrap(first["user"] as? [String: Any])
        XCTAssertEqual(user["fullName"] as? String, "Amélie Apple", "the name the app sent on the first sign-in")
        XCTAssertEqual(user["email"] as? String, "amelie@example.com")
        XCTAssertEqual(user["emailVerified"] as? Bool, true, "Apple proved the address")
        XCTAssertEqual(try api.get("/v1/users/me", token: first.accessToken).status, 200, "a usual session")
        XCTAssertEqual(apple.exchangeCount, 1, "the authorization code was exchanged")
        let refresh = try XCTUnwrap(apple.refreshTokens(of: "001234.apple.amelie").first)
        XCTAssertEqual(try count("auth.apple_accounts WHERE refresh_sealed AND length(refresh_token) > 0"), 1, "kept")
        XCTAssertEqual(try count("auth.apple_accounts WHERE position(convert_to($1, 'UTF8') IN refresh_token) > 0", [refresh]), 0,
                       "sealed at rest")
        XCTAssertFalse(auth.log.contains(refresh), "never logged")

        // Later sign-ins: Apple no longer tells the address, and the app no longer has the name.
        let again = try signIn(["email": nil, "email_verified": nil, "is_private_email": nil], ["fullName": "Someone Else"])
        XCTAssertEqual(again.status, 200, String(decoding: again.body, as: UTF8.self))
        XCTAssertEqual(again.userId, first.userId, "found by Apple's id of her")
        XCTAssertEqual((again["user"] as? [String: Any])?["fullName"] as? String, "Amélie Apple", "the name is the first sign-in's")
        XCTAssertEqual(apple.exchangeCount, 1, "a refresh token is held: the code is not exchanged again")
        XCTAssertEqual(try count("auth.users"), 1)
        XCTAssertEqual(try count("auth.outbox WHERE topic = 'user.registered'"), 1)

        // Someone Apple never saw before, and who hides the address from the app, has no account made here.
        assertClientError(try signIn(["email": nil, "email_verified": nil], subject: "009999.apple.nobody"), 401)
    }

    func testEveryTokenAppleWouldNotVouchForIsRefused() throws {
        let now = Int(Date().timeIntervalSince1970)
        let nonce = "the-raw-nonce"
        let refused: [(String, String)] = [
            (try apple.token(["aud": "someone.elses.app"], nonce: nonce), "wrong audience"),
            (try apple.token(["iss": "https://accounts.google.com"], nonce: nonce), "wrong issuer"),
            (try apple.token(["exp": now - 3600, "iat": now - 7200], nonce: nonce), "expired"),
            (try apple.token(["iat": now + 3600], nonce: nonce), "issued in the future"),
            (try apple.token(nonce: "another sign-in's nonce"), "another nonce"),
            (try apple.token(["nonce": nil], nonce: nonce), "no nonce"),
            (try apple.token(["nonce": nonce], nonce: nonce), "the raw nonce, not its hash"),
            (try apple.token(nonce: nonce, signedWithOtherKey: true), "bad signature"),
            (try apple.token(nonce: nonce, kid: "k9"), "unknown kid"),
            (try apple.token(nonce: nonce, alg: "HS256"), "HS256"),
            (try apple.token(["email_verified": "false"], nonce: nonce), "unverified email"),
            (try apple.token(nonce: nonce).split(separator: ".").prefix(2).joined(separator: ".") + ".", "no signature"),
            ("not.a.token", "garbage"),
        ]
        for (idToken, why) in refused {
            assertClientError(try api.post("/v1/auth/apple", ["idToken": idToken, "nonce": nonce, "authorizationCode": apple.code()]),
                              401, code: "unauthenticated", why)
        }
        assertClientError(try api.post("/v1/auth/apple", ["idToken": try apple.token(nonce: nonce), "nonce": nonce,
                                                          "authorizationCode": "a code Apple never gave"]), 401, "a code Apple refuses")
        assertClientError(try api.post("/v1/auth/apple", ["idToken": try apple.token(nonce: nonce), "authorizationCode": apple.code()]), 400,
                          "the nonce is required")
        XCTAssertEqual(try count("auth.users"), 0)
        XCTAssertEqual(apple.exchangeCount, 0, "no code is exchanged for a token that is refused")
    }

    /// Google's rule: an account is linked only where it proved the same address. Someone who signed up with Amélie's
    /// address and never proved it gets nothing of her Apple sign-in; an account that proved it is hers, linked.
    func testOnlyAnAccountThatProvedTheAddressIsLinked() throws {
        let squatter = try api.post("/v1/auth/signup", ["username": "not_amelie", "email": "Amelie@Example.com",
                                                         "password": "squatters secret", "fullName": "Amélie (really not)"])
        XCTAssertEqual(squatter.status, 201)
        let amelie = try signIn()
        XCTAssertEqual(amelie.status, 201, "an account of her own: " + String(decoding: amelie.body, as: UTF8.self))
        XCTAssertNotEqual(amelie.userId, squatter.userId, "the squatter's account is not linked to her Apple sign-in")
        XCTAssertEqual(try count("auth.apple_accounts WHERE user_id = $1::uuid", [squatter.userId]), 0)
        XCTAssertEqual(try api.get("/v1/users/me", token: squatter.accessToken)["emailVerified"] as? Bool, false)
        assertClientError(try api.post("/v1/auth/login", ["email": "amelie@example.com", "password": "squatters secret"]), 401,
                          "her proven address signs in to her account only")

        let paula = try api.signup("paula")
        try database.connect().execute("UPDATE auth.users SET email_verified = true WHERE id = $1::uuid", [paula.userId])  // proven
        let email = try XCTUnwrap(try api.get("/v1/users/me", token: paula.accessToken)["email"] as? String)
        let linked = try signIn(["email": email.uppercased()], subject: "000777.apple.paula")
        XCTAssertEqual(linked.status, 200, String(decoding: linked.body, as: UTF8.self))
        XCTAssertEqual(linked.userId, paula.userId, "linked to the account that proved the address")
        XCTAssertEqual(try signIn(["email": nil, "email_verified": nil], subject: "000777.apple.paula").userId, paula.userId)

        // A private-relay address is real and proven: it makes an account of its own, and links only to the account
        // that proved that same relay address (not Paula's, whose real address it forwards to).
        let relay = try signIn(["email": "x7q2ab9k@privaterelay.appleid.com", "is_private_email": true], subject: "000888.apple.hidden")
        XCTAssertEqual(relay.status, 201)
        XCTAssertNotEqual(relay.userId, paula.userId)
        XCTAssertEqual((relay["user"] as? [String: Any])?["email"] as? String, "x7q2ab9k@privaterelay.appleid.com")
        XCTAssertEqual((relay["user"] as? [String: Any])?["emailVerified"] as? Bool, true)
    }

    /// App Store Review Guideline 5.1.1(v): deleting the account revokes its Apple token, re-authenticated by a fresh
    /// Apple sign-in; an Apple that is down when asked gets asked again.
    func testDeletingTheAccountRevokesItsAppleRefreshToken() throws {
        let amelie = try signIn()
        XCTAssertEqual(amelie.status, 201)
        let refresh = try XCTUnwrap(apple.refreshTokens(of: "001234.apple.amelie").first)
        let nonce = UUID().uuidString
        let idToken = try apple.token(["email": nil], nonce: nonce)
        assertClientError(try api.send("DELETE", "/v1/users/me", json: ["idToken": idToken, "nonce": "not this sign-in's"], token: amelie.accessToken),
                          403, "a token whose nonce is not the one sent")
        assertClientError(try api.send("DELETE", "/v1/users/me", json: ["idToken": try apple.token(["sub": "000999.apple.other"], nonce: nonce),
                                                                         "nonce": nonce], token: amelie.accessToken),
                          403, "someone else's Apple sign-in")
        XCTAssertTrue(apple.waitForRevocations(1, timeout: 0.5).isEmpty)

        apple.failRevocations(1)
        let deleted = try api.send("DELETE", "/v1/users/me", json: ["idToken": idToken, "nonce": nonce], token: amelie.accessToken)
        XCTAssertEqual(deleted.status, 202, String(decoding: deleted.body, as: UTF8.self))
        let revoked = apple.waitForRevocations(1)
        XCTAssertEqual(revoked.count, 1, "revoked once Apple answered again")
        XCTAssertEqual(revoked.first?["token"], refresh)
        XCTAssertEqual(revoked.first?["token_type_hint"], "refresh_token")
        XCTAssertEqual(revoked.first?["client_id"], apple.clientId)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { (try? self.count("auth.users")) == 0 }, "erased")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) { (try? self.count("auth.apple_revocations")) == 0 }, "nothing left to revoke")
        XCTAssertEqual(try count("auth.apple_accounts"), 0)
    }

    func testWithoutClientIdsSignInWithAppleDoesNotExistAndAHalfSetUpDoesNotStart() throws {
        let plain = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url, "SIGNING_KEY_ENCRYPTION_KEY": sealingKey])
        defer { plain.stop() }
        let nonce = "n"
        assertClientError(try APIClient(port: plain.port).post("/v1/auth/apple", ["idToken": try apple.token(nonce: nonce), "nonce": nonce,
                                                                                   "authorizationCode": apple.code()]), 404)
        let paths = try APIClient(port: plain.port).get("/openapi.json")["paths"] as? [String: Any] ?? [:]
        XCTAssertNil(paths["/v1/auth/apple"])

        for (missing, value) in [("APPLE_TEAM_ID", ""), ("APPLE_PRIVATE_KEY", "-----BEGIN PRIVATE KEY-----\\nAAAA\\n-----END PRIVATE KEY-----")] {
            var environment = apple.environment.merging(["DATABASE_URL": database.url]) { $1 }
            environment[missing] = value
            let broken = try ServiceProcess("auth", environment: environment)
            XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { !broken.process.isRunning }, "\(missing): it does not start")
            XCTAssertTrue(broken.log.contains(missing), broken.log)
            XCTAssertFalse(broken.log.contains("BEGIN PRIVATE KEY"), "the key is not echoed")
        }
    }
}
