import Features
import Foundation
import Postgres

/// A delivery as the log keeps it.
struct DeliveryRecord {
    let id: UUID
    let eventId: String
    let userId: UUID
    let channel: String
    let kind: String
    let address: String
    let subject: String
    let bodyText: String?
    let bodyHTML: String?
    let status: String
    let attempts: Int
    let lastError: String?
    /// When what it links to stops working: not worth sending after.
    let expiresAt: Date?
    let createdAt: Date
    let sentAt: Date?

    init(_ r: Row) throws {
        id = try r["id"]; eventId = try r["event_id"]; userId = try r["user_id"]; channel = try r["channel"]; kind = try r["kind"]
        address = try r["address"]; subject = try r["subject"]; bodyText = try r.decode("body_text"); bodyHTML = try r.decode("body_html")
        status = try r["status"]; attempts = try r["attempts"]; lastError = try r.decode("last_error"); expiresAt = try r.decode("expires_at")
        createdAt = try r["created_at"]
        sentAt = try r.decode("sent_at")
    }
}

/// The delivery log: what is to be sent to whom, by which channel, and how it went.
struct NotifyStorage: Sendable {
    /// Records a delivery of event `eventId` to `user` by `channel`, once: false when it was recorded before (the event
    /// came again).
    func record(_ c: Connection, id: UUID, eventId: String, user: UUID, channel: String, kind: String, address: String, subject: String,
                text: String, html: String?, expiresAt: Date?) throws -> Bool {
        try c.execute("""
            INSERT INTO notify.deliveries (id, event_id, user_id, channel, kind, address, subject, body_text, body_html, expires_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (event_id, user_id, channel) DO NOTHING
            """, [id, eventId, user, channel, kind, address, subject, text, html, expiresAt]) == 1
    }

    /// Takes up to `limit` deliveries that are due, each leased for `lease` seconds: another sender (or this one,
    /// restarted after a crash) takes it again only once the lease ran out, so a kill repeats only what was in flight.
    func claimDue(_ c: Connection, limit: Int, lease: TimeInterval) throws -> [DeliveryRecord] {
        try c.rows("""
            UPDATE notify.deliveries SET status = 'sending', attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2)
            WHERE id IN (SELECT id FROM notify.deliveries WHERE status IN ('pending', 'sending') AND next_attempt_at <= now()
                         ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
            RETURNING *
            """, [limit, lease]).map(DeliveryRecord.init)
    }

    /// Sent: what it said is not kept (a verification or reset link is a secret).
    func markSent(_ c: Connection, _ id: UUID) throws {
        try c.execute("""
            UPDATE notify.deliveries SET status = 'sent', sent_at = now(), body_text = NULL, body_html = NULL, last_error = NULL WHERE id = $1
            """, [id])
    }

    /// Not sent: tried again in `retryIn` seconds, or (nil) given up, its text dropped.
    func markFailed(_ c: Connection, _ id: UUID, error: String, retryIn: TimeInterval?) throws {
        if let retryIn {
            try c.execute("""
                UPDATE notify.deliveries SET status = 'pending', next_attempt_at = now() + make_interval(secs => $2), last_error = $3 WHERE id = $1
                """, [id, retryIn, String(error.prefix(500))])
        } else {
            try c.execute("""
                UPDATE notify.deliveries SET status = 'failed', body_text = NULL, body_html = NULL, last_error = $2 WHERE id = $1
                """, [id, String(error.prefix(500))])
        }
    }

    /// `user`'s deliveries, the newest first, before `before` (a delivery id: they are time-ordered).
    func deliveries(_ c: Connection, of user: UUID, before: UUID?, limit: Int) throws -> [DeliveryRecord] {
        try c.rows("""
            SELECT * FROM notify.deliveries WHERE user_id = $1 AND ($2::uuid IS NULL OR id < $2::uuid) ORDER BY id DESC LIMIT $3
            """, [user, before, limit]).map(DeliveryRecord.init)
    }

    /// How many deliveries wait to be sent, and the age in seconds of the oldest.
    func backlog(_ c: Connection) throws -> (count: Int, oldest: Double) {
        let row = try c.first("""
            SELECT count(*)::int AS n, coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS age
            FROM notify.deliveries WHERE status IN ('pending', 'sending')
            """)
        return (try row?["n"] ?? 0, try row?["age"] ?? 0)
    }

    func forget(_ user: UUID, on c: Connection) throws {
        try c.execute("DELETE FROM notify.deliveries WHERE user_id = $1", [user])
    }

    /// What notify holds of `user`, for their export: what was sent to them, and when.
    func export(_ c: Connection, _ user: UUID) throws -> [String: Any] {
        try Export.document(c, """
            SELECT json_build_object('deliveries', (SELECT coalesce(json_agg(json_build_object(
                'id', id, 'kind', kind, 'channel', channel, 'address', address, 'subject', subject, 'status', status,
                'createdAt', created_at, 'sentAt', sent_at) ORDER BY id), '[]'::json) FROM notify.deliveries WHERE user_id = $1))::text AS export
            """, [user])
    }
}
