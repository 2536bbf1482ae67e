import Crypto
import Features
import Foundation
import HTTP
import Runtime

/// Sign-in with Google as an OpenID Connect relying party: an ID token is accepted when its RS256 signature checks
/// against Google's key set (fetched from `GOOGLE_JWKS_URL`, cached by `kid`, fetched again when a token names an
/// unknown one), its `iss` is Google's, its `aud` one of our client ids, it is within its times (a minute of
/// leeway) and Google verified the email.
struct GoogleSignIn: Sendable {
    /// `GOOGLE_CLIENT_IDS` (comma-separated) and `GOOGLE_JWKS_URL`; nil when no client id is set (sign-in is off).
    struct Settings: Sendable {
        let clientIds: Set<String>
        let jwksURL: URL

        init?(_ environment: Environment) throws {
            guard let ids = environment.optional("GOOGLE_CLIENT_IDS") else { return nil }
            clientIds = Set(ids.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
            guard !clientIds.isEmpty, clientIds.allSatisfy({ $0.count <= 200 }) else {
                throw ConfigError(variable: "GOOGLE_CLIENT_IDS", problem: "must be a comma-separated list of OAuth client ids")
            }
            let url = environment.string("GOOGLE_JWKS_URL", default: "https://www.googleapis.com/oauth2/v3/certs")
            guard let parsed = URL(string: url), ["https", "http"].contains(parsed.scheme ?? "") else {
                throw ConfigError(variable: "GOOGLE_JWKS_URL", problem: "must be an http(s) URL")
            }
            jwksURL = parsed
        }
    }

    /// Why a token was refused.
    typealias Refused = TokenRefused
    /// Google's public keys.
    typealias KeySet = ProviderKeySet

    static let issuers: Set<String> = ["accounts.google.com", "https://accounts.google.com"]

    let settings: Settings
    let keys: KeySet

    /// The identity in `token`, or why it is refused.
    func verify(_ token: String, now: Date = Date()) throws(Refused) -> OutsideIdentity {
        let claims = try keys.verifiedClaims(token)
        guard let iss = claims["iss"] as? String, Self.issuers.contains(iss) else { throw .issuer }
        _ = try IDTokenClaims.audience(claims, among: settings.clientIds)
        try IDTokenClaims.times(claims, now: now)
        let sub = try IDTokenClaims.subject(claims)
        guard let email = claims["email"] as? String, !email.isEmpty else { throw .malformed }
        guard IDTokenClaims.flag(claims, "email_verified") else { throw .emailNotVerified }
        return OutsideIdentity(provider: .google, subject: sub, email: email, name: (claims["name"] as? String).map { String($0.prefix(100)) },
                               picture: (claims["picture"] as? String).flatMap(Profiles.picture))
    }
}
