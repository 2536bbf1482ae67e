import Crypto
import Foundation
import Models
import Postgres
import Runtime

/// A user row.
struct UserRecord {
    let id: UUID
    var username: String
    var email: String
    var fullName: String
    var avatarMediaId: UUID?
    /// Google's picture of them, from their last sign-in with Google.
    var pictureUrl: String?
    /// For Mesajem: where to reach them, for themselves to see and change.
    var phone: String?
    var postalAddress: String?
    /// Whether they proved the e-mail address is theirs (Google did, for an account it signs in).
    var emailVerified: Bool
    /// An address they changed to and have not proven yet: `email` stays in force until they do.
    var pendingEmail: String?
    /// When a moderator suspended the account after a report (it signs in no more).
    var suspendedAt: Date?
    let createdAt: Date
    var updatedAt: Date

    init(_ row: Row) throws {
        id = try row["id"]; username = try row["username"]; email = try row["email"]
        fullName = try row["full_name"]; avatarMediaId = try row.decode("avatar_media_id"); pictureUrl = try row.decode("picture_url")
        phone = try row.decode("phone"); postalAddress = try row.decode("postal_address"); emailVerified = try row["email_verified"]
        pendingEmail = try row.decode("pending_email")
        suspendedAt = try row.decode("suspended_at"); createdAt = try row["created_at"]; updatedAt = try row["updated_at"]
    }

    static let columns = """
        id, username, email, full_name, avatar_media_id, picture_url, phone, postal_address, email_verified, pending_email, suspended_at,
        created_at, updated_at
        """
}

/// A signed-in device: a session and what the client called itself when it began.
struct SessionRecord {
    let id: UUID
    let device: String?
    let createdAt: Date
    let lastUsedAt: Date
}

/// What became of a presented refresh token.
enum RefreshOutcome {
    case rotated(session: UUID, user: UUID)
    case reused(session: UUID, user: UUID)
    case invalid
}

/// The auth schema's SQL. Every method takes the connection of the caller's transaction.
struct AuthStorage {
    /// Held before each change that `GET /v1/users/me` shows, so that its copy is not served past the commit.
    var current: CurrentUsers? = nil
    /// How long a refresh token is valid.
    static let refreshLifetimeDays = 30

    // MARK: Users

    func insertUser(_ c: Connection, username: String, email: String, fullName: String, passwordHash: String,
                    pictureUrl: String? = nil, emailVerified: Bool = false) throws -> UserRecord {
        do {
            let row = try c.first("""
                INSERT INTO auth.users (id, username, email, full_name, password_hash, picture_url, email_verified)
                VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING \(UserRecord.columns)
                """, [UUID.v7(), username, email, fullName, passwordHash, pictureUrl, emailVerified])
            return try UserRecord(row!)
        } catch let error as PostgresError where error.kind == .uniqueViolation {
            throw Self.duplicate(error)
        }
    }

    static func duplicate(_ error: PostgresError) -> AccountError {
        error.constraint == "users_verified_email_unique" ? .emailTaken : .usernameTaken
    }

    func user(_ c: Connection, id: UUID) throws -> UserRecord? {
        try c.first("SELECT \(UserRecord.columns) FROM auth.users WHERE id = $1", [id]).map(UserRecord.init)
    }

    /// The user, if `session` is theirs and not revoked: the session check and the read in one round trip.
    func user(_ c: Connection, id: UUID, inActiveSession session: UUID) throws -> UserRecord? {
        try c.first("""
            SELECT \(UserRecord.columns) FROM auth.users WHERE id = $1
            AND EXISTS (SELECT 1 FROM auth.sessions WHERE id = $2 AND user_id = $1 AND revoked_at IS NULL)
            """, [id, session]).map(UserRecord.init)
    }

    /// The users and password hashes a login by username or email (case-insensitive) may be for: by username, one; by
    /// email, the account that proved the address, or else the unconfirmed sign-ups that gave it (a few, newest first).
    func usersForLogin(_ c: Connection, username: String?, email: String?) throws -> [(UserRecord, String)] {
        let rows = username != nil
            ? try c.rows("SELECT \(UserRecord.columns), password_hash FROM auth.users WHERE lower(username) = lower($1)", [username!])
            : try c.rows("""
                SELECT \(UserRecord.columns), password_hash FROM auth.users WHERE lower(email) = lower($1)
                ORDER BY email_verified DESC, created_at DESC LIMIT \(Self.claimsPerAddress)
                """, [email ?? ""])
        let found = try rows.map { (try UserRecord($0), try $0["password_hash", as: String.self]) }
        return found.first?.0.emailVerified == true ? [found[0]] : found
    }

    /// Unconfirmed sign-ups with one address that a login by it or a reset mail to it tries.
    static let claimsPerAddress = 3

    /// The user with `username` (case-insensitive).
    func userByUsername(_ c: Connection, _ username: String) throws -> UserRecord? {
        try c.first("SELECT \(UserRecord.columns) FROM auth.users WHERE lower(username) = lower($1)", [username]).map(UserRecord.init)
    }

    /// The user who proved `email` is theirs (case-insensitive): at most one.
    func userWithProven(_ c: Connection, email: String) throws -> UserRecord? {
        try c.first("SELECT \(UserRecord.columns) FROM auth.users WHERE lower(email) = lower($1) AND email_verified", [email])
            .map(UserRecord.init)
    }

    /// The users whose sign-up gave `email` and who have not proven it (a few, newest first).
    func usersClaiming(_ c: Connection, email: String) throws -> [UserRecord] {
        try c.rows("""
            SELECT \(UserRecord.columns) FROM auth.users WHERE lower(email) = lower($1) AND NOT email_verified
            ORDER BY created_at DESC LIMIT \(Self.claimsPerAddress)
            """, [email]).map(UserRecord.init)
    }

    func usernameTaken(_ c: Connection, _ name: String) throws -> Bool {
        try c.first("SELECT 1 AS one FROM auth.users WHERE lower(username) = lower($1)", [name]) != nil
    }

    func passwordHash(_ c: Connection, user: UUID) throws -> String? {
        try c.first("SELECT password_hash FROM auth.users WHERE id = $1", [user])?["password_hash"]
    }

    func updateUser(_ c: Connection, _ user: UserRecord) throws -> UserRecord {
        current?.hold(user.id)
        do {
            let row = try c.first("""
                UPDATE auth.users SET username = $2, email = $3, full_name = $4, avatar_media_id = $5, picture_url = $6, phone = $7,
                    postal_address = $8, email_verified = $9, pending_email = $10, updated_at = now()
                WHERE id = $1 RETURNING \(UserRecord.columns)
                """, [user.id, user.username, user.email, user.fullName, user.avatarMediaId, user.pictureUrl, user.phone, user.postalAddress,
                      user.emailVerified, user.pendingEmail])
            guard let row else { throw AccountError.notFound }
            return try UserRecord(row)
        } catch let error as PostgresError where error.kind == .uniqueViolation {
            throw Self.duplicate(error)
        }
    }

    func setPassword(_ c: Connection, user: UUID, hash: String) throws {
        current?.hold(user)
        try c.execute("UPDATE auth.users SET password_hash = $2, updated_at = now() WHERE id = $1", [user, hash])
    }

    // MARK: Sessions

    /// Opens a session and returns it with its first refresh token (the token itself is stored only hashed).
    func createSession(_ c: Connection, user: UUID, device: String?) throws -> (session: UUID, refreshToken: String) {
        let session = UUID.v7()
        try c.execute("INSERT INTO auth.sessions (id, user_id, device, last_used_at) VALUES ($1, $2, $3, now())", [session, user, device])
        return (session, try issueRefreshToken(c, session: session))
    }

    func issueRefreshToken(_ c: Connection, session: UUID) throws -> String {
        let token = Base64URL.encode(secureRandomBytes(32))
        try c.execute("INSERT INTO auth.refresh_tokens (token_hash, session_id) VALUES ($1, $2)",
                      [Self.hash(token), session])
        return token
    }

    static func hash(_ token: String) -> String { hexString(sha256(Array(token.utf8))) }

    /// Marks the token used if it is fresh; tells a replay of an already used token apart from an unknown one.
    func useRefreshToken(_ c: Connection, _ token: String) throws -> RefreshOutcome {
        let hash = Self.hash(token)
        if let row = try c.first("""
            UPDATE auth.refresh_tokens t SET used_at = now()
            FROM auth.sessions s
            WHERE t.token_hash = $1 AND t.used_at IS NULL AND s.id = t.session_id AND s.revoked_at IS NULL
              AND t.created_at > now() - make_interval(days => $2)
            RETURNING s.id AS session_id, s.user_id
            """, [hash, Self.refreshLifetimeDays]) {
            return .rotated(session: try row["session_id"], user: try row["user_id"])
        }
        if let row = try c.first("""
            SELECT s.id AS session_id, s.user_id FROM auth.refresh_tokens t JOIN auth.sessions s ON s.id = t.session_id
            WHERE t.token_hash = $1 AND t.used_at IS NOT NULL
            """, [hash]) {
            return .reused(session: try row["session_id"], user: try row["user_id"])
        }
        return .invalid
    }

    /// A session was used (its refresh token rotated).
    func touchSession(_ c: Connection, _ session: UUID) throws {
        try c.execute("UPDATE auth.sessions SET last_used_at = now() WHERE id = $1", [session])
    }

    /// The user's active sessions, the most recently used first.
    func sessions(_ c: Connection, user: UUID) throws -> [SessionRecord] {
        try c.rows("""
            SELECT id, device, created_at, COALESCE(last_used_at, created_at) AS last_used_at FROM auth.sessions
            WHERE user_id = $1 AND revoked_at IS NULL ORDER BY last_used_at DESC NULLS LAST, id DESC LIMIT 200
            """, [user]).map { SessionRecord(id: try $0["id"], device: try $0.decode("device"), createdAt: try $0["created_at"],
                                            lastUsedAt: try $0["last_used_at"]) }
    }

    /// Revokes the user's session `session`; true when it was theirs and active until now.
    func revokeSession(_ c: Connection, _ session: UUID, of user: UUID, reason: String) throws -> Bool {
        current?.hold(user)
        return try c.execute("""
            UPDATE auth.sessions SET revoked_at = now(), revoke_reason = $3 WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL
            """, [session, user, reason]) == 1
    }

    // MARK: Blocks

    /// `user` blocks `other`; true when they had not before.
    func block(_ c: Connection, _ user: UUID, _ other: UUID) throws -> Bool {
        try c.execute("INSERT INTO auth.blocks (user_id, blocked_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", [user, other]) == 1
    }

    /// `user` lifts their block of `other`; true when there was one.
    func unblock(_ c: Connection, _ user: UUID, _ other: UUID) throws -> Bool {
        try c.execute("DELETE FROM auth.blocks WHERE user_id = $1 AND blocked_id = $2", [user, other]) == 1
    }

    /// The people `user` blocked, by username (at most 1,000).
    func blocked(_ c: Connection, by user: UUID) throws -> [UserRecord] {
        try c.rows("""
            SELECT \(UserRecord.columns) FROM auth.users WHERE id IN (SELECT blocked_id FROM auth.blocks WHERE user_id = $1)
            ORDER BY username LIMIT 1000
            """, [user]).map(UserRecord.init)
    }

    // MARK: Account deletion

    /// Schedules the user's account for deletion at `at`.
    func scheduleDeletion(_ c: Connection, user: UUID, at: Date) throws {
        try c.execute("UPDATE auth.users SET deletes_at = $2 WHERE id = $1", [user, at])
    }

    /// Keeps an account whose deletion was pending; true when one was.
    func cancelDeletion(_ c: Connection, user: UUID) throws -> Bool {
        try c.execute("UPDATE auth.users SET deletes_at = NULL WHERE id = $1 AND deletes_at IS NOT NULL", [user]) == 1
    }

    /// Up to `limit` accounts whose grace period is over, locked (another instance's are skipped). Their events still
    /// to be published (their sessions' revocations) are in the write-ahead log, which the relay reads: erasing the
    /// outbox rows that name them does not hold those back.
    func dueDeletions(_ c: Connection, limit: Int) throws -> [UUID] {
        try c.rows("""
            SELECT id FROM auth.users u WHERE deletes_at <= now()
            ORDER BY deletes_at LIMIT $1 FOR UPDATE SKIP LOCKED
            """, [limit]).map { try $0["id"] }
    }

    /// Erases the user: their row (sessions, refresh tokens, devices and the Google and Apple links go with it) and what names
    /// them in the other tables.
    func deleteUser(_ c: Connection, _ user: UUID) throws {
        current?.hold(user)
        try c.execute("""
            DELETE FROM auth.login_failures WHERE account_key = $2 OR account_key IN (
                SELECT 'login:' || lower(username) FROM auth.users WHERE id = $1 UNION ALL SELECT 'login:' || lower(email) FROM auth.users WHERE id = $1)
            """, [user, "user:" + user.lowercased])
        try c.execute("DELETE FROM auth.lookup_failures WHERE user_id = $1", [user])
        try c.execute("DELETE FROM auth.users WHERE id = $1", [user])
    }

    /// Suspends `user`; false when they were suspended already.
    func suspend(_ c: Connection, _ user: UUID) throws -> Bool {
        current?.hold(user)
        return try c.execute("UPDATE auth.users SET suspended_at = now() WHERE id = $1 AND suspended_at IS NULL", [user]) == 1
    }

    /// Revokes every active session of `user` except `keep`; returns the revoked ids.
    func revokeOtherSessions(_ c: Connection, user: UUID, keep: UUID, reason: String) throws -> [UUID] {
        current?.hold(user)
        return try c.rows("""
            UPDATE auth.sessions SET revoked_at = now(), revoke_reason = $3
            WHERE user_id = $1 AND id <> $2 AND revoked_at IS NULL RETURNING id
            """, [user, keep, reason]).map { try $0["id"] }
    }

    /// Sessions revoked since `since`, oldest first.
    func revokedSessions(_ c: Connection, since: Date) throws -> [(id: UUID, at: Date)] {
        try c.rows("SELECT id, revoked_at FROM auth.sessions WHERE revoked_at >= $1 ORDER BY revoked_at", [since])
            .map { (try $0["id"], try $0["revoked_at"]) }
    }

    func isSessionActive(_ c: Connection, session: UUID, user: UUID) throws -> Bool {
        try c.first("SELECT 1 AS ok FROM auth.sessions WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL",
                    [session, user]) != nil
    }

    // MARK: Login failures

    /// Failures in the last 15 minutes for the account and for the client, seconds since the account's last one,
    /// and seconds until the client's oldest one expires.
    func recentFailures(_ c: Connection, account: String, client: String)
        throws -> (account: Int, client: Int, sinceAccount: Double, clientRetryAfter: Int) {
        let row = try c.first("""
            SELECT count(*) FILTER (WHERE account_key = $1) AS account,
                   count(*) FILTER (WHERE client_key = $2) AS client,
                   COALESCE(EXTRACT(EPOCH FROM now() - max(at) FILTER (WHERE account_key = $1)), 1e9)::float8 AS since_account,
                   COALESCE(EXTRACT(EPOCH FROM min(at) FILTER (WHERE client_key = $2) + interval '15 minutes' - now()), 0)::int AS retry
            FROM auth.login_failures
            WHERE at > now() - interval '15 minutes' AND (account_key = $1 OR client_key = $2)
            """, [account, client])!
        return (try row["account"], try row["client"], try row["since_account"], try row["retry"])
    }

    // MARK: Devices

    /// Whether `token` is a device `user` signed in from (and marks it used).
    func isDevice(_ c: Connection, token: String, of user: UUID) throws -> Bool {
        try c.execute("UPDATE auth.devices SET last_used_at = now() WHERE token_hash = $1 AND user_id = $2",
                      [Self.hash(token), user]) == 1
    }

    /// Remembers a new device of `user`; returns its token (stored only hashed).
    func addDevice(_ c: Connection, user: UUID) throws -> String {
        let token = Base64URL.encode(secureRandomBytes(32))
        try c.execute("INSERT INTO auth.devices (token_hash, user_id) VALUES ($1, $2)", [Self.hash(token), user])
        return token
    }

    func forgetDevice(_ c: Connection, token: String) throws {
        try c.execute("DELETE FROM auth.devices WHERE token_hash = $1", [Self.hash(token)])
    }

    func recordFailure(_ c: Connection, account: String, client: String) throws {
        try c.execute("INSERT INTO auth.login_failures (account_key, client_key) VALUES ($1, $2)", [account, client])
    }

    func deleteOldFailures(_ c: Connection) throws {
        try c.execute("DELETE FROM auth.login_failures WHERE at < now() - interval '1 day'")
        try c.execute("DELETE FROM auth.devices WHERE last_used_at < now() - interval '180 days'")
    }

    // MARK: Signing keys

    /// Creates the first signing key unless there is one. Concurrent first starts agree on one (advisory lock).
    func ensureSigningKey(_ c: Connection, sealWith box: [UInt8]?) throws {
        try c.execute("SELECT pg_advisory_xact_lock(hashtext('auth-signing-key'))")
        if try c.first("SELECT 1 AS one FROM auth.signing_keys LIMIT 1") != nil { return }
        try addSigningKey(c, activatesIn: 0, sealWith: box)
    }

    /// Adds a key that signs from `activatesIn` seconds on (published at once); returns its id.
    @discardableResult
    func addSigningKey(_ c: Connection, activatesIn seconds: Int, sealWith box: [UInt8]?) throws -> String {
        let key = try Ed25519PrivateKey()
        let kid = Base64URL.encode(Array(sha256(key.publicKey).prefix(12)))
        let seed = try box.map { try SecretBox.seal(key.seed, key: $0, aad: Array(kid.utf8)) } ?? key.seed
        try c.execute("""
            INSERT INTO auth.signing_keys (kid, seed, public_key, encrypted, activates_at)
            VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
            """, [kid, ByteArray(seed), ByteArray(key.publicKey), box != nil, seconds])
        return kid
    }

    /// Every key, seeds opened with `box`. Throws `ConfigError` when a sealed seed cannot be opened with it.
    func signingKeys(_ c: Connection, openWith box: [UInt8]?) throws -> [SigningKeys.Key] {
        try c.rows("SELECT kid, seed, encrypted, activates_at FROM auth.signing_keys").map { row in
            let kid: String = try row["kid"]
            var seed = try row["seed", as: ByteArray.self].bytes
            if try row["encrypted", as: Bool.self] {
                guard let box, let opened = try? SecretBox.open(seed, key: box, aad: Array(kid.utf8)) else {
                    throw ConfigError(variable: "SIGNING_KEY_ENCRYPTION_KEY",
                                      problem: "does not open the stored signing key \(kid) (unset, or not the key it was sealed with)")
                }
                seed = opened
            }
            return SigningKeys.Key(kid: kid, key: try Ed25519PrivateKey(seed: seed), activatesAt: try row["activates_at"])
        }
    }

    /// Seals the seeds stored in the clear (stored before `SIGNING_KEY_ENCRYPTION_KEY` was set); returns how many.
    func sealPlainSeeds(_ c: Connection, with box: [UInt8]) throws -> Int {
        let rows = try c.rows("SELECT kid, seed FROM auth.signing_keys WHERE NOT encrypted FOR UPDATE")
        for row in rows {
            let kid: String = try row["kid"]
            let sealed = try SecretBox.seal(try row["seed", as: ByteArray.self].bytes, key: box, aad: Array(kid.utf8))
            try c.execute("UPDATE auth.signing_keys SET seed = $2, encrypted = true WHERE kid = $1", [kid, ByteArray(sealed)])
        }
        return rows.count
    }

    /// Deletes the keys whose successor activated so long ago that no token they signed is alive.
    func deleteRetiredKeys(_ c: Connection) throws {
        try c.execute("""
            DELETE FROM auth.signing_keys k WHERE EXISTS (
                SELECT 1 FROM auth.signing_keys n WHERE n.activates_at > k.activates_at
                AND n.activates_at < now() - make_interval(secs => $1))
            """, [Int(SigningKeys.retiredFor)])
    }
}
