import Crypto
import Foundation
import Postgres

/// A token sent by mail to prove an address (`verify`) or to set a new password (`reset`), as stored: its hash only.
struct EmailTokenRecord: PostgresRecord {
    let userId: UUID
    let purpose: String
    let email: String

    init(_ row: Row) throws {
        userId = try row["user_id"]; purpose = try row["purpose"]; email = try row["email"]
    }

    static let columns: SQL = "user_id, purpose, email"
}

extension AuthStorage {
    /// A new single-use token for `user` at `email`, valid for `lifetime`; an earlier unused one of the same purpose
    /// stops working (only the latest mail's link does). Returns the token, which only the mail carries.
    func issueEmailToken(_ c: Connection, user: UUID, purpose: String, email: String, lifetime: TimeInterval) throws -> String {
        let token = Base64URL.encode(secureRandomBytes(32))
        try retireEmailTokens(c, user: user, purpose: purpose)
        try c.execute("""
            INSERT INTO auth.email_tokens (token_hash, user_id, purpose, email, expires_at)
            VALUES (\(Self.hash(token)), \(user), \(purpose), \(email), now() + make_interval(secs => \(lifetime)))
            """)
        return token
    }

    /// The unused tokens of `user` for `purpose` stop working.
    func retireEmailTokens(_ c: Connection, user: UUID, purpose: String) throws {
        try c.execute("UPDATE auth.email_tokens SET used_at = now() WHERE user_id = \(user) AND purpose = \(purpose) AND used_at IS NULL")
    }

    /// Uses `token` for `purpose` if it is unused and unexpired: nil otherwise (whichever it was, the caller says the same).
    func useEmailToken(_ c: Connection, _ token: String, purpose: String) throws -> EmailTokenRecord? {
        try c.one(EmailTokenRecord.self, """
            UPDATE auth.email_tokens SET used_at = now()
            WHERE token_hash = \(Self.hash(token)) AND purpose = \(purpose) AND used_at IS NULL AND expires_at > now()
            RETURNING \(EmailTokenRecord.columns)
            """)
    }

    /// Whether `token` is unused and unexpired for `purpose`, leaving it so.
    func isUsableEmailToken(_ c: Connection, _ token: String, purpose: String) throws -> Bool {
        try c.first("""
            SELECT 1 AS one FROM auth.email_tokens
            WHERE token_hash = \(Self.hash(token)) AND purpose = \(purpose) AND used_at IS NULL AND expires_at > now()
            """) != nil
    }

    /// Records a request under `key` (an address mailed, a client asking).
    func recordMailRequest(_ c: Connection, key: String) throws {
        try c.execute("INSERT INTO auth.mail_requests (key) VALUES (\(key))")
    }

    /// How many requests `key` made within the hour.
    func recentMailRequests(_ c: Connection, key: String) throws -> Int {
        try c.first("SELECT count(*)::int AS n FROM auth.mail_requests WHERE key = \(key) AND at > now() - interval '1 hour'")?["n"] ?? 0
    }

    /// Forgets requests and tokens older than a day.
    func deleteOldMailRequests(_ c: Connection) throws {
        try c.execute("DELETE FROM auth.mail_requests WHERE at < now() - interval '1 day'")
        try c.execute("DELETE FROM auth.email_tokens WHERE expires_at < now() - interval '1 day'")
    }
}
