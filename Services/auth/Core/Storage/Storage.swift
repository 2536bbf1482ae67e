import Crypto
import Foundation
import Models
import Postgres
import Runtime

/// A user row.
struct UserRecord: PostgresRecord {
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
        fullName = try row["full_name"]; avatarMediaId = try row["avatar_media_id"]; pictureUrl = try row["picture_url"]
        phone = try row["phone"]; postalAddress = try row["postal_address"]; emailVerified = try row["email_verified"]
        pendingEmail = try row["pending_email"]
        suspendedAt = try row["suspended_at"]; createdAt = try row["created_at"]; updatedAt = try row["updated_at"]
    }

    static let columns: SQL = """
        id, username, email, full_name, avatar_media_id, picture_url, phone, postal_address, email_verified, pending_email, suspended_at,
        created_at, updated_at
        """
}

/// A signed-in device: a session and what the client called itself when it began.
struct SessionRecord: PostgresRecord {
    let id: UUID
    let device: String?
    let createdAt: Date
    let lastUsedAt: Date

    init(_ row: Row) throws {
        id = try row["id"]; device = try row["device"]; createdAt = try row["created_at"]; lastUsedAt = try row["last_used_at"]
    }

    /// A session never used since it began was last used then.
    static let columns: SQL = "id, device, created_at, COALESCE(last_used_at, created_at) AS last_used_at"
}

/// A signing key as stored: its seed sealed when `encrypted`.
struct SigningKeyRecord: PostgresRecord {
    let kid: String
    let seed: [UInt8]
    let encrypted: Bool
    let activatesAt: Date

    init(_ row: Row) throws {
        kid = try row["kid"]; seed = try row["seed", as: ByteArray.self].bytes; encrypted = try row["encrypted"]
        activatesAt = try row["activates_at"]
    }

    static let columns: SQL = "kid, seed, encrypted, activates_at"
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
            return try c.one(UserRecord.self, """
                INSERT INTO auth.users (id, username, email, full_name, password_hash, picture_url, email_verified)
                VALUES (\(UUID.v7()), \(username), \(email), \(fullName), \(passwordHash), \(pictureUrl), \(emailVerified))
                RETURNING \(UserRecord.columns)
                """)!
        } catch let error as PostgresError where error.kind == .uniqueViolation {
            throw Self.duplicate(error)
        }
    }

    static func duplicate(_ error: PostgresError) -> AccountError {
        error.constraint == "users_verified_email_unique" ? .emailTaken : .usernameTaken
    }

    func user(_ c: Connection, id: UUID) throws -> UserRecord? {
        try c.one(UserRecord.self, "SELECT \(UserRecord.columns) FROM auth.users WHERE id = \(id)")
    }

    /// The user, if `session` is theirs and not revoked: the session check and the read in one round trip.
    func user(_ c: Connection, id: UUID, inActiveSession session: UUID) throws -> UserRecord? {
        try c.one(UserRecord.self, """
            SELECT \(UserRecord.columns) FROM auth.users WHERE id = \(id)
            AND EXISTS (SELECT 1 FROM auth.sessions WHERE id = \(session) AND user_id = \(id) AND revoked_at IS NULL)
            """)
    }

    /// The users and password hashes a login by username or email (case-insensitive) may be for: by username, one; by
    /// email, the account that proved the address, or else the unconfirmed sign-ups that gave it (a few, newest first).
    func usersForLogin(_ c: Connection, username: String?, email: String?) throws -> [(UserRecord, String)] {
        let query: SQL = if let username {
            "SELECT \(UserRecord.columns), password_hash FROM auth.users WHERE lower(username) = lower(\(username))"
        } else {
            """
            SELECT \(UserRecord.columns), password_hash FROM auth.users WHERE lower(email) = lower(\(email ?? ""))
            ORDER BY email_verified DESC, created_at DESC LIMIT \(Self.claimsPerAddress)
            """
        }
        let rows = try c.rows(query)
        let found = try rows.map { (try UserRecord($0), try $0["password_hash", as: String.self]) }
        return found.first?.0.emailVerified == true ? [found[0]] : found
    }

    /// Unconfirmed sign-ups with one address that a login by it or a reset mail to it tries.
    static let claimsPerAddress = 3

    /// The user with `username` (case-insensitive).
    func userByUsername(_ c: Connection, _ username: String) throws -> UserRecord? {
        try c.one(UserRecord.self, "SELECT \(UserRecord.columns) FROM auth.users WHERE lower(username) = lower(\(username))")
    }

    /// The user who proved `email` is theirs (case-insensitive): at most one.
    func userWithProven(_ c: Connection, email: String) throws -> UserRecord? {
        try c.one(UserRecord.self, "SELECT \(UserRecord.columns) FROM auth.users WHERE lower(email) = lower(\(email)) AND email_verified")
    }

    /// The users whose sign-up gave `email` and who have not proven it (a few, newest first).
    func usersClaiming(_ c: Connection, email: String) throws -> [UserRecord] {
        try c.all(UserRecord.self, """
            SELECT \(UserRecord.columns) FROM auth.users WHERE lower(email) = lower(\(email)) AND NOT email_verified
            ORDER BY created_at DESC LIMIT \(Self.claimsPerAddress)
            """)
    }

    func usernameTaken(_ c: Connection, _ name: String) throws -> Bool {
        try c.first("SELECT 1 AS one FROM auth.users WHERE lower(username) = lower(\(name))") != nil
    }

    func passwordHash(_ c: Connection, user: UUID) throws -> String? {
        try c.first("SELECT password_hash FROM auth.users WHERE id = \(user)")?["password_hash"]
    }

    func updateUser(_ c: Connection, _ user: UserRecord) throws -> UserRecord {
        current?.hold(user.id)
        do {
            guard let updated = try c.one(UserRecord.self, """
                UPDATE auth.users SET username = \(user.username), email = \(user.email), full_name = \(user.fullName),
                    avatar_media_id = \(user.avatarMediaId), picture_url = \(user.pictureUrl), phone = \(user.phone),
                    postal_address = \(user.postalAddress), email_verified = \(user.emailVerified), pending_email = \(user.pendingEmail),
                    updated_at = now()
                WHERE id = \(user.id) RETURNING \(UserRecord.columns)
                """) else { throw AccountError.notFound }
            return updated
        } catch let error as PostgresError where error.kind == .uniqueViolation {
            throw Self.duplicate(error)
        }
    }

    func setPassword(_ c: Connection, user: UUID, hash: String) throws {
        current?.hold(user)
        try c.execute("UPDATE auth.users SET password_hash = \(hash), updated_at = now() WHERE id = \(user)")
    }

    // MARK: Sessions

    /// Opens a session and returns it with its first refresh token (the token itself is stored only hashed).
    func createSession(_ c: Connection, user: UUID, device: String?) throws -> (session: UUID, refreshToken: String) {
        let session = UUID.v7()
        try c.execute("INSERT INTO auth.sessions (id, user_id, device, last_used_at) VALUES (\(session), \(user), \(device), now())")
        return (session, try issueRefreshToken(c, session: session))
    }

    func issueRefreshToken(_ c: Connection, session: UUID) throws -> String {
        let token = Base64URL.encode(secureRandomBytes(32))
        try c.execute("INSERT INTO auth.refresh_tokens (token_hash, session_id) VALUES (\(Self.hash(token)), \(session))")
        return token
    }

    static func hash(_ token: String) -> String { hexString(sha256(Array(token.utf8))) }

    /// Marks the token used if it is fresh; tells a replay of an already used token apart from an unknown one.
    func useRefreshToken(_ c: Connection, _ token: String) throws -> RefreshOutcome {
        let hash = Self.hash(token)
        if let row = try c.first("""
            UPDATE auth.refresh_tokens t SET used_at = now()
            FROM auth.sessions s
            WHERE t.token_hash = \(hash) AND t.used_at IS NULL AND s.id = t.session_id AND s.revoked_at IS NULL
              AND t.created_at > now() - make_interval(days => \(Self.refreshLifetimeDays))
            RETURNING s.id AS session_id, s.user_id
            """) {
            let (session, user) = try row.decode(UUID.self, UUID.self)
            return .rotated(session: session, user: user)
        }
        if let row = try c.first("""
            SELECT s.id AS session_id, s.user_id FROM auth.refresh_tokens t JOIN auth.sessions s ON s.id = t.session_id
            WHERE t.token_hash = \(hash) AND t.used_at IS NOT NULL
            """) {
            let (session, user) = try row.decode(UUID.self, UUID.self)
            return .reused(session: session, user: user)
        }
        return .invalid
    }

    /// A session was used (its refresh token rotated).
    func touchSession(_ c: Connection, _ session: UUID) throws {
        try c.execute("UPDATE auth.sessions SET last_used_at = now() WHERE id = \(session)")
    }

    /// The user's active sessions, the most recently used first.
    func sessions(_ c: Connection, user: UUID) throws -> [SessionRecord] {
        try c.all(SessionRecord.self, """
            SELECT \(SessionRecord.columns) FROM auth.sessions
            WHERE user_id = \(user) AND revoked_at IS NULL ORDER BY last_used_at DESC NULLS LAST, id DESC LIMIT 200
            """)
    }

    /// Revokes the user's session `session`; true when it was theirs and active until now.
    func revokeSession(_ c: Connection, _ session: UUID, of user: UUID, reason: String) throws -> Bool {
        current?.hold(user)
        return try c.execute("""
            UPDATE auth.sessions SET revoked_at = now(), revoke_reason = \(reason)
            WHERE id = \(session) AND user_id = \(user) AND revoked_at IS NULL
            """) == 1
    }

    // MARK: Blocks

    /// `user` blocks `other`; true when they had not before.
    func block(_ c: Connection, _ user: UUID, _ other: UUID) throws -> Bool {
        try c.execute("INSERT INTO auth.blocks (user_id, blocked_id) VALUES (\(user), \(other)) ON CONFLICT DO NOTHING") == 1
    }

    /// `user` lifts their block of `other`; true when there was one.
    func unblock(_ c: Connection, _ user: UUID, _ other: UUID) throws -> Bool {
        try c.execute("DELETE FROM auth.blocks WHERE user_id = \(user) AND blocked_id = \(other)") == 1
    }

    /// The people `user` blocked, by username (at most 1,000).
    func blocked(_ c: Connection, by user: UUID) throws -> [UserRecord] {
        try c.all(UserRecord.self, """
            SELECT \(UserRecord.columns) FROM auth.users WHERE id IN (SELECT blocked_id FROM auth.blocks WHERE user_id = \(user))
            ORDER BY username LIMIT 1000
            """)
    }

    // MARK: Account deletion

    /// Schedules the user's account for deletion at `at`.
    func scheduleDeletion(_ c: Connection, user: UUID, at: Date) throws {
        try c.execute("UPDATE auth.users SET deletes_at = \(at) WHERE id = \(user)")
    }

    /// Keeps an account whose deletion was pending; true when one was.
    func cancelDeletion(_ c: Connection, user: UUID) throws -> Bool {
        try c.execute("UPDATE auth.users SET deletes_at = NULL WHERE id = \(user) AND deletes_at IS NOT NULL") == 1
    }

    /// Up to `limit` accounts whose grace period is over, locked (another instance's are skipped). Their events still
    /// to be published (their sessions' revocations) are in the write-ahead log, which the relay reads: erasing the
    /// outbox rows that name them does not hold those back.
    func dueDeletions(_ c: Connection, limit: Int) throws -> [UUID] {
        try c.rows("""
            SELECT id FROM auth.users u WHERE deletes_at <= now()
            ORDER BY deletes_at LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """).map { try $0["id"] }
    }

    /// Erases the user: their row (sessions, refresh tokens, devices and the Google and Apple links go with it) and what names
    /// them in the other tables.
    func deleteUser(_ c: Connection, _ user: UUID) throws {
        current?.hold(user)
        try c.execute("""
            DELETE FROM auth.login_failures WHERE account_key = \("user:" + user.lowercased) OR account_key IN (
                SELECT 'login:' || lower(username) FROM auth.users WHERE id = \(user)
                UNION ALL SELECT 'login:' || lower(email) FROM auth.users WHERE id = \(user))
            """)
        try c.execute("DELETE FROM auth.lookup_failures WHERE user_id = \(user)")
        try c.execute("DELETE FROM auth.users WHERE id = \(user)")
    }

    /// Suspends `user`; false when they were suspended already.
    func suspend(_ c: Connection, _ user: UUID) throws -> Bool {
        current?.hold(user)
        return try c.execute("UPDATE auth.users SET suspended_at = now() WHERE id = \(user) AND suspended_at IS NULL") == 1
    }

    /// Revokes every active session of `user` except `keep`; returns the revoked ids.
    func revokeOtherSessions(_ c: Connection, user: UUID, keep: UUID, reason: String) throws -> [UUID] {
        current?.hold(user)
        return try c.rows("""
            UPDATE auth.sessions SET revoked_at = now(), revoke_reason = \(reason)
            WHERE user_id = \(user) AND id <> \(keep) AND revoked_at IS NULL RETURNING id
            """).map { try $0["id"] }
    }

    /// Sessions revoked since `since`, oldest first.
    func revokedSessions(_ c: Connection, since: Date) throws -> [(id: UUID, at: Date)] {
        try c.rows("SELECT id, revoked_at FROM auth.sessions WHERE revoked_at >= \(since) ORDER BY revoked_at")
            .map { try $0.decode(UUID.self, Date.self) }
    }

    func isSessionActive(_ c: Connection, session: UUID, user: UUID) throws -> Bool {
        try c.first("SELECT 1 AS ok FROM auth.sessions WHERE id = \(session) AND user_id = \(user) AND revoked_at IS NULL") != nil
    }

    // MARK: Login failures

    /// Failures in the last 15 minutes for the account and for the client, seconds since the account's last one,
    /// and seconds until the client's oldest one expires.
    func recentFailures(_ c: Connection, account: String, client: String)
        throws -> (account: Int, client: Int, sinceAccount: Double, clientRetryAfter: Int) {
        let row = try c.first("""
            SELECT count(*) FILTER (WHERE account_key = \(account)) AS account,
                   count(*) FILTER (WHERE client_key = \(client)) AS client,
                   COALESCE(EXTRACT(EPOCH FROM now() - max(at) FILTER (WHERE account_key = \(account))), 1e9)::float8 AS since_account,
                   COALESCE(EXTRACT(EPOCH FROM min(at) FILTER (WHERE client_key = \(client)) + interval '15 minutes' - now()), 0)::int AS retry
            FROM auth.login_failures
            WHERE at > now() - interval '15 minutes' AND (account_key = \(account) OR client_key = \(client))
            """)!
        return try row.decode(Int.self, Int.self, Double.self, Int.self)
    }

    // MARK: Devices

    /// Whether `token` is a device `user` signed in from (and marks it used).
    func isDevice(_ c: Connection, token: String, of user: UUID) throws -> Bool {
        try c.execute("UPDATE auth.devices SET last_used_at = now() WHERE token_hash = \(Self.hash(token)) AND user_id = \(user)") == 1
    }

    /// Remembers a new device of `user`; returns its token (stored only hashed).
    func addDevice(_ c: Connection, user: UUID) throws -> String {
        let token = Base64URL.encode(secureRandomBytes(32))
        try c.execute("INSERT INTO auth.devices (token_hash, user_id) VALUES (\(Self.hash(token)), \(user))")
        return token
    }

    func forgetDevice(_ c: Connection, token: String) throws {
        try c.execute("DELETE FROM auth.devices WHERE token_hash = \(Self.hash(token))")
    }

    func recordFailure(_ c: Connection, account: String, client: String) throws {
        try c.execute("INSERT INTO auth.login_failures (account_key, client_key) VALUES (\(account), \(client))")
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
            VALUES (\(kid), \(ByteArray(seed)), \(ByteArray(key.publicKey)), \(box != nil), now() + make_interval(secs => \(seconds)))
            """)
        return kid
    }

    /// Every key, seeds opened with `box`. Throws `ConfigError` when a sealed seed cannot be opened with it.
    func signingKeys(_ c: Connection, openWith box: [UInt8]?) throws -> [SigningKeys.Key] {
        try c.all(SigningKeyRecord.self, "SELECT \(SigningKeyRecord.columns) FROM auth.signing_keys").map { stored in
            var seed = stored.seed
            if stored.encrypted {
                guard let box, let opened = try? SecretBox.open(seed, key: box, aad: Array(stored.kid.utf8)) else {
                    throw ConfigError(variable: "SIGNING_KEY_ENCRYPTION_KEY",
                                      problem: "does not open the stored signing key \(stored.kid) (unset, or not the key it was sealed with)")
                }
                seed = opened
            }
            return SigningKeys.Key(kid: stored.kid, key: try Ed25519PrivateKey(seed: seed), activatesAt: stored.activatesAt)
        }
    }

    /// Seals the seeds stored in the clear (stored before `SIGNING_KEY_ENCRYPTION_KEY` was set); returns how many.
    func sealPlainSeeds(_ c: Connection, with box: [UInt8]) throws -> Int {
        let plain = try c.all(SigningKeyRecord.self, "SELECT \(SigningKeyRecord.columns) FROM auth.signing_keys WHERE NOT encrypted FOR UPDATE")
        for key in plain {
            let sealed = try SecretBox.seal(key.seed, key: box, aad: Array(key.kid.utf8))
            try c.execute("UPDATE auth.signing_keys SET seed = \(ByteArray(sealed)), encrypted = true WHERE kid = \(key.kid)")
        }
        return plain.count
    }

    /// Deletes the keys whose successor activated so long ago that no token they signed is alive.
    func deleteRetiredKeys(_ c: Connection) throws {
        try c.execute("""
            DELETE FROM auth.signing_keys k WHERE EXISTS (
                SELECT 1 FROM auth.signing_keys n WHERE n.activates_at > k.activates_at
                AND n.activates_at < now() - make_interval(secs => \(Int(SigningKeys.retiredFor))))
            """)
    }
}
