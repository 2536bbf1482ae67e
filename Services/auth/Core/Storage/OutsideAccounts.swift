import Foundation
import Models
import Postgres

/// An Apple refresh token to revoke, as stored (sealed when `sealed`).
struct AppleRevocationRecord: PostgresRecord {
    let id: UUID
    let clientId: String
    let token: [UInt8]
    let sealed: Bool

    init(_ row: Row) throws {
        id = try row["id"]; clientId = try row["client_id"]; token = try row["refresh_token", as: ByteArray.self].bytes
        sealed = try row["refresh_sealed"]
    }

    static let columns: SQL = "id, client_id, refresh_token, refresh_sealed"
}

/// The links of outside identities (Google, Apple) to users, and Apple's refresh tokens.
extension AuthStorage {
    /// The user `subject` of `provider` is linked to.
    func linkedUser(_ c: Connection, _ provider: OutsideIdentity.Provider, subject: String) throws -> UserRecord? {
        try c.one(UserRecord.self, """
            SELECT \(UserRecord.columns) FROM auth.users
            WHERE id = (SELECT user_id FROM \(unescaped: provider.table) WHERE subject = \(subject))
            """)
    }

    func link(_ c: Connection, _ provider: OutsideIdentity.Provider, subject: String, user: UUID) throws {
        try c.execute("INSERT INTO \(unescaped: provider.table) (subject, user_id) VALUES (\(subject), \(user)) ON CONFLICT DO NOTHING")
    }

    // MARK: Apple's refresh tokens

    /// Whether a refresh token is kept for the Apple subject (then a sign-in's authorization code is not needed).
    func holdsAppleToken(_ c: Connection, subject: String) throws -> Bool {
        try c.first("SELECT 1 AS one FROM auth.apple_accounts WHERE subject = \(subject) AND refresh_token IS NOT NULL") != nil
    }

    /// Keeps the refresh token the subject's authorization code gave (the link exists: the sign-in made it).
    func keepAppleToken(_ c: Connection, subject: String, clientId: String, token: (bytes: [UInt8], sealed: Bool)) throws {
        try c.execute("""
            UPDATE auth.apple_accounts SET client_id = \(clientId), refresh_token = \(ByteArray(token.bytes)), refresh_sealed = \(token.sealed)
            WHERE subject = \(subject)
            """)
    }

    /// Moves the user's Apple refresh tokens to the revocations still to make (the account is being deleted); their
    /// links stay until the account is erased, so that signing in again within the grace period keeps it (and gives
    /// a new code, hence a new token). Returns how many were queued.
    @discardableResult
    func queueAppleRevocations(_ c: Connection, user: UUID) throws -> Int {
        let rows = try c.rows("""
            UPDATE auth.apple_accounts a SET refresh_token = NULL, client_id = NULL FROM (
                SELECT subject, client_id, refresh_token, refresh_sealed FROM auth.apple_accounts
                WHERE user_id = \(user) AND refresh_token IS NOT NULL FOR UPDATE
            ) old WHERE a.subject = old.subject
            RETURNING old.client_id, old.refresh_token, old.refresh_sealed
            """)
        for row in rows {
            let (clientId, token, sealed) = try row.decode(String.self, ByteArray.self, Bool.self)
            try c.execute("""
                INSERT INTO auth.apple_revocations (id, client_id, refresh_token, refresh_sealed)
                VALUES (\(UUID.v7()), \(clientId), \(token), \(sealed))
                """)
        }
        return rows.count
    }

    /// Up to `limit` revocations due now, each put off (by 5 s, doubling with each attempt, at most an hour) before
    /// it is tried, so that an instance that dies mid-call leaves it to a later round, not lost.
    func claimAppleRevocations(_ c: Connection, limit: Int) throws -> [AppleRevocationRecord] {
        try c.all(AppleRevocationRecord.self, """
            UPDATE auth.apple_revocations SET attempts = attempts + 1,
                next_attempt_at = now() + make_interval(secs => least(3600, 5 * power(2, least(attempts, 20))))
            WHERE id IN (SELECT id FROM auth.apple_revocations WHERE next_attempt_at <= now() ORDER BY next_attempt_at
                         LIMIT \(limit) FOR UPDATE SKIP LOCKED)
            RETURNING \(AppleRevocationRecord.columns)
            """)
    }

    /// A revocation Apple confirmed.
    func revokedAppleToken(_ c: Connection, id: UUID) throws {
        try c.execute("DELETE FROM auth.apple_revocations WHERE id = \(id)")
    }
}
