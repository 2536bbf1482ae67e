import Foundation
import HTTP
import Identity
import Postgres
import Web

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
    func checkHead(_ request: Request) throws { _ = try signedCaller(request) }

    func authenticate(_ request: Request) throws -> Caller {
        let caller = try signedCaller(request)
        if checksSession {
            guard try pool.withConnection({
                try AuthStorage().isSessionActive($0, session: caller.sessionId, user: caller.userId)
            }) else {
                throw HTTPError.unauthenticated()
            }
        }
        return caller
    }

    /// The caller a token signed by auth's keys names, or a 401.
    private func signedCaller(_ request: Request) throws -> Caller {
        guard let caller = try? verified.caller(try bearerToken(request), keys: keys.verificationKeys) else { throw HTTPError.unauthenticated() }
        return caller
    }
}
