import Crypto
import Features
import Foundation
import HTTP
import Runtime
import Synchronization

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

    /// What a verified ID token says.
    struct Identity: Sendable {
        let subject: String
        let email: String
        let name: String?
        /// Their Google picture (`picture`), when it is an http(s) URL of at most 2,048 characters.
        let picture: String?
    }

    /// Why a token was refused (the client is told only that it was).
    enum Refused: Error, Equatable {
        case malformed, algorithm, unknownKey, signature, issuer, audience, expired, notYetValid, emailNotVerified
    }

    static let issuers: Set<String> = ["accounts.google.com", "https://accounts.google.com"]
    static let leeway = 60.0

    let settings: Settings
    let keys: KeySet

    /// The identity in `token`, or why it is refused.
    func verify(_ token: String, now: Date = Date()) throws(Refused) -> Identity {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        struct Header: Decodable { let alg: String; let kid: String? }
        guard token.utf8.count <= 8192, parts.count == 3, let headerBytes = Base64URL.decode(parts[0]),
              let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)),
              let payload = Base64URL.decode(parts[1]), let signature = Base64URL.decode(parts[2]) else { throw .malformed }
        guard header.alg == "RS256" else { throw .algorithm }
        guard let kid = header.kid, let key = keys.key(kid) else { throw .unknownKey }
        let signed = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard rs256Verify(modulus: key.n, exponent: key.e, message: signed, signature: signature) else { throw .signature }
        guard let claims = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] else { throw .malformed }
        guard let iss = claims["iss"] as? String, Self.issuers.contains(iss) else { throw .issuer }
        let audiences = (claims["aud"] as? String).map { [$0] } ?? (claims["aud"] as? [String] ?? [])
        guard audiences.contains(where: settings.clientIds.contains) else { throw .audience }
        guard let exp = (claims["exp"] as? NSNumber)?.doubleValue, exp > now.timeIntervalSince1970 - Self.leeway else { throw .expired }
        guard let iat = (claims["iat"] as? NSNumber)?.doubleValue, iat <= now.timeIntervalSince1970 + Self.leeway else { throw .notYetValid }
        let verified = (claims["email_verified"] as? Bool) ?? ((claims["email_verified"] as? String) == "true")
        guard let sub = claims["sub"] as? String, !sub.isEmpty, sub.count <= 255, let email = claims["email"] as? String,
              !email.isEmpty else { throw .malformed }
        guard verified else { throw .emailNotVerified }
        return Identity(subject: sub, email: email, name: (claims["name"] as? String).map { String($0.prefix(100)) },
                        picture: (claims["picture"] as? String).flatMap(Profiles.picture))
    }

    /// Google's public keys by `kid`, fetched again (at most every 10 s) when asked for one it does not have.
    final class KeySet: Sendable {
        struct Key: Sendable { let n: [UInt8]; let e: [UInt8] }
        private let url: URL
        private let state = Mutex<(keys: [String: Key], fetchedAt: Date)>(([:], .distantPast))

        init(url: URL) { self.url = url }

        func key(_ kid: String) -> Key? {
            if let key = state.withLock({ $0.keys[kid] }) { return key }
            let stale = state.withLock { Date().timeIntervalSince($0.fetchedAt) > 10 }
            guard stale else { return nil }
            refresh()
            return state.withLock { $0.keys[kid] }
        }

        /// Fetches the key set now (false when it could not be had).
        @discardableResult
        func refresh() -> Bool {
            state.withLock { $0.fetchedAt = Date() }
            guard let (status, body) = Fetch.get(url, timeout: 5), status == 200 else { return false }
            struct Set: Decodable { struct K: Decodable { let kid: String; let kty: String; let n: String; let e: String }; let keys: [K] }
            guard let set = try? JSONDecoder().decode(Set.self, from: body) else { return false }
            var keys: [String: Key] = [:]
            for k in set.keys where k.kty == "RSA" {
                if let n = Base64URL.decode(k.n), let e = Base64URL.decode(k.e) { keys[k.kid] = Key(n: n, e: e) }
            }
            state.withLock { $0.keys = keys }
            return true
        }
    }
}
