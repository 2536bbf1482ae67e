import Crypto
import Foundation
import Identity
import Synchronization

/// Auth's signing keys and the access tokens they sign. The keys live in the database (each instance reads them again
/// every few seconds, so all follow a rotation), their seeds sealed with `SIGNING_KEY_ENCRYPTION_KEY` when it is set.
/// `auth rotate-keys` adds a key that activates later: it is published in the JWK set first, signs from its
/// activation on, and the key it replaces stays published and trusted until every token it signed has expired.
final class SigningKeys: Sendable {
    /// Access-token lifetime in seconds (the conventions' maximum, 15 minutes).
    static let accessLifetime = 900
    /// How long a replaced key stays published after its successor activated.
    static let retiredFor = TimeInterval(accessLifetime + 60)

    struct Key: Sendable {
        let kid: String
        let key: Ed25519PrivateKey
        let activatesAt: Date
    }

    /// The keys as arranged, and the published ones' public keys by key id (derived once per change, not per request:
    /// deriving them under the lock for every token made a lock convoy of `users/me`).
    private let state: Mutex<(signing: Key, published: [Key], verification: [String: [UInt8]])>

    /// Throws when there is no key at all (setup creates the first one before).
    init(_ keys: [Key], now: Date = Date()) throws {
        guard let arranged = Self.arrange(keys, now: now) else { throw CryptoError.invalidKey }
        state = Mutex(arranged)
    }

    /// Takes the keys read again from the database.
    func update(_ keys: [Key], now: Date = Date()) {
        if let arranged = Self.arrange(keys, now: now) { state.withLock { $0 = arranged } }
    }

    /// The signing key: the last one activated. Published: it, the keys still to activate, and the ones it replaced
    /// less than `retiredFor` ago.
    static func arrange(_ keys: [Key], now: Date) -> (signing: Key, published: [Key], verification: [String: [UInt8]])? {
        let sorted = keys.sorted { $0.activatesAt < $1.activatesAt }
        guard let signing = sorted.last(where: { $0.activatesAt <= now }) ?? sorted.first else { return nil }
        let published = sorted.enumerated().filter { i, key in
            guard key.activatesAt < signing.activatesAt else { return true }
            return sorted[i + 1].activatesAt.addingTimeInterval(retiredFor) > now
        }.map(\.element)
        return (signing, published, Dictionary(published.map { ($0.kid, $0.key.publicKey) }, uniquingKeysWith: { a, _ in a }))
    }

    /// The keys a token may be signed with now, by key id.
    var verificationKeys: [String: [UInt8]] {
        state.withLock { $0.verification }
    }

    /// The published keys, for `/v1/auth/jwks`.
    var jwks: JWKSet { JWKSet(keys: state.withLock { $0.published.map { JWK(kid: $0.kid, publicKey: $0.key.publicKey) } }) }

    /// Signs an access token for the session.
    func accessToken(user: UUID, session: UUID, now: Date = Date()) throws -> String {
        let signing = state.withLock { $0.signing }
        let iat = Int(now.timeIntervalSince1970)
        return try JWT.sign(AccessClaims(sub: user.lowercased, sid: session.lowercased, iat: iat,
                                         exp: iat + Self.accessLifetime), key: signing.key, kid: signing.kid)
    }

    /// Signs a stream ticket for the session: single-use, for a minute (see `StreamTickets`).
    func streamTicket(user: UUID, session: UUID, now: Date = Date()) throws -> String {
        let signing = state.withLock { $0.signing }
        let iat = Int(now.timeIntervalSince1970)
        return try JWT.sign(AccessClaims(sub: user.lowercased, sid: session.lowercased, iat: iat, exp: iat + JWT.maxTicketLifetime,
                                         aud: JWT.streamAudience, jti: UUID().lowercased), key: signing.key, kid: signing.kid)
    }
}
