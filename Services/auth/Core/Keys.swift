import Crypto
import Foundation
import HTTP
import Postgres
import ServiceKit

/// Auth's signing key (kept in the database, so it survives restarts) and its token issuing and checking.
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

/// Auth checks its tokens against its own key and its own sessions table, so a logout takes effect at once here.
struct SessionAuthenticator: Authenticator {
    let keys: SigningKeys
    let pool: Pool
    let verified = VerifiedTokens()

    func authenticate(_ request: Request) throws -> Caller {
        let token = try bearerToken(request)
        guard let claims = try? verified.verify(token, keys: [keys.kid: keys.key.publicKey]),
              let user = UUID(uuidString: claims.sub), let session = UUID(uuidString: claims.sid) else {
            throw HTTPError.unauthenticated()
        }
        guard try pool.withConnection({ try AuthStorage().isSessionActive($0, session: session, user: user) }) else {
            throw HTTPError.unauthenticated()
        }
        return Caller(userId: user, sessionId: session)
    }
}
