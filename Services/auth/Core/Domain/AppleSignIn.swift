import Crypto
import Foundation
import HTTP
import Runtime

/// Sign in with Apple (developer.apple.com/documentation/sign_in_with_apple), as Apple's REST API describes it:
/// - the identity token is accepted when its RS256 signature checks against Apple's key set (`APPLE_JWKS_URL`), its
///   `iss` is Apple's, its `aud` one of the apps' ids (`APPLE_CLIENT_IDS`), it is within its times, and its `nonce`
///   is the SHA-256 (hex) of the raw nonce the app sends beside it (so a token taken from elsewhere is not replayed);
/// - the authorization code is exchanged (`APPLE_TOKEN_URL`) for a refresh token, kept so that deleting the account
///   can revoke it (`APPLE_REVOKE_URL`): App Store Review Guideline 5.1.1(v). Both calls authenticate with a client
///   secret, an ES256 JWT signed by the team's key (`APPLE_TEAM_ID`, `APPLE_KEY_ID`, `APPLE_PRIVATE_KEY`).
struct AppleSignIn: Sendable {
    /// Nil when `APPLE_CLIENT_IDS` is unset (sign-in with Apple is off); with it, the team's key is required: an app
    /// that signs people in with Apple must be able to revoke their tokens.
    struct Settings: Sendable {
        let clientIds: Set<String>
        let jwksURL: URL
        let tokenURL: URL
        let revokeURL: URL
        let teamId: String
        let keyId: String
        let key: JWSSigningKey

        init?(_ environment: Environment) throws {
            guard let ids = environment.optional("APPLE_CLIENT_IDS") else { return nil }
            clientIds = Set(ids.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
            guard !clientIds.isEmpty, clientIds.allSatisfy({ $0.count <= 200 && !$0.contains(where: \.isWhitespace) }) else {
                throw ConfigError(variable: "APPLE_CLIENT_IDS", problem: "must be a comma-separated list of bundle ids or service ids")
            }
            func url(_ name: String, _ fallback: String) throws -> URL {
                guard let url = URL(string: environment.string(name, default: fallback)), ["https", "http"].contains(url.scheme ?? ""),
                      url.host != nil else { throw ConfigError(variable: name, problem: "must be an http(s) URL") }
                return url
            }
            jwksURL = try url("APPLE_JWKS_URL", "https://appleid.apple.com/auth/keys")
            tokenURL = try url("APPLE_TOKEN_URL", "https://appleid.apple.com/auth/token")
            revokeURL = try url("APPLE_REVOKE_URL", "https://appleid.apple.com/auth/revoke")
            func id(_ name: String) throws -> String {
                guard let value = environment.optional(name)?.trimmingCharacters(in: .whitespaces), (1...64).contains(value.count),
                      value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
                    throw ConfigError(variable: name,
                                      problem: "must be set (letters and digits, as Apple's developer account shows it) when APPLE_CLIENT_IDS is")
                }
                return value
            }
            teamId = try id("APPLE_TEAM_ID")
            keyId = try id("APPLE_KEY_ID")
            guard let pem = environment.optional("APPLE_PRIVATE_KEY"), let key = try? JWSSigningKey(pem: pem), key.algorithm == .es256 else {
                throw ConfigError(variable: "APPLE_PRIVATE_KEY",
                                  problem: "must be the team's Sign in with Apple key, the .p8 file's PEM (a P-256 PKCS#8 private key), "
                                      + "when APPLE_CLIENT_IDS is set")
            }
            self.key = key
        }
    }

    /// What a verified identity token says.
    struct Identity: Sendable {
        let subject: String
        /// The address Apple proved, when the token carries one (the first sign-in's always does; later ones may not):
        /// a private-relay address (`…@privaterelay.appleid.com`, `isPrivateEmail`) is as real and proven as any.
        let email: String?
        let isPrivateEmail: Bool
        /// The app's id the token was issued to: the code exchange and the revocation name it.
        let clientId: String
    }

    static let issuer = "https://appleid.apple.com"

    let settings: Settings
    let keys: ProviderKeySet
    /// `SIGNING_KEY_ENCRYPTION_KEY`, which also seals the refresh tokens at rest (nil: stored in the clear).
    let box: [UInt8]?
    /// Says why Apple's endpoints gave no usable answer (never a code, token or secret).
    let logger: Logger

    /// The identity in `token`, issued for the sign-in the app started with `nonce` (raw), or why it is refused.
    func verify(_ token: String, nonce: String, now: Date = Date()) throws(TokenRefused) -> Identity {
        let claims = try keys.verifiedClaims(token)
        guard claims["iss"] as? String == Self.issuer else { throw .issuer }
        let clientId = try IDTokenClaims.audience(claims, among: settings.clientIds)
        try IDTokenClaims.times(claims, now: now)
        guard let carried = claims["nonce"] as? String,
              constantTimeEquals(Array(carried.lowercased().utf8), Array(hexString(sha256(Array(nonce.utf8))).utf8)) else { throw .nonce }
        let sub = try IDTokenClaims.subject(claims)
        var email: String?
        if let address = claims["email"] as? String, !address.isEmpty {
            guard IDTokenClaims.flag(claims, "email_verified") else { throw .emailNotVerified }
            email = address
        }
        return Identity(subject: sub, email: email, isPrivateEmail: IDTokenClaims.flag(claims, "is_private_email"), clientId: clientId)
    }

    /// The client secret Apple's token and revoke endpoints take: an ES256 JWT of the team's key, for `clientId`, valid
    /// five minutes (Apple allows six months; a fresh one per call leaves none worth stealing).
    func clientSecret(for clientId: String, now: Date = Date()) throws -> String {
        let iat = Int(now.timeIntervalSince1970)
        return try settings.key.jwt(header: ["kid": settings.keyId],
                                    claims: ["iss": settings.teamId, "iat": iat, "exp": iat + 300, "aud": Self.issuer, "sub": clientId])
    }

    enum Exchange: Equatable {
        /// The refresh token Apple gave for the code.
        case refreshToken(String)
        /// Apple refused the code (used, expired, another app's or another person's).
        case refused
        /// Apple did not answer usably (down, or our client secret refused: the operator's to fix; logged).
        case unavailable
    }

    /// Exchanges the app's authorization code for a refresh token (`grant_type=authorization_code`); the ID token Apple
    /// answers with must be `subject`'s, so that one person's code is not kept for another.
    func exchange(code: String, for identity: Identity) -> Exchange {
        func unavailable(_ why: String) -> Exchange {
            logger.warn("Sign in with Apple: no refresh token for an authorization code", ["reason": .string(why)])
            return .unavailable
        }
        guard let secret = try? clientSecret(for: identity.clientId) else { return unavailable("the client secret could not be signed") }
        let form = [("client_id", identity.clientId), ("client_secret", secret), ("code", code), ("grant_type", "authorization_code")]
        guard let (status, body) = Fetch.send("POST", settings.tokenURL, headers: Self.formHeaders, body: Self.form(form), timeout: 10) else {
            return unavailable("no answer from APPLE_TOKEN_URL")
        }
        let object = ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any]) ?? [:]
        let error = String((object["error"] as? String ?? "").prefix(64))
        guard status == 200 else { return error == "invalid_grant" ? .refused : unavailable("APPLE_TOKEN_URL answered \(status) \(error)") }
        guard let refresh = object["refresh_token"] as? String, !refresh.isEmpty, refresh.utf8.count <= 1024 else {
            return unavailable("APPLE_TOKEN_URL answered no refresh token")
        }
        // Straight from Apple over TLS: its `sub` is read, not verified again.
        if let idToken = object["id_token"] as? String {
            let parts = idToken.split(separator: ".", omittingEmptySubsequences: false)
            let payload = parts.count == 3 ? Base64URL.decode(parts[1]) : nil
            let claims = payload.flatMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] }
            guard claims?["sub"] as? String == identity.subject else { return .refused }
        }
        return .refreshToken(refresh)
    }

    /// Revokes a refresh token at Apple; false when Apple did not confirm it (to try again later).
    func revoke(refreshToken: String, clientId: String) -> Bool {
        guard let secret = try? clientSecret(for: clientId) else { return false }
        let form = [("client_id", clientId), ("client_secret", secret), ("token", refreshToken), ("token_type_hint", "refresh_token")]
        let status = Fetch.send("POST", settings.revokeURL, headers: Self.formHeaders, body: Self.form(form), timeout: 10)?.status
        if status != 200 { logger.warn("Sign in with Apple: a revocation is to be tried again", ["status": .int(status ?? 0)]) }
        return status == 200
    }

    // MARK: Refresh tokens at rest

    /// The bytes to store for `token`, and whether they are sealed (with `SIGNING_KEY_ENCRYPTION_KEY`, when set).
    func seal(_ token: String) throws -> (bytes: [UInt8], sealed: Bool) {
        guard let box else { return (Array(token.utf8), false) }
        return (try SecretBox.seal(Array(token.utf8), key: box, aad: Self.aad), true)
    }

    /// The token of stored bytes; nil when they are sealed and the key at hand does not open them.
    func open(_ bytes: [UInt8], sealed: Bool) -> String? {
        guard sealed else { return String(decoding: bytes, as: UTF8.self) }
        guard let box, let opened = try? SecretBox.open(bytes, key: box, aad: Self.aad) else { return nil }
        return String(decoding: opened, as: UTF8.self)
    }

    private static let aad = Array("apple-refresh-token".utf8)
    private static let formHeaders = ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"]

    private static func form(_ fields: [(String, String)]) -> Data {
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return Data(fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&").utf8)
    }
}
