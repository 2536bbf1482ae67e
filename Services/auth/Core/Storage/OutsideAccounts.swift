import Foundation
import Models
import Postgres

/// The links of outside identities (Google, Apple) to users, and Apple's refresh tokens.
extension AuthStorage {
    /// The user `subject` of `provider` is linked to.
    func linkedUser(_ c: Connection, _ provider: OutsideIdentity.Provider, subject: String) throws -> UserRecord? {
        try c.first("""
            SELECT \(UserRecord.columns) FROM auth.users WHERE id = (SELECT user_id FROM auth.\(provider.rawValue)_accounts WHERE subject = $1)
            """, [subject]).map(UserRecord.init)
    }

    func link(_ c: Connection, _ provider: OutsideIdentity.Provider, subject: String, user: UUID) throws {
        try c.execute("INSERT INTO auth.\(provider.rawValue)_accounts (subject, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", [subject, user])
    }

    // MARK: Apple's refresh tokens

    /// Whether a refresh token is kept for the Apple subject (then a sign-in's authorization code is not needed).
    func holdsAppleToken(_ c: Connection, subject: String) throws -> Bool {
        try c.first("SELECT 1 AS one FROM auth.apple_accounts WHERE subject = $1 AND refresh_token IS NOT NULL", [subject]) != nil
    }

    /// Keeps the refresh token the subject's authorization code gave (the link exists: the sign-in made it).
    func keepAppleToken(_ c: Connection, subject: String, clientId: String, token: (bytes: [UInt8], sealed: Bool)) throws {
        try c.execute("UPDATE auth.apple_accounts SET client_id = $2, refresh_token = $3, refresh_sealed = $4 WHERE subject = $1",
                      [subject, clientId, ByteArray(token.bytes), token.sealed])
    }

    /// Moves the user's Apple refresh tokens to the revocations still to make (the account is being deleted); their
    /// links stay until the account is erased, so that signing in again within the grace period keeps it (and gives
    /// a new code, hence a new token). Returns how many were queued.
    @discardableResult
    func queueAppleRevocations(_ c: Connection, user: UUID) throws -> Int {
        let rows = try c.rows("""
            UPDATE auth.apple_accounts a SET refresh_token = NULL, client_id = NULL FROM (
                SELECT subject, client_id, refresh_token, refresh_sealed FROM auth.apple_accounts
                WHERE user_id = $1 AND refresh_token IS NOT NULL FOR UPDATE
            ) old WHERE a.subject = old.subject
            RETURNING old.client_id, old.refresh_token, old.refresh_sealed
            """, [user])
        for row in rows {
            try c.execute("INSERT INTO auth.apple_revocations (id, client_id, refresh_token, refresh_sealed) VALUES ($1, $2, $3, $4)",
                          [UUID.v7(), try row["client_id", as: String.self], try row["refresh_token", as: ByteArray.self],
                           try row["refresh_sealed", as: Bool.self]])
        }
        return rows.count
    }

    /// Up to `limit` revocations due now, each put off (by 5 s, doubling with each attempt, at most an hour) before
    /// it is tried, so that an instance that dies mid-call leaves it to a later round, not lost.
    func claimAppleRevocations(_ c: Connection, limit: Int) throws -> [(id: UUID, clientId: String, token: [UInt8], sealed: Bool)] {
        try c.rows("""
            UPDATE auth.apple_revocations SET attempts = attempts + 1,
                next_attempt_at = now() + make_interval(secs => least(3600, 5 * power(2, least(attempts, 20))))
            WHERE id IN (SELECT id FROM auth.apple_revocations WHERE next_attempt_at <= now() ORDER BY next_attempt_at
                         LIMIT $1 FOR UPDATE SKIP LOCKED)
            RETURNING id, client_id, refresh_token, refresh_sealed
            """, [limit]).map {
            (try $0["id"], try $0["client_id"], try $0["refresh_token", as: ByteArray.self].bytes, try $0["refresh_sealed"])
        }
    }

    /// A revocation Apple confirmed.
    func revokedAppleToken(_ c: Connection, id: UUID) throws {
        try c.execute("DELETE FROM auth.apple_revocations WHERE id = $1", [id])
    }
}
