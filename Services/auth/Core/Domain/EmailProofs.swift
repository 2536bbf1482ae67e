import Events
import Foundation
import HTTP
import Models
import Postgres

/// Proving an e-mail address and setting a forgotten password, by single-use tokens only a mail carries. auth issues
/// them and announces them (`user.email_verification_requested`, `user.password_reset_requested`) for the
/// notification service to deliver: it sends no mail itself. A newer token of a kind retires the older one.
struct EmailProofs: Sendable {
    let storage: AuthStorage
    let outbox: Outbox
    /// `user.updated` for a user whose address became proven.
    let announce: @Sendable (Connection, UserRecord) throws -> Void

    static let verificationLifetime: TimeInterval = 24 * 3600
    static let resetLifetime: TimeInterval = 30 * 60
    /// Mails to one address within an hour: more are not sent, and the latest mail's link still works, so that
    /// nobody can flood a mailbox nor keep its owner from the link (the answer does not change: nothing to probe).
    static let mailsPerAddress = 5
    /// Reset requests from one client within an hour; then 429.
    static let requestsPerClient = 30

    /// The address a verification mail of `user`'s goes to: the one they changed to, else their unproven one.
    static func unproven(_ user: UserRecord) -> String? { user.pendingEmail ?? (user.emailVerified ? nil : user.email) }

    /// Asks for a mail proving `user`'s unproven address (after sign-up, a changed address, or their asking again);
    /// `app`: the app the request came from, which the mail speaks as (`ClientApp`).
    func requestVerification(_ c: Connection, _ user: UserRecord, app: String? = nil) throws {
        guard let email = Self.unproven(user), try mayMail(c, email) else { return }
        let token = try storage.issueEmailToken(c, user: user.id, purpose: "verify", email: email, lifetime: Self.verificationLifetime)
        try outbox.add(EmailVerificationRequested(userId: user.id, email: email, token: token,
                                                  expiresAt: Date().addingTimeInterval(Self.verificationLifetime), app: app),
                       subject: user.id.lowercased, on: c)
    }

    /// The address the token was sent to is proven, if it is still the one the account waits to prove, and is in force
    /// from now on (announced in `user.updated`); nil for a token that is not (any longer) good, or for an address
    /// someone else proved first (theirs: this claim to it ends).
    func verify(_ c: Connection, token: String) throws -> UserRecord? {
        guard token.utf8.count <= 64, let found = try storage.useEmailToken(c, token, purpose: "verify"),
              let user = try storage.user(c, id: found.userId), Self.unproven(user)?.lowercased() == found.email.lowercased() else { return nil }
        return try proven(c, user, found.email)
    }

    /// "Forgot password": a reset mail for the account with `email`, if there is one that may sign in; the same
    /// answer either way. `client` is the caller's address, `app` the app it asked from (the mail speaks as it).
    func requestReset(_ c: Connection, email: String, client: String, app: String? = nil) throws {
        guard try storage.recentMailRequests(c, key: "reset-client:" + client) < Self.requestsPerClient else {
            throw HTTPError.rateLimited(retryAfter: 3600)
        }
        try storage.recordMailRequest(c, key: "reset-client:" + client)
        // The account that proved the address; else each unconfirmed sign-up that gave it (the mail names which).
        let users = try storage.userWithProven(c, email: email).map { [$0] } ?? storage.usersClaiming(c, email: email)
        for user in users where user.suspendedAt == nil {
            guard try mayMail(c, user.email) else { return }
            let token = try storage.issueEmailToken(c, user: user.id, purpose: "reset", email: user.email, lifetime: Self.resetLifetime)
            try outbox.add(PasswordResetRequested(userId: user.id, email: user.email, token: token,
                                                  expiresAt: Date().addingTimeInterval(Self.resetLifetime), app: app),
                           subject: user.id.lowercased, on: c)
        }
    }

    /// Whether `token` would be taken for `purpose` now (unused, unexpired), without using it: a page shows its form
    /// only for a link that still works, and a form posted with one that does not costs no password hashing.
    func usable(_ c: Connection, token: String, purpose: String) throws -> Bool {
        guard !token.isEmpty, token.utf8.count <= 64 else { return false }
        return try storage.isUsableEmailToken(c, token, purpose: purpose)
    }

    /// Sets the password of the account the token was sent for; the user, or nil for a token that is not good (or an
    /// unconfirmed sign-up's, when someone else proved the address since). The caller ends every session of theirs.
    func reset(_ c: Connection, token: String, passwordHash: String) throws -> UserRecord? {
        guard token.utf8.count <= 64, let found = try storage.useEmailToken(c, token, purpose: "reset"),
              let user = try storage.user(c, id: found.userId), user.email.lowercased() == found.email.lowercased() else { return nil }
        guard try user.emailVerified || storage.userWithProven(c, email: user.email) == nil else { return nil }
        try storage.setPassword(c, user: user.id, hash: passwordHash)
        // Whoever held the account before may have set an address of theirs to prove: it goes with their sessions.
        try storage.retireEmailTokens(c, user: user.id, purpose: "verify")
        return try proven(c, user, user.email, dropPending: true)  // the mail reached them: the address is theirs
    }

    /// `user` with `email` proven theirs and in force from now on (a change waiting for it ends, or any with
    /// `dropPending`), announced when that is news; nil when someone else proved it first.
    private func proven(_ c: Connection, _ user: UserRecord, _ email: String, dropPending: Bool = false) throws -> UserRecord? {
        if let holder = try storage.userWithProven(c, email: email), holder.id != user.id { return nil }
        var changed = user
        (changed.email, changed.emailVerified) = (email, true)
        if dropPending || changed.pendingEmail?.lowercased() == email.lowercased() { changed.pendingEmail = nil }
        guard (changed.email, changed.emailVerified, changed.pendingEmail) != (user.email, user.emailVerified, user.pendingEmail) else { return user }
        let updated = try storage.updateUser(c, changed)
        try announce(c, updated)
        return updated
    }

    /// Whether another mail may go to `address` this hour (counted when it may).
    private func mayMail(_ c: Connection, _ address: String) throws -> Bool {
        let key = "mail-address:" + address.lowercased()
        guard try storage.recentMailRequests(c, key: key) < Self.mailsPerAddress else { return false }
        try storage.recordMailRequest(c, key: key)
        return true
    }
}
