import Crypto
import Foundation
import HTTP

/// Apple as Sign in with Apple sees it, stood in by the test (a server of its own): the JWK set of an RSA key made
/// with the `openssl` command (`/auth/keys`), identity tokens signed with it, authorization codes it minted and
/// exchanges for refresh tokens (`/auth/token`), and revocations it records (`/auth/revoke`). Both endpoints check
/// the client secret as Apple does: an ES256 JWT of the team's key (its public half checked with `openssl`), `iss` the
/// team, `kid` the key, `aud` Apple, `sub` the client id, at most six months long.
final class AppleStandIn: @unchecked Sendable {  // `@unchecked`: its records are behind `lock`
    let clientId: String
    let teamId = "TEAM4TESTS"
    let keyId = "KEY4TESTS1"
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apple-\(UUID().uuidString.prefix(8))")
    let port = TestEnvironment.freePort()
    private var server: HTTPServer!
    private var signer: JWSSigningKey!
    private var otherSigner: JWSSigningKey!
    private var teamKey: String { directory.appendingPathComponent("team.p8").path }
    private var teamPublicKey: String { directory.appendingPathComponent("team.pub").path }
    private let lock = NSLock()
    private var codes: [String: String] = [:]  // code → subject
    private var issued: [String: String] = [:]  // refresh token → subject
    private var exchanges = 0
    private var revocations: [[String: String]] = []
    private var revokeFailuresLeft = 0

    /// The auth service's settings for this Apple.
    var environment: [String: String] {
        ["APPLE_CLIENT_IDS": "other.app.id, \(clientId)", "APPLE_JWKS_URL": "http://127.0.0.1:\(port)/auth/keys",
         "APPLE_TOKEN_URL": "http://127.0.0.1:\(port)/auth/token", "APPLE_REVOKE_URL": "http://127.0.0.1:\(port)/auth/revoke",
         "APPLE_TEAM_ID": teamId, "APPLE_KEY_ID": keyId,
         "APPLE_PRIVATE_KEY": ((try? String(contentsOfFile: teamKey, encoding: .utf8)) ?? "").replacingOccurrences(of: "\n", with: "\\n")]
    }

    init(clientId: String = "com.example.youstudy") throws {
        self.clientId = clientId
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let key = directory.appendingPathComponent("key.pem").path, other = directory.appendingPathComponent("other.pem").path
        for path in [key, other] {
            try IntegrationTests.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path])
        }
        try IntegrationTests.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", teamKey])
        try IntegrationTests.run(["openssl", "pkey", "-in", teamKey, "-pubout", "-out", teamPublicKey])
        signer = try JWSSigningKey(pem: try String(contentsOfFile: key, encoding: .utf8))
        otherSigner = try JWSSigningKey(pem: try String(contentsOfFile: other, encoding: .utf8))
        let modulus = try IntegrationTests.run(["openssl", "rsa", "-in", key, "-noout", "-modulus"])
            .trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "Modulus=", with: "")
        let n = stride(from: 0, to: modulus.count, by: 2).map { i -> UInt8 in
            let start = modulus.index(modulus.startIndex, offsetBy: i)
            return UInt8(modulus[start..<modulus.index(start, offsetBy: 2)], radix: 16)!
        }
        let jwks = Array(#"{"keys":[{"kid":"apple-k1","kty":"RSA","alg":"RS256","use":"sig","n":"\#(Base64URL.encode(n))","e":"AQAB"}]}"#.utf8)
        server = HTTPServer(port: UInt16(port), threads: 2, route: { _, _ in .notFound }) { [unowned self] request, _ in
            switch (request.method, request.path) {
            case ("GET", "/auth/keys"): return Response(status: 200, headers: [("Content-Type", "application/json")], body: jwks)
            case ("POST", "/auth/token"): return exchange(Self.form(request.body))
            case ("POST", "/auth/revoke"): return revoke(Self.form(request.body))
            default: return Response(status: 404)
            }
        }
        try server.start()
    }

    /// An identity token as Apple would sign it for Amélie's sign-in started with `nonce` (raw), with `changes` to its
    /// claims (nil removes one).
    func token(_ changes: [String: Any?] = [:], nonce: String, kid: String = "apple-k1", alg: String? = nil,
               signedWithOtherKey: Bool = false) throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        var claims: [String: Any] = ["iss": "https://appleid.apple.com", "aud": clientId, "sub": "001234.apple.amelie",
                                     "email": "amelie@example.com", "email_verified": "true", "is_private_email": "false",
                                     "nonce": hexString(sha256(Array(nonce.utf8))), "nonce_supported": true,
                                     "auth_time": now - 5, "iat": now - 5, "exp": now + 600]
        for (k, v) in changes { claims[k] = v }
        let key = signedWithOtherKey ? otherSigner! : signer!
        guard let alg else { return try key.jwt(header: ["kid": kid], claims: claims) }
        let header = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: ["alg": alg, "kid": kid])))
        let input = header + "." + Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: claims)))
        return input + "." + Base64URL.encode(try key.sign(Array(input.utf8)))
    }

    /// An authorization code for `subject`'s sign-in, as the app gets it beside the token (single use).
    func code(for subject: String = "001234.apple.amelie") -> String {
        let code = "c" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        lock.withLock { codes[code] = subject }
        return code
    }

    /// How many codes were exchanged.
    var exchangeCount: Int { lock.withLock { exchanges } }
    /// The refresh tokens handed out, by subject.
    func refreshTokens(of subject: String) -> [String] { lock.withLock { issued.filter { $0.value == subject }.map(\.key) } }
    /// The revocations received (`token`, `token_type_hint`, `client_id`), once at least `count` came or `timeout` passed.
    func waitForRevocations(_ count: Int, timeout: TimeInterval = 40) -> [[String: String]] {
        _ = TestEnvironment.waitUntil(timeout: timeout, every: 0.2) { lock.withLock { revocations.count } >= count }
        return lock.withLock { revocations }
    }
    /// Answers the next `count` revocations 503, as an Apple that is down.
    func failRevocations(_ count: Int) { lock.withLock { revokeFailuresLeft = count } }

    private func exchange(_ form: [String: String]) -> Response {
        guard form["grant_type"] == "authorization_code" else { return Self.error(400, "unsupported_grant_type") }
        guard let clientId = form["client_id"], clientSecretIsValid(form["client_secret"], for: clientId) else { return Self.error(400, "invalid_client") }
        let subject: String? = lock.withLock {
            guard let code = form["code"], let subject = codes.removeValue(forKey: code) else { return nil }
            exchanges += 1
            return subject
        }
        guard let subject, let idToken = try? token(["sub": subject, "nonce": nil], nonce: "") else { return Self.error(400, "invalid_grant") }
        let refresh = "r." + UUID().uuidString.lowercased()
        lock.withLock { issued[refresh] = subject }
        let body: [String: Any] = ["access_token": "a." + UUID().uuidString, "token_type": "Bearer", "expires_in": 3600,
                                   "refresh_token": refresh, "id_token": idToken]
        return Response(status: 200, headers: [("Content-Type", "application/json")], body: Array(try! JSONSerialization.data(withJSONObject: body)))
    }

    private func revoke(_ form: [String: String]) -> Response {
        guard let clientId = form["client_id"], clientSecretIsValid(form["client_secret"], for: clientId) else { return Self.error(400, "invalid_client") }
        let failed: Bool = lock.withLock {
            if revokeFailuresLeft > 0 { revokeFailuresLeft -= 1; return true }
            revocations.append(["token": form["token"] ?? "", "token_type_hint": form["token_type_hint"] ?? "", "client_id": clientId])
            return false
        }
        return failed ? Self.error(503, "temporarily_unavailable") : Response(status: 200)
    }

    /// The client secret is the team key's ES256 JWT for `clientId`, as Apple requires.
    private func clientSecretIsValid(_ secret: String?, for clientId: String) -> Bool {
        let parts = (secret ?? "").split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let payload = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]), signature.count == 64,
              let header = (try? JSONSerialization.jsonObject(with: Data(headerBytes))) as? [String: Any],
              let claims = (try? JSONSerialization.jsonObject(with: Data(payload))) as? [String: Any] else { return false }
        let now = Int(Date().timeIntervalSince1970)
        guard header["alg"] as? String == "ES256", header["kid"] as? String == keyId, claims["iss"] as? String == teamId,
              claims["aud"] as? String == "https://appleid.apple.com", claims["sub"] as? String == clientId,
              let iat = claims["iat"] as? Int, let exp = claims["exp"] as? Int, iat <= now + 60, exp > now, exp - iat <= 15_777_000 else { return false }
        // r || s as the DER that `openssl dgst -verify` reads.
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var b = Array(bytes.drop(while: { $0 == 0 }))
            if b.isEmpty || b[0] & 0x80 != 0 { b.insert(0, at: 0) }
            return [0x02, UInt8(b.count)] + b
        }
        let sequence = integer(signature[0..<32]) + integer(signature[32..<64])
        let der = [0x30, UInt8(sequence.count)] + sequence
        let name = UUID().uuidString
        let input = directory.appendingPathComponent("in-\(name)"), sig = directory.appendingPathComponent("sig-\(name)")
        defer { try? FileManager.default.removeItem(at: input); try? FileManager.default.removeItem(at: sig) }
        guard (try? Data((parts[0] + "." + parts[1]).utf8).write(to: input)) != nil, (try? Data(der).write(to: sig)) != nil,
              let result = try? runForStatus(["openssl", "dgst", "-sha256", "-verify", teamPublicKey, "-signature", sig.path, input.path])
        else { return false }
        return result.status == 0
    }

    private static func form(_ body: [UInt8]) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String { s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            fields[decode(kv[0])] = kv.count > 1 ? decode(kv[1]) : ""
        }
        return fields
    }

    private static func error(_ status: Int, _ code: String) -> Response {
        Response(status: status, headers: [("Content-Type", "application/json")], body: Array(#"{"error":"\#(code)"}"#.utf8))
    }

    func stop() {
        server?.stop(grace: 0)
        try? FileManager.default.removeItem(at: directory)
    }
}
