import Foundation
import HTTP
import Postgres
import ServiceKit

/// Auth checks its tokens against its own key and its own sessions table, so a logout takes effect at once here.
struct SessionAuthenticator: Authenticator {
    let keys: SigningKeys
    let pool: Pool
    let verified = VerifiedTokens()
    /// False for a route whose handler checks the session itself in the query it makes anyway (`GET
    /// /v1/users/me`, the hot read: one round trip instead of two).
    var checksSession = true

    /// This authenticator for a handler that checks the session in its own query.
    var leavingTheSessionToTheHandler: SessionAuthenticator {
        var copy = self
        copy.checksSession = false
        return copy
    }

    /// The signature and expiry; the session is checked with the body, by `authenticate`.
    func checkHead(_ request: Request) throws {
        guard (try? verified.caller(try bearerToken(request), keys: keys.verificationKeys)) != nil else { throw HTTPError.unauthenticated() }
    }

    func authenticate(_ request: Request) throws -> Caller {
        let token = try bearerToken(request)
        guard let caller = try? verified.caller(token, keys: keys.verificationKeys) else { throw HTTPError.unauthenticated() }
        if checksSession {
            guard try pool.withConnection({
                try AuthStorage().isSessionActive($0, session: caller.sessionId, user: caller.userId)
            }) else {
                throw HTTPError.unauthenticated()
            }
        }
        return caller
    }
}
