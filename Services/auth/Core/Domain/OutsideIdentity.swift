import Crypto
import Foundation
import HTTP
import Synchronization

/// Someone an outside provider (Google, Apple) vouches for: its own id of them and, when it gave one, an address it
/// proved. The one rule for linking them to an account is `AuthHandlers.signIn(_:_:after:)`.
struct OutsideIdentity: Sendable {
    enum Provider: String, Sendable {
        case google, apple

        /// The table of its links, written into statements as it is: one of these two names, never input.
        var table: String { "auth.\(rawValue)_accounts" }
    }

    let provider: Provider
    /// The provider's id of them (`sub`), stable across their sign-ins.
    let subject: String
    /// An address the provider proved is theirs (nil when it did not give one: Apple's later sign-ins).
    let email: String?
    /// The name for an account made now (Google's `name`; for Apple, what the app sent on the first sign-in).
    let name: String?
    /// A picture hosted by the provider (Google's).
    let picture: String?
}

/// Why an outside provider's ID token was refused (the client is told only that it was).
enum TokenRefused: Error, Equatable {
    case malformed, algorithm, unknownKey, signature, issuer, audience, expired, notYetValid, emailNotVerified, nonce
}

/// A provider's RS256 public keys by `kid` (its JWK set at `url`, fetched again, at most every 10 s, when a token
/// names a key it does not have: the provider rotated).
final class ProviderKeySet: Sendable {
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
        struct Set: Decodable { struct K: Decodable { let kid: String; let kty: String; let n: String?; let e: String? }; let keys: [K] }
        guard let set = try? JSONDecoder().decode(Set.self, from: body) else { return false }
        var keys: [String: Key] = [:]
        for k in set.keys.prefix(50) where k.kty == "RSA" {
            if let n = k.n.flatMap(Base64URL.decode), let e = k.e.flatMap(Base64URL.decode) { keys[k.kid] = Key(n: n, e: e) }
        }
        state.withLock { $0.keys = keys }
        return true
    }

    /// The claims of `token` (a compact JWS of at most 8 KiB) when it is signed RS256 by one of these keys; the
    /// claims themselves are the caller's to check.
    func verifiedClaims(_ token: String) throws(TokenRefused) -> [String: Any] {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        struct Header: Decodable { let alg: String; let kid: String? }
        guard token.utf8.count <= 8192, parts.count == 3, let headerBytes = Base64URL.decode(parts[0]),
              let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)),
              let payload = Base64URL.decode(parts[1]), let signature = Base64URL.decode(parts[2]) else { throw .malformed }
        guard header.alg == "RS256" else { throw .algorithm }
        guard let kid = header.kid, let key = key(kid) else { throw .unknownKey }
        let signed = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard rs256Verify(modulus: key.n, exponent: key.e, message: signed, signature: signature) else { throw .signature }
        guard let claims = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] else { throw .malformed }
        return claims
    }
}

/// The checks every OpenID Connect ID token takes, on its claims.
enum IDTokenClaims {
    static let leeway = 60.0

    /// `aud` (a string or a list) names one of `clientIds`; returns it.
    static func audience(_ claims: [String: Any], among clientIds: Set<String>) throws(TokenRefused) -> String {
        let audiences = (claims["aud"] as? String).map { [$0] } ?? (claims["aud"] as? [String] ?? [])
        guard let aud = audiences.first(where: clientIds.contains) else { throw .audience }
        return aud
    }

    /// `exp` not past and `iat` not ahead, with a minute of leeway for clocks.
    static func times(_ claims: [String: Any], now: Date) throws(TokenRefused) {
        guard let exp = (claims["exp"] as? NSNumber)?.doubleValue, exp > now.timeIntervalSince1970 - leeway else { throw .expired }
        guard let iat = (claims["iat"] as? NSNumber)?.doubleValue, iat <= now.timeIntervalSince1970 + leeway else { throw .notYetValid }
    }

    /// A claim that is true as a JSON boolean or as the string "true" (Apple writes both).
    static func flag(_ claims: [String: Any], _ name: String) -> Bool {
        (claims[name] as? Bool) ?? ((claims[name] as? String) == "true")
    }

    /// `sub`: present, at most 255 characters.
    static func subject(_ claims: [String: Any]) throws(TokenRefused) -> String {
        guard let sub = claims["sub"] as? String, !sub.isEmpty, sub.count <= 255 else { throw .malformed }
        return sub
    }
}
