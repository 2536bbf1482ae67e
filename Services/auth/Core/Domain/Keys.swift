import Crypto
import Foundation
import ServiceKit

/// Auth's signing key (kept in the database, so it survives restarts) and the access tokens it signs.
struct SigningKeys: Sendable {
    /// Access-token lifetime in seconds (the conventions' maximum, 15 minutes).
    static let accessLifetime = 900
    let kid: String
    let key: Ed25519PrivateKey

    /// Signs an access token for the session.
    func accessToken(user: UUID, session: UUID, now: Date = Date()) throws -> String {
        let iat = Int(now.timeIntervalSince1970)
        return try JWT.sign(AccessClaims(sub: user.lowercased, sid: session.lowercased, iat: iat,
                                         exp: iat + Self.accessLifetime), key: key, kid: kid)
    }
}
