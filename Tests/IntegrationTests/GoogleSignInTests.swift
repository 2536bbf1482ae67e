import Crypto
import Foundation
import HTTP
import XCTest

/// Sign-in with Google against a stand-in issuer: RSA keys made here with the `openssl` command, served as a JWK set
/// by a server of the test's own, tokens signed as Google signs them.
final class GoogleSignInTests: XCTestCase {
    var database: TestDatabase!
    var auth: ServiceProcess!
    var api: APIClient!
    var issuer: HTTPServer!
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("google-\(UUID().uuidString.prefix(8))")
    let clientId = "test-client.apps.googleusercontent.com"
    var key: String { dir.appendingPathComponent("key.pem").path }
    var otherKey: String { dir.appendingPathComponent("other.pem").path }

    override func setUpWithError() throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for path in [key, otherKey] {
            try IntegrationTests.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path])
        }
        let modulus = try IntegrationTests.run(["openssl", "rsa", "-in", key, "-noout", "-modulus"])
            .trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "Modulus=", with: "")
        let n = stride(from: 0, to: modulus.count, by: 2).map { i -> UInt8 in
            let start = modulus.index(modulus.startIndex, offsetBy: i)
            return UInt8(modulus[start..<modulus.index(start, offsetBy: 2)], radix: 16)!
        }
        let jwks = Array(#"{"keys":[{"kid":"k1","kty":"RSA","alg":"RS256","use":"sig","n":"\#(Base64URL.encode(n))","e":"AQAB"}]}"#.utf8)
        let port = TestEnvironment.freePort()
        issuer = HTTPServer(port: UInt16(port), threads: 2, route: { _, _ in .notFound }) { _, _ in
            Response(status: 200, headers: [("Content-Type", "application/json")], body: jwks)
        }
        try issuer.start()
        database = try TestDatabase()
        auth = try ServiceProcess.startReady("auth", environment: [
            "DATABASE_URL": database.url, "GOOGLE_CLIENT_IDS": "other-client, \(clientId)",
            "GOOGLE_JWKS_URL": "http://127.0.0.1:\(port)/certs"])
        api = APIClient(port: auth.port)
    }

    override func tearDown() {
        if let auth, let run = testRun, run.failureCount > 0 { print("--- auth log ---\n\(auth.log.suffix(3000))") }
        auth?.stop()
        issuer?.stop(grace: 0)
        database?.drop()
        try? FileManager.default.removeItem(at: dir)
    }

    /// An ID token as Google would sign it, with `changes` to its claims (nil removes one).
    func token(_ changes: [String: Any?] = [:], kid: String = "k1", alg: String = "RS256", signedWith keyFile: String? = nil) throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        var claims: [String: Any] = ["iss": "https://accounts.google.com", "aud": clientId, "sub": "g-1234567890",
                                     "email": "gina@example.com", "email_verified": true, "name": "Gina Google",
                                     "iat": now - 10, "exp": now + 3600]
        for (k, v) in changes { claims[k] = v }
        let header = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: ["alg": alg, "kid": kid, "typ": "JWT"])))
        let payload = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: claims)))
        let input = dir.appendingPathComponent("input-\(UUID().uuidString)"), signature = dir.appendingPathComponent("sig-\(UUID().uuidString)")
        try Data("\(header).\(payload)".utf8).write(to: input)
        try IntegrationTests.run(["openssl", "dgst", "-sha256", "-sign", keyFile ?? key, "-out", signature.path, input.path])
        return "\(header).\(payload).\(Base64URL.encode(Array(try Data(contentsOf: signature))))"
    }

    func count(_ table: String) throws -> Int {
        try database.connect().first("SELECT count(*) AS n FROM auth.\(table)")!["n"]
    }

    func testAGoogleAccountIsCreatedOnceSignsInAgainAndLinksToTheUserWithItsEmail() throws {
        let first = try api.post("/v1/auth/google", ["idToken": try token()])
        XCTAssertEqual(first.headers["cache-control"], "no-store")
        XCTAssertEqual(first.status, 201, String(decoding: first.body, as: UTF8.self))
        XCTAssertFalse(first.accessToken.isEmpty)
        XCTAssertEqual((first["user"] as? [String: Any])?["fullName"] as? String, "Gina Google")
        XCTAssertEqual(try api.get("/v1/users/me", token: first.accessToken).status, 200, "a usual session")
        let again = try api.post("/v1/auth/google", ["idToken": try token()])
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual(again.userId, first.userId, "the same user")
        XCTAssertEqual(try count("users"), 1)
        XCTAssertEqual(try database.connect().first("SELECT count(*) AS n FROM auth.outbox WHERE topic = 'user.registered'")!["n", as: Int.self], 1,
                       "user.registered once")

        let signup = try api.signup("paula")
        let linked = try api.post("/v1/auth/google", ["idToken": try token(["sub": "g-paula", "email": "PAULA@example.com"])])
        XCTAssertEqual(linked.status, 200)
        XCTAssertEqual(linked.userId, signup.userId, "linked to the user with that verified email")
        XCTAssertEqual(try count("google_accounts"), 2)
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
