import Crypto
import Foundation
import HTTP
import Models
import Postgres
import Runtime
import Web

/// Signing in with an outside identity (Google, Apple): each provider verifies its token its own way, then one rule
/// finds, links or creates the account.
extension AuthHandlers {
    /// `POST /v1/auth/google`: the Google ID token's identity signed in by `signIn`, its picture kept.
    func google(_ context: Context<Void>, _ body: GoogleBody, _ google: GoogleSignIn) throws -> Response {
        let identity: OutsideIdentity
        do { identity = try google.verify(body.idToken) } catch {
            throw HTTPError.unauthenticated("The Google ID token is not valid.")
        }
        return try signIn(context.request, identity) { c, user in try picture(c, user, identity) }
    }

    /// `POST /v1/auth/apple`: the Apple identity token's identity signed in by `signIn`, with the name the app sent
    /// for an account made now (Apple gives it to the app once, never in the token). The first time (or the first since
    /// the token was revoked), the authorization code is exchanged for a refresh token, kept for the revocation that
    /// deleting the account makes.
    func apple(_ context: Context<Void>, _ body: AppleBody, _ apple: AppleSignIn) throws -> Response {
        let verified: AppleSignIn.Identity
        do { verified = try apple.verify(body.idToken, nonce: body.nonce) } catch {
            throw HTTPError.unauthenticated("The Apple identity token is not valid.")
        }
        var refresh: (bytes: [UInt8], sealed: Bool)?
        if try !pool.withConnection({ try storage.holdsAppleToken($0, subject: verified.subject) }) {
            switch apple.exchange(code: body.authorizationCode, for: verified) {
            case .refreshToken(let token): refresh = try apple.seal(token)
            case .refused: throw HTTPError.unauthenticated("The Apple authorization code is not valid.")
            case .unavailable: throw HTTPError.unavailable(retryAfter: 30)  // why is logged, not the client's to know
            }
        }
        let identity = OutsideIdentity(provider: .apple, subject: verified.subject, email: verified.email, name: body.name, picture: nil)
        return try signIn(context.request, identity) { c, user in
            if let refresh { try storage.keepAppleToken(c, subject: verified.subject, clientId: verified.clientId, token: refresh) }
            return user
        }
    }

    /// The one rule for an outside identity (docs/privacy.md, "Addresses"): the user it is linked to; else the user who
    /// proved the same address, linked now; else a new account of its own (201, `user.registered`), with the address
    /// proven. An account whose sign-up gave the address without proving it is never linked: it may be anyone's; it
    /// keeps its username and password, and its claim to the address ends here (it can no longer be proven, nor sign
    /// in or reset by it). `after` runs on the user signing in, in the same transaction (what the provider adds).
    func signIn(_ request: Request, _ identity: OutsideIdentity,
                after: (Connection, UserRecord) throws -> UserRecord) throws -> Response {
        let unusable = try PasswordHasher.hash(Base64URL.encode(secureRandomBytes(32)))  // signs in with the provider only
        return try pool.withTransaction { c in
            if let user = try storage.linkedUser(c, identity.provider, subject: identity.subject) {
                return .json(try openSession(c, try after(c, user), request))
            }
            guard let address = identity.email else {
                // Apple tells the address on the first sign-in only: an app that did not ask for it has no account here.
                throw HTTPError(401, "unauthenticated", "The identity token carries no e-mail address: the app must ask for it (the email scope).")
            }
            if let user = try storage.userWithProven(c, email: address) {
                try storage.link(c, identity.provider, subject: identity.subject, user: user.id)
                return .json(try openSession(c, try after(c, user), request))
            }
            let email = try Check.email(address)
            let base = String(email.split(separator: "@")[0].lowercased().filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == ".") }
                .prefix(24))
            var username = base.count >= 3 ? base : "user"
            while try storage.usernameTaken(c, username) { username = String(base.prefix(24)) + "_" + String(Int.random(in: 1000...9_999_999)) }
            let name = identity.name.flatMap { $0.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty ? nil : $0 } ?? username
            var user = try storage.insertUser(c, username: username, email: email, fullName: name, passwordHash: unusable,
                                              pictureUrl: identity.picture, emailVerified: true)  // the provider proved it
            try storage.link(c, identity.provider, subject: identity.subject, user: user.id)
            user = try after(c, user)
            try outbox.add(UserRegistered(userId: user.id, username: user.username, email: user.email, fullName: user.fullName,
                                          avatarMediaId: nil, pictureUrl: user.pictureUrl, emailVerified: true,
                                          createdAt: user.createdAt),
                           subject: user.id.lowercased, on: c)
            return .json(try openSession(c, user, request), status: 201)
        }
    }

    /// The user with the Google picture this sign-in brought, kept (and announced) when it changed.
    private func picture(_ c: Connection, _ user: UserRecord, _ identity: OutsideIdentity) throws -> UserRecord {
        guard let picture = identity.picture, picture != user.pictureUrl else { return user }
        var changed = user
        changed.pictureUrl = picture
        let updated = try storage.updateUser(c, changed)
        try announce(c, updated)
        return updated
    }

    /// The user a fresh outside ID token (Google's, or Apple's with its raw `nonce`) signs in, to re-authenticate one
    /// who deletes their account; nil when it signs in nobody.
    func outsideUser(idToken: String, nonce: String?) throws -> UUID? {
        if let google, let identity = try? google.verify(idToken) {
            return try pool.withConnection { try storage.linkedUser($0, .google, subject: identity.subject)?.id }
        }
        if let apple, let nonce, let identity = try? apple.verify(idToken, nonce: nonce) {
            return try pool.withConnection { try storage.linkedUser($0, .apple, subject: identity.subject)?.id }
        }
        return nil
    }

    /// Makes the Apple revocations that are due (deleted accounts' refresh tokens): one Apple confirms is done; one it
    /// does not is tried again later (`claimAppleRevocations`), never dropped.
    func revokeAppleTokens(_ apple: AppleSignIn) throws {
        let due = try pool.withTransaction { try storage.claimAppleRevocations($0, limit: 20) }
        var unopened = 0
        for revocation in due {
            guard let token = apple.open(revocation.token, sealed: revocation.sealed) else { unopened += 1; continue }
            if apple.revoke(refreshToken: token, clientId: revocation.clientId) {
                try pool.withConnection { try storage.revokedAppleToken($0, id: revocation.id) }
            }
        }
        if unopened > 0 {
            throw ConfigError(variable: "SIGNING_KEY_ENCRYPTION_KEY",
                              problem: "does not open \(unopened) sealed Apple refresh token(s) waiting to be revoked")
        }
    }
}
