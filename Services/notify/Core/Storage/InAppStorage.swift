import Features
import Foundation
import Models
import Postgres

/// The in-app list: a notice shown in the app is a delivery by channel `app`, made when it is recorded (it has no
/// one to send it), shown from `sent_at` on and kept with what it says; `read_at` is the person's read marker.
extension NotifyStorage {
    /// Records notice `payload` of event `eventId` in the app lists of `users`, once each, for those not erased here who
    /// did not turn `kind` off in the app; shown from `at` (now when nil). `app`: the app whose list it is in.
    func recordInApp(_ c: Connection, eventId: String, to users: [UUID], kind: String, app: String, title: String, payload: String,
                     at: Date? = nil, reference: String? = nil) throws {
        guard !users.isEmpty else { return }
        try c.enqueue("""
            INSERT INTO notify.deliveries (id, event_id, user_id, channel, kind, address, subject, body_text, status, sent_at, next_attempt_at,
                                           reference)
            SELECT t.id, \(eventId), t.user_id, 'app', \(kind), \(app), \(title), \(payload), 'sent', coalesce(\(at), now()), coalesce(\(at), now()),
                   \(reference)
            FROM unnest(\(PostgresArray(users))::uuid[], \(PostgresArray(users.map(Erasure.hash)))::text[],
                        \(PostgresArray(users.map { _ in UUID.v7(at: at ?? Date()) }))::uuid[]) AS t(user_id, id_hash, id)
            WHERE \(Erasure.notErased("t.id_hash", schema: "notify")) AND \(Self.allowed(user: "t.user_id", kind: "\(kind)", channel: "'app'"))
            ON CONFLICT DO NOTHING
            """)
    }

    /// Replaces what the notices of `eventId` to `user` say, where it can still change: in the app list, and pushes not
    /// yet taken to be sent (a digest tells of the stories that came after it was first recorded).
    func restate(_ c: Connection, eventId: String, user: UUID, title: String, payload: String) throws {
        try c.enqueue("""
            UPDATE notify.deliveries SET subject = \(title), body_text = \(payload)
            WHERE event_id = \(eventId) AND user_id = \(user) AND (channel = 'app' OR (channel = 'push' AND status = 'pending' AND attempts = 0))
            """)
    }

    /// Marks the notice `id` of `user` read, with every other delivery of the same event to them (its pushes); the
    /// delivery as it is now, nil when it is not theirs (or not shown yet).
    func markRead(_ c: Connection, _ id: UUID, user: UUID) throws -> DeliveryRecord? {
        guard let row = try c.first("""
            SELECT event_id FROM notify.deliveries WHERE id = \(id) AND user_id = \(user) AND (channel <> 'app' OR sent_at <= now())
            """) else { return nil }
        let event: String = try row["event_id"]
        try c.execute("UPDATE notify.deliveries SET read_at = now() WHERE user_id = \(user) AND event_id = \(event) AND read_at IS NULL")
        return try c.one(DeliveryRecord.self, "SELECT \(DeliveryRecord.columns) FROM notify.deliveries WHERE id = \(id)")
    }

    /// Marks everything shown to `user` read; how many were not.
    func markAllRead(_ c: Connection, user: UUID) throws -> Int {
        try c.execute("""
            UPDATE notify.deliveries SET read_at = now() WHERE user_id = \(user) AND read_at IS NULL AND (channel <> 'app' OR sent_at <= now())
            """)
    }

    /// Notes a story posted to a group in the digest window starting `window` (again: nothing changes); how many
    /// stories of that window each of `people` did not write. Windows long past are forgotten.
    func recordGroupStory(_ c: Connection, group: UUID, name: String, window: Date, story: UUID, author: UUID,
                          for people: [UUID]) throws -> [UUID: Int] {
        try c.execute("""
            INSERT INTO notify.group_stories (group_id, window_start, story_id, author_id, group_name)
            VALUES (\(group), \(window), \(story), \(author), \(name))
            ON CONFLICT DO NOTHING
            """)
        try c.execute("DELETE FROM notify.group_stories WHERE group_id = \(group) AND window_start < \(window)::timestamptz - interval '7 days'")
        var counts: [UUID: Int] = [:]
        for row in try c.rows("""
            SELECT p.id, (SELECT count(*)::int FROM notify.group_stories s
                          WHERE s.group_id = \(group) AND s.window_start = \(window) AND s.author_id <> p.id) AS n
            FROM unnest(\(PostgresArray(people))::uuid[]) AS p(id)
            """) {
            counts[try row["id"]] = try row["n"]
        }
        return counts
    }
}
