import Crypto
import Features
import Foundation
import HTTP
import Identity
import Postgres
import Web

/// Proving an address and resetting a forgotten password (`EmailProofs`): what the apps and the mails' links call.
extension AuthHandlers {
    var proofs: EmailProofs { EmailProofs(storage: storage, outbox: outbox, announce: announce) }

    static let badLink = "This link has expired or was used already: ask for a new one."

    /// `POST /v1/auth/password-reset`: a reset mail for the account with that address, if there is one; 202 whether
    /// or not there is.
    func requestPasswordReset(_ context: Context<Void>, _ body: PasswordResetBody) throws -> Response {
        let client = context.request.clientAddress(trustedProxies: login.trustedProxies)
        try pool.withTransaction {
            try proofs.requestReset($0, email: body.email.trimmingCharacters(in: .whitespaces), client: client, app: context.request.clientApp)
        }
        return Response(status: 202)
    }

    /// `POST /v1/auth/password-reset/confirm`: the new password, with the token the mail's link carried; every session
    /// of the account ends.
    func resetPassword(_ context: Context<Void>, _ body: NewPasswordBody) throws -> Response {
        guard try setPassword(token: body.token, to: body.newPassword) else { throw HTTPError.validation(Self.badLink, field: "token") }
        return .noContent
    }

    /// The reset: the account the token was mailed for gets `password`, and every session of it ends; false for a
    /// token that is not (any longer) good. Shared by the apps' route and the page's form.
    func setPassword(token: String, to password: String) throws -> Bool {
        let hash = try PasswordHasher.hash(password)
        do {
            try pool.withTransaction { c in
                // Thrown, so that nothing of a refused reset stays (the token included).
                guard let user = try proofs.reset(c, token: token, passwordHash: hash) else { throw HTTPError.validation(Self.badLink, field: "token") }
                for session in try storage.revokeOtherSessions(c, user: user.id, keep: Erasure.nobody, reason: "password_reset") {
                    try emitRevoked(c, session: session, user: user.id, reason: .passwordReset)
                }
            }
            return true
        } catch let error as HTTPError where error.field == "token" {
            return false
        }
    }

    /// `POST /v1/auth/email-verification`: the address the token was mailed to is proven (an app's screen).
    func verifyEmail(_ context: Context<Void>, _ body: EmailTokenBody) throws -> Response {
        guard try pool.withTransaction({ try proofs.verify($0, token: body.token) }) != nil else {
            throw HTTPError.validation(Self.badLink, field: "token")
        }
        return .noContent
    }

    /// `GET /v1/auth/email-verification?token=`: the mail's link, opened in a browser: a page that says how it went
    /// (200 either way: it is for a person to read).
    func verifyEmailLink(_ context: Context<Void>) throws -> Response {
        let token = context.request.query["token"] ?? ""
        guard token.utf8.count <= 64 else { throw HTTPError.validation("token is not one a mail carried.", field: "token") }
        let user = try pool.withTransaction { try proofs.verify($0, token: token) }
        let (title, text) = user == nil ? ("This link no longer works", Self.badLink)
            : ("Address confirmed", "Thank you: your e-mail address is confirmed. You can close this page.")
        return HTML.page(title, "<p>\(text)</p>")
    }

    /// `POST /v1/users/me/email-verification`: another mail proving my address (the one I changed to, if any).
    func resendVerification(_ context: Context<Caller>) throws -> Response {
        try pool.withTransaction { c in
            guard let user = try storage.user(c, id: context.caller.userId) else { throw HTTPError.notFound() }
            guard EmailProofs.unproven(user) != nil else { throw HTTPError.conflict("Your address is confirmed already.") }
            try proofs.requestVerification(c, user, app: context.request.clientApp)
        }
        return Response(status: 202)
    }
}
