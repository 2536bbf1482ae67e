import Crypto
import Foundation
import HTTP
import XCTest

/// Sign-in with Google against a stand-in issuer (`GoogleStandIn`).
final class GoogleSignInTests: XCTestCase {
    var database: TestDatabase!
    var auth: ServiceProcess!
    var api: APIClient!
    var google: GoogleStandIn!
    var clientId: String { google.clientId }
    var otherKey: String { google.otherKey }

    override func setUpWithError() throws {
        google = try GoogleStandIn()
        database = try TestDatabase()
        auth = try ServiceProcess.startReady("auth", environment: [
            "DATABASE_URL": database.url, "GOOGLE_CLIENT_IDS": "other-client, \(clientId)", "GOOGLE_JWKS_URL": google.jwksURL])
        api = APIClient(port: auth.port)
    }

    override func tearDown() {
        if let auth, let run = testRun, run.failureCount > 0 { print("--- auth log ---\n\(auth.log.suffix(3000))") }
        auth?.stop()
        google?.stop()
        database?.drop()
    }

    func token(_ changes: [String: Any?] = [:], kid: String = "k1", alg: String = "RS256", signedWith keyFile: String? = nil) throws -> String {
        try google.token(changes, kid: kid, alg: alg, signedWith: keyFile)
    }

    func count(_ table: String) throws -> Int {
        try database.connect().first("SELECT count(*) AS n FROM auth.\(unescaped: table)")!["n"]
    }

    func testAGoogleAccountIsCreatedOnceSignsInAgainAndLinksToTheUserWithItsEmail() throws {
        let first = try api.post("/v1/auth/google", ["idToken": try token()])
        XCTAssertEqual(first.headers["cache-control"], "no-store")
        XCTAssertEqual(first.status, 201, String(decoding: first.body, as: UTF8.self))
        XCTAssertFalse(first.accessToken.isEmpty)
        XCTAssertEqual((first["user"] as? [String: Any])?["fullName"] as? String, "Gina Google")
        XCTAssertEqual((first["user"] as? [String: Any])?["emailVerified"] as? Bool, true, "Google proved the address")
        XCTAssertEqual(try api.get("/v1/users/me", token: first.accessToken).status, 200, "a usual session")
        let again = try api.post("/v1/auth/google", ["idToken": try token()])
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual(again.userId, first.userId, "the same user")
        XCTAssertEqual(try count("users"), 1)
        XCTAssertEqual(try database.connect().first("SELECT count(*) AS n FROM auth.outbox WHERE topic = 'user.registered'")!["n", as: Int.self], 1,
                       "user.registered once")

        let signup = try api.signup("paula")
        // Paula proved her address (the mail's link, here written to the database as it would).
        try database.connect().execute("UPDATE auth.users SET email_verified = true WHERE id = $1::uuid", [signup.userId])
        let linked = try api.post("/v1/auth/google", ["idToken": try token(["sub": "g-paula", "email": "PAULA@example.com"])])
        XCTAssertEqual(linked.status, 200)
        XCTAssertEqual(linked.userId, signup.userId, "linked to the user who proved that address")
        XCTAssertEqual(try count("google_accounts"), 2)
    }

    /// Pre-account hijacking: someone signs up with another person's address and a password of their own, and waits
    /// for its owner to sign in with Google. The owner gets an account of her own; the squatter's is not linked, keeps
    /// none of her address's power (no sign-in, reset or proof by it), and sees nothing of hers.
    func testASignUpWithSomeoneElsesAddressIsNotHandedTheirGoogleSignIn() throws {
        let squatter = try api.post("/v1/auth/signup", ["username": "not_gina", "email": "Gina@Example.com",
                                                         "password": "squatters secret", "fullName": "Gina (really not)"])
        XCTAssertEqual(squatter.status, 201)
        let session = try api.post("/v1/auth/login", ["email": "gina@example.com", "password": "squatters secret"])
        XCTAssertEqual(session.status, 200, "an unconfirmed sign-up signs in by the address it gave, until someone proves it")

        let gina = try api.post("/v1/auth/google", ["idToken": try token()])
        XCTAssertEqual(gina.status, 201, "an account of her own: " + String(decoding: gina.body, as: UTF8.self))
        XCTAssertNotEqual(gina.userId, squatter.userId, "the squatter's account is not linked to her Google sign-in")
        let mine = try api.get("/v1/users/me", token: gina.accessToken)
        XCTAssertEqual(mine["email"] as? String, "gina@example.com")
        XCTAssertEqual(mine["emailVerified"] as? Bool, true)
        XCTAssertEqual(mine["fullName"] as? String, "Gina Google", "nothing the squatter set up")
        XCTAssertEqual(try api.post("/v1/auth/google", ["idToken": try token()]).userId, gina.userId, "and it stays hers")

        // The squatter's password, refresh and access tokens open nothing of Gina's.
        assertClientError(try api.post("/v1/auth/login", ["email": "gina@example.com", "password": "squatters secret"]), 401,
                          "her proven address signs in to her account only")
        for token in [squatter.accessToken, session.accessToken] {
            let seen = try api.get("/v1/users/me", token: token)
            XCTAssertEqual(seen.userId, squatter.userId, "the squatter's tokens are the squatter's account's")
            XCTAssertEqual(seen["emailVerified"] as? Bool, false, "which holds no proven address of hers")
        }
        let refreshed = try api.post("/v1/auth/refresh", ["refreshToken": session.refreshToken])
        XCTAssertNotEqual(refreshed.userId, gina.userId)
        let c = try database.connect()
        XCTAssertEqual(try c.first("SELECT count(*) AS n FROM auth.google_accounts WHERE user_id = $1::uuid", [squatter.userId])!["n", as: Int.self], 0)
        XCTAssertEqual(try c.first("SELECT count(*) AS n FROM auth.users WHERE lower(email) = 'gina@example.com' AND email_verified")!["n", as: Int.self],
                       1, "one account proved the address: hers")
        XCTAssertEqual(try c.first("SELECT id::text AS id FROM auth.users WHERE lower(email) = 'gina@example.com' AND email_verified")!["id", as: String.self],
                       gina.userId)
    }

    func testEveryTokenGoogleWouldNotVouchForIsRefused() throws {
        let now = Int(Date().timeIntervalSince1970)
        let refused: [(String, String)] = [
            (try token(["aud": "someone-else"]), "wrong audience"),
            (try token(["iss": "https://evil.example.com"]), "wrong issuer"),
            (try token(["exp": now - 3600, "iat": now - 7200]), "expired"),
            (try token(["iat": now + 3600]), "issued in the future"),
            (try token(signedWith: otherKey), "bad signature"),
            (try token(kid: "k9"), "unknown kid"),
            (try token(["email_verified": false]), "unverified email"),
            (try token(["email": nil]), "no email"),
            (try token().split(separator: ".").prefix(2).joined(separator: ".") + ".", "no signature"),
            (Base64URL.encode(Array(#"{"alg":"none","kid":"k1"}"#.utf8)) + "." + (try token().split(separator: ".")[1]) + ".", "alg none"),
            (try token(alg: "HS256"), "HS256"),
            ("not.a.token", "garbage"),
        ]
        for (idToken, why) in refused {
            assertClientError(try api.post("/v1/auth/google", ["idToken": idToken]), 401, code: "unauthenticated", why)
        }
        XCTAssertEqual(try count("users"), 0)
        assertClientError(try api.post("/v1/auth/google", ["idToken": ""]), 400, "an empty token is bad input")
    }

    func testWithoutClientIdsSignInWithGoogleDoesNotExist() throws {
        let plain = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url])
        defer { plain.stop() }
        assertClientError(try APIClient(port: plain.port).post("/v1/auth/google", ["idToken": try token()]), 404)
        let paths = try APIClient(port: plain.port).get("/openapi.json")["paths"] as? [String: Any] ?? [:]
        XCTAssertNil(paths["/v1/auth/google"])
    }
}
