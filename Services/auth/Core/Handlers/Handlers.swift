import Crypto
import Events
import Features
import Foundation
import HTTP
import Identity
import Models
import Postgres
import Web

/// The auth service's handlers: decode, validate, authorize, call storage, emit events, map the result.
struct AuthHandlers: Sendable {
    let pool: Pool
    let outbox: Outbox
    let idempotency: Idempotency
    let keys: SigningKeys
    let login: LoginThrottle
    /// Signs avatar URLs.
    let urls: MediaURLs
    /// Sign-in with Google, when it is on: it also re-authenticates a Google account that deletes itself.
    let google: GoogleSignIn?
    /// Sign in with Apple, when it is on: it also re-authenticates an Apple account that deletes itself.
    let apple: AppleSignIn?
    /// How long a deleted account waits before it is erased (`ACCOUNT_DELETION_GRACE_HOURS`).
    let deletionGrace: TimeInterval
    /// Where a person's export is gathered from.
    let exports: Exports
    /// Which images may be avatars (stories says).
    let avatars: Avatars
    /// The users of active sessions read lately (`GET /v1/users/me`); storage holds a user it is about to change.
    let current: CurrentUsers
    var storage: AuthStorage { AuthStorage(current: current) }
    /// Lookups of usernames nobody has: 20 within 15 minutes, then 429.
    let lookups = GuessThrottle(schema: "auth", table: "lookup_failures", limit: 20)
    /// A valid hash to verify against when the user does not exist, so timing does not tell: the hash of a random
    /// password nobody kept, written out so that no burst at start-up can leave it uncomputed.
    static let dummyHash = "$argon2id$v=19$m=19456,t=2,p=1$h59wgGI+IvXLPnOQj1GIkA$HHGOR5f0YqjQ09UPYCsJjLTuIl/MIzoQwko0gGWavp0"

    // MARK: Sign-up, login, refresh, logout

    func signup(_ context: Context<Void>, _ body: SignupBody) throws -> Response {
        let request = context.request
        let username = body.username.lowercased()
        let email = try Check.email(body.email)
        let fullName = body.fullName
        let hash = try PasswordHasher.hash(body.password)
        // A retry gets a session of its own: the table keeps the user id, never the tokens it handed out.
        let replay = Idempotency.Replay(keep: { response in
            Array(((try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any])
                .flatMap { ($0["user"] as? [String: Any])?["id"] as? String }?.utf8 ?? "".utf8)
        }) { [self] c, kept, status in
            guard let id = UUID(uuidString: String(decoding: kept, as: UTF8.self)), let user = try storage.user(c, id: id) else {
                throw HTTPError.conflict("The account this request created no longer exists.")
            }
            var session = try openSession(c, user, request)
            session.deviceToken = try storage.addDevice(c, user: user.id)
            return .json(session, status: status)
        }
        return try idempotency.run(request, caller: "anonymous", replay: replay) { c in
            // Only a proven address is taken: an unconfirmed sign-up's claim to it reserves nothing.
            guard try storage.userWithProven(c, email: email) == nil else { throw AccountError.emailTaken }
            let user = try storage.insertUser(c, username: username, email: email, fullName: fullName, passwordHash: hash)
            try proofs.requestVerification(c, user, app: request.clientApp)
            try outbox.add(UserRegistered(userId: user.id, username: user.username, email: user.email,
                                          fullName: user.fullName, avatarMediaId: nil, emailVerified: false,
                                          createdAt: user.createdAt),
                           subject: user.id.lowercased, on: c)
            var session = try openSession(c, user, request)
            session.deviceToken = try storage.addDevice(c, user: user.id)
            return .json(session, status: 201)
        }
    }

    /// Slows guessing without handing an attacker a lockout to aim (OWASP's guidance): a device the user signed in from
    /// before (`deviceToken`) is never slowed by others' failures (only by its own: ten of them and it is forgotten);
    /// otherwise an address is refused after `LOGIN_ADDRESS_MAX_FAILURES` failures in 15 minutes (high, since many
    /// users may share one address), and a username or email, after 10 failures, takes one attempt per 1, 2, 4 … 900
    /// seconds: counted by the name as typed (normalised), whether or not anyone has it, so that the 429 does not
    /// tell which names exist. The address is the peer's, or the client's in `X-Forwarded-For` through
    /// `TRUSTED_PROXIES` only. An email that several unconfirmed sign-ups gave signs in to the one whose password it is.
    func login(_ context: Context<Void>, _ body: LoginBody) throws -> Response {
        guard (body.username == nil) != (body.email == nil) else {
            throw HTTPError.validation("Give either username or email.", field: body.username == nil ? "username" : "email")
        }
        let identifier = (body.username ?? body.email ?? "").lowercased()
        guard identifier.count <= 254, body.password.utf8.count <= 1024 else { throw HTTPError.unauthenticated(Self.loginFailed) }
        let found = try pool.withConnection { try storage.usersForLogin($0, username: body.username, email: body.email) }
        let account = "login:" + identifier
        var device: String?, deviceOwner: UUID?
        if let token = body.deviceToken, token.utf8.count <= 64,
           let owner = try pool.withConnection({ c in try found.first { try storage.isDevice(c, token: token, of: $0.0.id) } })?.0.id {
            (device, deviceOwner) = (token, owner)
        }
        let client = device.map { "device:" + AuthStorage.hash($0) } ?? "ip:" + context.request.clientAddress(trustedProxies: login.trustedProxies)
        let recent = try pool.withConnection { try storage.recentFailures($0, account: account, client: client) }
        if let wait = login.wait(device: device != nil, recent) { throw HTTPError.rateLimited(retryAfter: wait) }
        if found.isEmpty { _ = try PasswordHasher.verify(body.password, encoded: Self.dummyHash) }  // as long as for a name someone has
        guard let user = try found.first(where: { try PasswordHasher.verify(body.password, encoded: $0.1) })?.0 else {
            try pool.withConnection { c in
                try storage.recordFailure(c, account: account, client: client)
                if let device, recent.client + 1 >= LoginThrottle.deviceFailures { try storage.forgetDevice(c, token: device) }
            }
            throw HTTPError.unauthenticated(Self.loginFailed)
        }
        return try pool.withTransaction { c in
            var session = try openSession(c, user, context.request)
            session.deviceToken = try (deviceOwner == user.id ? device : nil) ?? storage.addDevice(c, user: user.id)
            return .json(session)
        }
    }

    static let loginFailed = "The username, email or password is not correct."

    /// `user.updated`, with the profile as it is now.
    func announce(_ c: Connection, _ updated: UserRecord) throws {
        try outbox.add(UserUpdated(userId: updated.id, username: updated.username, email: updated.email,
                                   fullName: updated.fullName, avatarMediaId: updated.avatarMediaId,
                                   pictureUrl: updated.pictureUrl, phone: updated.phone, emailVerified: updated.emailVerified,
                                   updatedAt: updated.updatedAt),
                       subject: updated.id.lowercased, on: c)
    }

    func refresh(_ context: Context<Void>, _ body: RefreshBody) throws -> Response {
        guard body.refreshToken.utf8.count <= 256 else { throw HTTPError.unauthenticated("The refresh token is not valid.") }
        let response: Response? = try pool.withTransaction { c in
            switch try storage.useRefreshToken(c, body.refreshToken) {
            case .rotated(let session, let userId):
                guard let user = try storage.user(c, id: userId) else { return nil }
                try storage.touchSession(c, session)
                let refresh = try storage.issueRefreshToken(c, session: session)
                return .json(SessionView(user: UserView(user, urls: urls), accessToken: try keys.accessToken(user: userId, session: session),
                                             refreshToken: refresh, expiresIn: SigningKeys.accessLifetime))
            case .reused(let session, let user):
                // A rotated token came back: someone holds a stolen copy. End the whole session.
                if try storage.revokeSession(c, session, of: user, reason: "refresh_token_reuse") {
                    try emitRevoked(c, session: session, user: user, reason: .refreshTokenReuse)
                }
                return nil
            case .invalid:
                return nil
            }
        }
        guard let response else { throw HTTPError.unauthenticated("The refresh token is not valid.") }
        return response
    }

    func logout(_ context: Context<Caller>) throws -> Response {
        let caller = context.caller
        try pool.withTransaction { c in
            if try storage.revokeSession(c, caller.sessionId, of: caller.userId, reason: "logout") {
                try emitRevoked(c, session: caller.sessionId, user: caller.userId, reason: .logout)
            }
        }
        return .noContent
    }

    /// A ticket that opens one event stream of the caller's, once, within a minute (for `EventSource`).
    func streamTicket(_ context: Context<Caller>) throws -> Response {
        let caller = context.caller
        var response = Response.json(StreamTicketView(ticket: try keys.streamTicket(user: caller.userId, session: caller.sessionId)),
                                         status: 201)
        response.headers.append(("Cache-Control", "no-store"))
        return response
    }

    // MARK: The current user

    /// Routed without the authenticator's session check: the read checks it (a revoked session is a 401).
    func me(_ context: Context<Caller>) throws -> Response {
        let caller = context.caller
        if let user = current.user(caller.userId, session: caller.sessionId) { return .json(UserView(user, urls: urls)) }
        let ticket = current.ticket(for: caller.userId)
        guard let user = try pool.withConnection({ try storage.user($0, id: caller.userId, inActiveSession: caller.sessionId) }) else {
            throw HTTPError.unauthenticated()
        }
        if let ticket { current.keep(user, session: caller.sessionId, ticket: ticket) }
        return .json(UserView(user, urls: urls))
    }

    /// Someone by their exact username (case-insensitive), to start a direct chat or name a recipient: one person or
    /// 404, never a list; a caller who keeps asking for names nobody has is held back.
    func userByUsername(_ context: Context<Caller>) throws -> Response {
        let username = try context.parameters.require("username")
        return try lookups.attempt(pool, user: context.caller.userId, isFailure: { $0 as? AccountError == .notFound }) {
            guard username.count <= 32, let user = try pool.withConnection({ try storage.userByUsername($0, username) }) else {
                throw AccountError.notFound
            }
            return .json(PersonView(user, urls: urls))
        }
    }

    func updateMe(_ context: Context<Caller>, _ body: UpdateMeBody) throws -> Response {
        let caller = context.caller
        let fullName = body.fullName
        let email = try body.email.map(Check.email)
        let username = body.username?.lowercased()
        let avatar = body.avatarMediaId.value
        if let avatar { try avatars.require(avatar, of: caller.userId) }  // asked before the transaction: no row held meanwhile
        return try pool.withTransaction { c in
            guard var user = try storage.user(c, id: caller.userId) else { throw HTTPError.notFound() }
            let before = (user.username, user.email, user.fullName, user.avatarMediaId, user.phone, user.postalAddress)
            let pendingBefore = user.pendingEmail
            if let fullName { user.fullName = fullName }
            if let email {
                // A new address waits until the mail to it is answered (the one in force stays, and it reserves nothing
                // meanwhile); the address in force again, typed any way, ends the wait.
                if email.lowercased() == user.email.lowercased() { (user.email, user.pendingEmail) = (email, nil) } else { user.pendingEmail = email }
            }
            if let username { user.username = username }
            if body.avatarMediaId.isPresent { user.avatarMediaId = avatar }
            if body.phone.isPresent { user.phone = body.phone.value }
            if body.postalAddress.isPresent { user.postalAddress = body.postalAddress.value.flatMap { $0.isEmpty ? nil : $0 } }
            guard before != (user.username, user.email, user.fullName, user.avatarMediaId, user.phone, user.postalAddress)
                    || pendingBefore != user.pendingEmail else {
                return .json(UserView(user, urls: urls))
            }
            let updated = try storage.updateUser(c, user)
            try announce(c, updated)
            if let pending = updated.pendingEmail, pending.lowercased() != pendingBefore?.lowercased() {
                // A new address is proven by a mail to it, sent only when it changed.
                try proofs.requestVerification(c, updated, app: context.request.clientApp)
            }
            return .json(UserView(updated, urls: urls))
        }
    }

    func changePassword(_ context: Context<Caller>, _ body: ChangePasswordBody) throws -> Response {
        let caller = context.caller
        let newPassword = body.newPassword
        try reauthenticate(caller, password: body.currentPassword, field: "currentPassword")
        let hash = try PasswordHasher.hash(newPassword)
        try pool.withTransaction { c in
            try storage.setPassword(c, user: caller.userId, hash: hash)
            for session in try storage.revokeOtherSessions(c, user: caller.userId, keep: caller.sessionId, reason: "password_changed") {
                try emitRevoked(c, session: session, user: caller.userId, reason: .passwordChanged)
            }
        }
        return .noContent
    }

    /// `GET /v1/users/me/export`: everything the backend holds of me, as one JSON archive to download.
    func export(_ context: Context<Caller>) throws -> Response {
        let account = try pool.withConnection { try storage.export($0, context.caller.userId) }
        let archive = exports.archive(of: context.caller.userId, account: account)
        let body = try JSONSerialization.data(withJSONObject: archive, options: [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted])
        return Response(status: 200, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store"),
                                               ("Content-Disposition", "attachment; filename=\"export.json\"")], body: Array(body))
    }

    // MARK: Blocks

    /// `GET /v1/users/me/blocks`: the people I blocked.
    func blocks(_ context: Context<Caller>) throws -> Response {
        .json(ItemList(try pool.withConnection { try storage.blocked($0, by: context.caller.userId) }.map { PersonView($0, urls: urls) }))
    }

    /// `PUT /v1/users/me/blocks/{userId}`: blocks someone (again: nothing changes), announced by `user.blocked`.
    func block(_ context: Context<Caller>) throws -> Response {
        let caller = context.caller, other = try context.parameters.require("userId", as: UUID.self)
        guard other != caller.userId else { throw HTTPError.validation("You cannot block yourself.", field: "userId") }
        try pool.withTransaction { c in
            guard try storage.user(c, id: other) != nil else { throw HTTPError.notFound() }
            if try storage.block(c, caller.userId, other) {
                try outbox.add(UserBlocked(userId: caller.userId, blockedUserId: other, at: Date()),
                               subject: caller.userId.lowercased, on: c)
            }
        }
        return .noContent
    }

    /// `DELETE /v1/users/me/blocks/{userId}`: lifts a block (none: nothing changes), announced by `user.unblocked`.
    func unblock(_ context: Context<Caller>) throws -> Response {
        let caller = context.caller, other = try context.parameters.require("userId", as: UUID.self)
        try pool.withTransaction { c in
            if try storage.unblock(c, caller.userId, other) {
                try outbox.add(UserUnblocked(userId: caller.userId, blockedUserId: other, at: Date()),
                               subject: caller.userId.lowercased, on: c)
            }
        }
        return .noContent
    }

    /// `POST /v1/users/{id}/reports`: I report a person to the moderators.
    func reportPerson(_ context: Context<Caller>, _ body: ReportBody) throws -> Response {
        let caller = context.caller, other = try context.parameters.require("id", as: UUID.self)
        guard other != caller.userId else { throw HTTPError.validation("You cannot report yourself.", field: "id") }
        return try pool.withTransaction { c in
            guard try storage.user(c, id: other) != nil else { throw HTTPError.notFound() }
            return .json(ReportView(try Reports(schema: "auth").file(c, kind: "person", target: other, author: other, reporter: caller.userId,
                                                                     reason: body.reason, note: body.note)), status: 201)
        }
    }

    /// A reported person a moderator takes down: the account is suspended (it signs in no more), every session of
    /// it ends now, and `user.suspended` says so. What they wrote stays until it is reported itself.
    func suspend(_ c: Connection, _ report: ReportRecord) throws {
        guard try storage.suspend(c, report.targetId) else { return }
        for session in try storage.revokeOtherSessions(c, user: report.targetId, keep: Erasure.nobody, reason: "suspended") {
            try emitRevoked(c, session: session, user: report.targetId, reason: .suspended)
        }
        try outbox.add(UserSuspended(userId: report.targetId, reportId: report.id, suspendedAt: Date()),
                       subject: report.targetId.lowercased, on: c)
    }

    // MARK: Sessions and leaving

    /// `GET /v1/users/me/sessions`: where I am signed in.
    func sessions(_ context: Context<Caller>) throws -> Response {
        let caller = context.caller
        let sessions = try pool.withConnection { try storage.sessions($0, user: caller.userId) }
        return .json(ItemList(sessions.map { DeviceSessionView(session: $0, current: $0.id == caller.sessionId) }))
    }

    /// `DELETE /v1/users/me/sessions/{id}`: signs out one of my devices (this one too).
    func signOut(_ context: Context<Caller>) throws -> Response {
        let caller = context.caller, id = try context.parameters.require("id", as: UUID.self)
        try pool.withTransaction { c in
            guard try storage.revokeSession(c, id, of: caller.userId, reason: "logout") else { throw HTTPError.notFound() }
            try emitRevoked(c, session: id, user: caller.userId, reason: .logout)
        }
        return .noContent
    }

    /// `DELETE /v1/users/me/sessions`: signs out every device but this one.
    func signOutOthers(_ context: Context<Caller>) throws -> Response {
        let caller = context.caller
        try pool.withTransaction { c in
            for session in try storage.revokeOtherSessions(c, user: caller.userId, keep: caller.sessionId, reason: "logout") {
                try emitRevoked(c, session: session, user: caller.userId, reason: .logout)
            }
        }
        return .noContent
    }

    /// `DELETE /v1/users/me`: with the password (or, for a Google or Apple account, a fresh ID token of theirs) the
    /// account is scheduled for deletion after the grace period and every session ends now; its Apple refresh tokens
    /// are revoked now (Apple asks it when the person deletes their account). Signing in again before then keeps it;
    /// after it, `user.deleted` tells every service to erase what it holds.
    func deleteMe(_ context: Context<Caller>, _ body: DeleteAccountBody) throws -> Response {
        let caller = context.caller, user = caller.userId
        if let token = body.idToken, body.password == nil {
            guard try outsideUser(idToken: token, nonce: body.nonce) == user else {
                throw HTTPError(403, "forbidden", "That is not a Google or Apple sign-in of this account.", field: "idToken")
            }
        } else {
            guard let password = body.password else {
                throw HTTPError.validation("Give your password (or a Google or Apple ID token).", field: "password")
            }
            try reauthenticate(caller, password: password, field: "password")
        }
        let at = Date().addingTimeInterval(deletionGrace)
        try pool.withTransaction { c in
            try storage.scheduleDeletion(c, user: user, at: at)
            try storage.queueAppleRevocations(c, user: user)
            let ended = try storage.revokeOtherSessions(c, user: user, keep: caller.sessionId, reason: "account_deleted")
                + (try storage.revokeSession(c, caller.sessionId, of: user, reason: "account_deleted") ? [caller.sessionId] : [])
            for session in ended { try emitRevoked(c, session: session, user: user, reason: .accountDeleted) }
        }
        return .json(DeletionView(deletesAt: at), status: 202)
    }

    /// Erases up to 50 accounts whose grace period is over, each announced by `user.deleted`.
    func eraseDueAccounts() throws {
        try pool.withTransaction { c in
            for user in try storage.dueDeletions(c, limit: 50) {
                try storage.queueAppleRevocations(c, user: user)  // normally none left since DELETE /v1/users/me: never erased unrevoked
                try storage.deleteUser(c, user)
                try outbox.add(UserDeleted(userId: user, deletedAt: Date()), subject: user.lowercased, on: c)
                try Reports(schema: "auth").forget(user, on: c)
                try Erasure.forget(user, schema: "auth", on: c)
            }
        }
    }

    func jwks(_ context: Context<Void>) throws -> Response {
        var response = Response.json(keys.jwks)
        response.headers.append(("Cache-Control", "public, max-age=300"))
        return response
    }

    /// For the services that verify tokens themselves: every session revoked while one of its tokens may live, or
    /// only those revoked from `since` on (what a service polls while its broker is away).
    func revokedSessions(_ context: Context<Void>) throws -> Response {
        let since = max(Date().addingTimeInterval(-RevokedSessionList.horizon),
                        context.request.query["since"].flatMap(Timestamp.parse) ?? .distantPast)
        let sessions = try pool.withConnection { try storage.revokedSessions($0, since: since) }
        return .json(RevokedSessionList(sessions: sessions.map {
            .init(sessionId: $0.id.lowercased, revokedAt: Timestamp.format($0.at))
        }))
    }

    // MARK: Helpers

    /// The signed-in caller proves it is them with their password (`field` names it when it is wrong): failures are
    /// counted and slowed as logins are.
    private func reauthenticate(_ caller: Caller, password: String, field: String) throws {
        let account = "user:" + caller.userId.lowercased
        let client = "session:" + caller.sessionId.lowercased
        let recent = try pool.withConnection { try storage.recentFailures($0, account: account, client: client) }
        if let wait = login.wait(device: false, recent) { throw HTTPError.rateLimited(retryAfter: wait) }
        guard let hash = try pool.withConnection({ try storage.passwordHash($0, user: caller.userId) }) else { throw HTTPError.notFound() }
        guard password.utf8.count <= 1024, try PasswordHasher.verify(password, encoded: hash) else {
            try pool.withConnection { try storage.recordFailure($0, account: account, client: client) }
            throw HTTPError(403, "forbidden", "The password is not correct.", field: field)
        }
    }

    /// A new session for `user` signing in on the device `request` came from: signing in keeps an account whose
    /// deletion was pending.
    func openSession(_ c: Connection, _ user: UserRecord, _ request: Request) throws -> SessionView {
        guard user.suspendedAt == nil else { throw HTTPError(403, "forbidden", "This account is suspended.") }
        _ = try storage.cancelDeletion(c, user: user.id)
        let device = request.header("user-agent").map { String($0.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(200)) }
        let (session, refresh) = try storage.createSession(c, user: user.id, device: device)
        return SessionView(user: UserView(user, urls: urls), accessToken: try keys.accessToken(user: user.id, session: session),
                           refreshToken: refresh, expiresIn: SigningKeys.accessLifetime)
    }

    func emitRevoked(_ c: Connection, session: UUID, user: UUID, reason: RevocationReason) throws {
        try outbox.add(SessionRevoked(sessionId: session, userId: user, reason: reason,
                                      revokedAt: Date()),
                       subject: user.lowercased, on: c)
    }
}
