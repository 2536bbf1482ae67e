import Features
import Foundation
import Models
import Postgres

/// A delivery as the log keeps it.
struct DeliveryRecord: PostgresRecord {
    let id: UUID
    let eventId: String
    let userId: UUID
    let channel: String
    let kind: String
    let address: String
    let subject: String
    var bodyText: String?
    let bodyHTML: String?
    let status: String
    let attempts: Int
    let lastError: String?
    /// When what it links to stops working: not worth sending after.
    let expiresAt: Date?
    let createdAt: Date
    /// When its status or tries last changed (its creation until then).
    let updatedAt: Date
    let sentAt: Date?
    /// A push delivery's subscription (nil once it was removed), and how the push service is to keep it.
    let subscriptionId: UUID?
    /// A native push's device (nil once it was removed).
    let deviceId: UUID?
    let ttl: Int?
    let urgency: String?
    let topic: String?
    /// What the content is fetched from when it is sent (a newsletter's id).
    let reference: String?
    /// The app a mail speaks as (`ClientApp.id`: its sender); nil: the backend's own.
    let app: String?
    /// When its person marked it read (in the app's list).
    let readAt: Date?

    static let columns: SQL = """
        id, event_id, user_id, channel, kind, address, subject, body_text, body_html, status, attempts, last_error, expires_at,
        created_at, updated_at, sent_at, subscription_id, device_id, ttl, urgency, topic, reference, app, read_at
        """

    init(_ r: Row) throws {
        id = try r["id"]; eventId = try r["event_id"]; userId = try r["user_id"]; channel = try r["channel"]; kind = try r["kind"]
        address = try r["address"]; subject = try r["subject"]; bodyText = try r["body_text"]; bodyHTML = try r["body_html"]
        status = try r["status"]; attempts = try r["attempts"]; lastError = try r["last_error"]; expiresAt = try r["expires_at"]
        createdAt = try r["created_at"]; updatedAt = try r["updated_at", as: Date?.self] ?? createdAt
        sentAt = try r["sent_at"]
        subscriptionId = try r["subscription_id"]; deviceId = try r["device_id"]; ttl = try r["ttl"]; urgency = try r["urgency"]
        topic = try r["topic"]; reference = try r["reference"]; app = try r["app"]; readAt = try r["read_at"]
    }
}

/// A browser's or app's push subscription, as registered.
struct SubscriptionRecord: PostgresRecord {
    let id: UUID
    let userId: UUID
    let endpoint: String
    let p256dh: String
    let auth: String
    /// The VAPID public key it was made for (the one that must sign its messages).
    let vapidKey: String
    let expiresAt: Date?
    let createdAt: Date
    /// When it was last subscribed again (its creation until then).
    let updatedAt: Date

    /// Read through the alias `s` (`notify.push_subscriptions s`): a statement that joins it names its own columns apart.
    static let columns: SQL = "s.id, s.user_id, s.endpoint, s.p256dh, s.auth, s.vapid_key, s.expires_at, s.created_at, s.updated_at"

    init(_ r: Row) throws {
        id = try r["id"]; userId = try r["user_id"]; endpoint = try r["endpoint"]; p256dh = try r["p256dh"]; auth = try r["auth"]
        vapidKey = try r["vapid_key"]; expiresAt = try r["expires_at"]; createdAt = try r["created_at"]
        updatedAt = try r["updated_at", as: Date?.self] ?? createdAt
    }
}

/// A push delivery due, with its subscription's keys.
struct DuePush {
    let delivery: DeliveryRecord
    let subscription: SubscriptionRecord?
}

/// The delivery log: what is to be sent to whom, by which channel, and how it went.
struct NotifyStorage: Sendable {
    /// Records a mail of event `eventId` to `user`, once: false when it was recorded before (the event came again).
    /// Without `text`, its content is fetched by `reference` when it is sent.
    func record(_ c: Connection, id: UUID, eventId: String, user: UUID, kind: String, address: String, subject: String,
                text: String?, html: String?, expiresAt: Date?, reference: String? = nil, app: String? = nil) throws -> Bool {
        try c.execute("""
            INSERT INTO notify.deliveries (id, event_id, user_id, channel, kind, address, subject, body_text, body_html, expires_at, reference, app)
            VALUES (\(id), \(eventId), \(user), 'email', \(kind), \(address), \(subject), \(text), \(html), \(expiresAt), \(reference), \(app))
            ON CONFLICT DO NOTHING
            """) == 1
    }

    /// Someone's address as auth last announced it, and whether they proved it.
    func recordPerson(_ c: Connection, _ user: UUID, email: String, verified: Bool) throws {
        try c.execute("""
            INSERT INTO notify.people (user_id, email, email_verified) VALUES (\(user), \(email), \(verified))
            ON CONFLICT (user_id) DO UPDATE SET email = \(email), email_verified = \(verified)
            """)
    }

    /// The address `user` proved, if they did.
    func provenAddress(_ c: Connection, _ user: UUID) throws -> String? {
        try c.first("SELECT email FROM notify.people WHERE user_id = \(user) AND email_verified")?["email"]
    }

    /// Whether `user` wants `kind` by `channel` (yes unless they said no).
    func allows(_ c: Connection, _ user: UUID, kind: String, channel: String) throws -> Bool {
        try c.first("SELECT \(Self.allowed(user: "\(user)", kind: "\(kind)", channel: "\(channel)")) AS yes")!["yes"]
    }

    /// SQL that holds when the user `user` (a value, a column) wants the kind `kind` by the channel `channel`: for a
    /// statement that reads what goes to them to check it too.
    static func allowed(user: SQL, kind: SQL, channel: SQL) -> SQL {
        "coalesce((SELECT enabled FROM notify.preferences p WHERE p.user_id = \(user) AND p.kind = \(kind) AND p.channel = \(channel)), true)"
    }

    func preferences(_ c: Connection, of user: UUID) throws -> [String: Bool] {
        var out: [String: Bool] = [:]
        for row in try c.rows("SELECT kind, channel, enabled FROM notify.preferences WHERE user_id = \(user)") {
            out["\(try row["kind", as: String.self])/\(try row["channel", as: String.self])"] = try row["enabled"]
        }
        return out
    }

    /// Sets a choice; in a transaction. Turning it back on drops its unsubscribe token: a link from a mail sent before
    /// it was turned off answers that it no longer works, instead of turning it off again (the next mail carries a
    /// new one). The token's row is locked first, so a link used at the same moment goes wholly before or after.
    func setPreference(_ c: Connection, _ user: UUID, kind: String, channel: String, enabled: Bool) throws {
        if enabled {
            _ = try c.rows("SELECT 1 FROM notify.unsubscribe_tokens WHERE user_id = \(user) AND kind = \(kind) AND channel = \(channel) FOR UPDATE")
            try c.execute("""
                DELETE FROM notify.unsubscribe_tokens WHERE user_id = \(user) AND kind = \(kind) AND channel = \(channel) AND EXISTS (
                    SELECT 1 FROM notify.preferences WHERE user_id = \(user) AND kind = \(kind) AND channel = \(channel) AND NOT enabled)
                """)
        }
        try c.execute("""
            INSERT INTO notify.preferences (user_id, kind, channel, enabled) VALUES (\(user), \(kind), \(channel), \(enabled))
            ON CONFLICT (user_id, kind, channel) DO UPDATE SET enabled = \(enabled)
            """)
    }

    /// The one-click unsubscribe token of (`user`, `kind`, `channel`): made once, the same in every mail after, until
    /// the choice is turned back on (`setPreference`).
    func unsubscribeToken(_ c: Connection, _ user: UUID, kind: String, channel: String, fresh: String) throws -> String {
        try c.execute("""
            INSERT INTO notify.unsubscribe_tokens (token, user_id, kind, channel) VALUES (\(fresh), \(user), \(kind), \(channel))
            ON CONFLICT (user_id, kind, channel) DO NOTHING
            """)
        return try c.first("SELECT token FROM notify.unsubscribe_tokens WHERE user_id = \(user) AND kind = \(kind) AND channel = \(channel)")?["token"]
            ?? fresh
    }

    /// What an unsubscribe token stands for; `locking` it, for a change by it (see `setPreference`).
    func unsubscribeTarget(_ c: Connection, token: String, locking: Bool = false) throws -> (user: UUID, kind: String, channel: String)? {
        guard let row = try c.first("SELECT user_id, kind, channel FROM notify.unsubscribe_tokens WHERE token = \(token)\(unescaped: locking ? " FOR UPDATE" : "")")
        else { return nil }
        return (try row["user_id"], try row["kind"], try row["channel"])
    }

    /// `user`'s quiet hours: minutes of the day from and to, in their time zone.
    func quietHours(_ c: Connection, of user: UUID) throws -> (starts: Int, ends: Int, timeZone: String)? {
        guard let row = try c.first("SELECT starts_at::int AS s, ends_at::int AS e, time_zone FROM notify.quiet_hours WHERE user_id = \(user)") else {
            return nil
        }
        return (try row["s"], try row["e"], try row["time_zone"])
    }

    /// Sets (or, nil, removes) `user`'s quiet hours; what they held back is looked at again at once.
    func setQuietHours(_ c: Connection, of user: UUID, _ hours: (starts: Int, ends: Int, timeZone: String)?) throws {
        try c.execute("""
            UPDATE notify.deliveries SET next_attempt_at = now(), updated_at = now()
            WHERE user_id = \(user) AND channel = 'push' AND status = 'pending' AND attempts = 0 AND next_attempt_at > now()
            """)
        guard let hours else { try c.execute("DELETE FROM notify.quiet_hours WHERE user_id = \(user)"); return }
        try c.execute("""
            INSERT INTO notify.quiet_hours (user_id, starts_at, ends_at, time_zone) VALUES (\(user), \(hours.starts), \(hours.ends), \(hours.timeZone))
            ON CONFLICT (user_id) DO UPDATE SET starts_at = \(hours.starts), ends_at = \(hours.ends), time_zone = \(hours.timeZone)
            """)
    }

    /// Holds a delivery until `at` (quiet hours), without counting a try.
    func postpone(_ c: Connection, _ id: UUID, until at: Date) throws {
        try c.execute("""
            UPDATE notify.deliveries SET status = 'pending', attempts = attempts - 1, next_attempt_at = \(at), updated_at = now() WHERE id = \(id)
            """)
    }

    /// The subscriptions a push of `kind` to `users` goes to: their live ones, none for those erased here or who said
    /// no to `kind` by push. One statement for them all (a chat message tells a whole room).
    func pushTargets(_ c: Connection, _ users: [UUID], kind: String) throws -> [SubscriptionRecord] {
        guard !users.isEmpty else { return [] }
        return try c.all(SubscriptionRecord.self, """
            SELECT \(SubscriptionRecord.columns) FROM unnest(\(PostgresArray(users))::uuid[], \(PostgresArray(users.map(Erasure.hash)))::text[]) AS t(user_id, id_hash)
            JOIN notify.push_subscriptions s ON s.user_id = t.user_id
            WHERE \(Erasure.notErased("t.id_hash", schema: "notify")) AND \(Self.allowed(user: "t.user_id", kind: "\(kind)", channel: "'push'"))
            ORDER BY s.created_at, s.id
            """).filter { ($0.expiresAt ?? .distantFuture) > Date() }
    }

    /// Records a push of event `eventId` to each of `subscriptions` (`pushTargets`) and `devices` (`deviceTargets`),
    /// once per subscription or device, with the transaction's next round trip. `payload` is the JSON the device receives; `address` shows which push service
    /// took it. Without `payload`, it is made when the push is sent, from `reference`; `at`: not before then.
    func recordPush(_ c: Connection, eventId: String, to subscriptions: [SubscriptionRecord], devices: [DeviceRecord] = [], kind: String,
                    title: String,
                    payload: String?, ttl: Int, urgency: String, topic: String?, expiresAt: Date?, at: Date? = nil,
                    reference: String? = nil) throws {
        for s in subscriptions {
            let origin = URL(string: s.endpoint).map { "\($0.scheme ?? "https")://\($0.host ?? "")" + ($0.port.map { ":\($0)" } ?? "") } ?? ""
            try c.enqueue("""
                INSERT INTO notify.deliveries (id, event_id, user_id, channel, kind, address, subject, body_text, expires_at,
                                               subscription_id, ttl, urgency, topic, next_attempt_at, reference)
                VALUES (\(UUID.v7()), \(eventId), \(s.userId), 'push', \(kind), \(origin), \(title), \(payload), \(expiresAt), \(s.id), \(ttl),
                        \(urgency), \(topic), coalesce(\(at), now()), \(reference)) ON CONFLICT DO NOTHING
                """)
        }
        for d in devices {
            try c.enqueue("""
                INSERT INTO notify.deliveries (id, event_id, user_id, channel, kind, address, subject, body_text, expires_at,
                                               device_id, ttl, urgency, topic, next_attempt_at, reference)
                VALUES (\(UUID.v7()), \(eventId), \(d.userId), 'push', \(kind), \(d.address), \(title), \(payload), \(expiresAt), \(d.id), \(ttl),
                        \(urgency), \(topic), coalesce(\(at), now()), \(reference)) ON CONFLICT DO NOTHING
                """)
        }
    }

    /// Drops a delivery that turned out to have nothing to tell (a chat read already): it was never sent.
    func discard(_ c: Connection, _ id: UUID) throws {
        try c.execute("DELETE FROM notify.deliveries WHERE id = \(id)")
    }

    func joinRoom(_ c: Connection, _ room: UUID, _ user: UUID) throws {
        try c.enqueue("INSERT INTO notify.room_members (room_id, user_id) VALUES (\(room), \(user)) ON CONFLICT DO NOTHING")
    }

    func leaveRoom(_ c: Connection, _ room: UUID, _ user: UUID) throws {
        try c.execute("DELETE FROM notify.room_members WHERE room_id = \(room) AND user_id = \(user)")
    }

    func roomMembers(_ c: Connection, _ room: UUID) throws -> [UUID] {
        try c.rows("SELECT user_id FROM notify.room_members WHERE room_id = \(room)").map { try $0["user_id"] }
    }

    /// Takes up to `limit` deliveries by `channel` that are due, each leased for `lease` seconds: another sender (or
    /// this one, restarted after a crash) takes it again only once the lease ran out, so a kill repeats only what was
    /// in flight.
    func claimDue(_ c: Connection, channel: String, limit: Int, lease: TimeInterval) throws -> [DeliveryRecord] {
        try c.all(DeliveryRecord.self, """
            UPDATE notify.deliveries SET status = 'sending', attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => \(lease)),
                updated_at = now()
            WHERE id IN (SELECT id FROM notify.deliveries WHERE status IN ('pending', 'sending') AND next_attempt_at <= now()
                         AND channel = \(channel) ORDER BY next_attempt_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
            RETURNING \(DeliveryRecord.columns)
            """)
    }

    func subscription(_ c: Connection, _ id: UUID) throws -> SubscriptionRecord? {
        try c.one(SubscriptionRecord.self, "SELECT \(SubscriptionRecord.columns) FROM notify.push_subscriptions s WHERE s.id = \(id)")
    }

    /// Registers an endpoint for `user` (again: its keys and owner are replaced, as when a browser subscribes anew).
    func subscribe(_ c: Connection, id: UUID, user: UUID, endpoint: String, p256dh: String, auth: String, vapidKey: String,
                   expiresAt: Date?) throws -> SubscriptionRecord {
        try c.one(SubscriptionRecord.self, """
            INSERT INTO notify.push_subscriptions AS s (id, user_id, endpoint, p256dh, auth, vapid_key, expires_at)
            VALUES (\(id), \(user), \(endpoint), \(p256dh), \(auth), \(vapidKey), \(expiresAt))
            ON CONFLICT (endpoint) DO UPDATE SET user_id = \(user), p256dh = \(p256dh), auth = \(auth), vapid_key = \(vapidKey),
                expires_at = \(expiresAt), updated_at = now()
            RETURNING \(SubscriptionRecord.columns)
            """)!
    }

    func subscriptions(_ c: Connection, of user: UUID) throws -> [SubscriptionRecord] {
        try c.all(SubscriptionRecord.self, "SELECT \(SubscriptionRecord.columns) FROM notify.push_subscriptions s WHERE s.user_id = \(user) ORDER BY s.created_at, s.id")
    }

    func subscriptionCount(_ c: Connection, of user: UUID) throws -> Int {
        try c.first("SELECT count(*)::int AS n FROM notify.push_subscriptions WHERE user_id = \(user)")?["n"] ?? 0
    }

    /// Removes a subscription (`user`'s own, when given); false when there was none. Its deliveries not yet sent are
    /// given up.
    @discardableResult
    func unsubscribe(_ c: Connection, _ id: UUID, user: UUID?) throws -> Bool {
        try c.execute("""
            UPDATE notify.deliveries SET status = 'failed', body_text = NULL, last_error = 'unsubscribed', updated_at = now()
            WHERE subscription_id = \(id) AND status IN ('pending', 'sending')
            """)
        return try c.execute("DELETE FROM notify.push_subscriptions WHERE id = \(id) AND (\(user)::uuid IS NULL OR user_id = \(user)::uuid)") == 1
    }

    /// A parcel's sender and recipient, as far as notify knows them.
    func parcelParties(_ c: Connection, _ id: UUID) throws -> (sender: UUID, recipient: UUID?)? {
        guard let row = try c.first("SELECT sender_id, recipient_id FROM notify.parcels WHERE id = \(id)") else { return nil }
        return (try row["sender_id"], try row["recipient_id"])
    }

    func recordParcel(_ c: Connection, _ id: UUID, sender: UUID, recipient: UUID?) throws {
        try c.enqueue("""
            INSERT INTO notify.parcels (id, sender_id, recipient_id) VALUES (\(id), \(sender), \(recipient))
            ON CONFLICT (id) DO UPDATE SET recipient_id = coalesce(\(recipient)::uuid, notify.parcels.recipient_id)
            """)
    }

    /// Sent: what it said is not kept (a verification or reset link is a secret).
    func markSent(_ c: Connection, _ id: UUID) throws {
        try c.execute("""
            UPDATE notify.deliveries SET status = 'sent', sent_at = now(), body_text = NULL, body_html = NULL, last_error = NULL, updated_at = now()
            WHERE id = \(id)
            """)
    }

    /// Not sent: tried again in `retryIn` seconds, or (nil) given up, its text dropped.
    func markFailed(_ c: Connection, _ id: UUID, error: String, retryIn: TimeInterval?) throws {
        let reason = String(error.prefix(500))
        if let retryIn {
            try c.execute("""
                UPDATE notify.deliveries SET status = 'pending', next_attempt_at = now() + make_interval(secs => \(retryIn)), last_error = \(reason),
                    updated_at = now()
                WHERE id = \(id)
                """)
        } else {
            try c.execute("""
                UPDATE notify.deliveries SET status = 'failed', body_text = NULL, body_html = NULL, last_error = \(reason), updated_at = now() WHERE id = \(id)
                """)
        }
    }

    /// `user`'s deliveries, the newest first, before `before` (a delivery id: they are time-ordered), by `channel`
    /// only when given, those not read only when `unread`; a notice in the app once it is shown.
    func deliveries(_ c: Connection, of user: UUID, before: UUID?, limit: Int, channel: String? = nil, unread: Bool = false) throws -> [DeliveryRecord] {
        try c.all(DeliveryRecord.self, """
            SELECT \(DeliveryRecord.columns) FROM notify.deliveries
            WHERE user_id = \(user) AND (\(before)::uuid IS NULL OR id < \(before)::uuid) AND (\(channel)::text IS NULL OR channel = \(channel)::text)
                AND (NOT \(unread) OR read_at IS NULL) AND (channel <> 'app' OR sent_at <= now())
            ORDER BY id DESC LIMIT \(limit)
            """)
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
        try c.execute("DELETE FROM notify.deliveries WHERE user_id = \(user)")
        try c.execute("DELETE FROM notify.push_subscriptions WHERE user_id = \(user)")
        try c.execute("DELETE FROM notify.push_devices WHERE user_id = \(user)")
        for table in ["people", "preferences", "unsubscribe_tokens", "quiet_hours", "room_members"] {
            try c.execute("DELETE FROM notify.\(unescaped: table) WHERE user_id = \(user)")
        }
        try c.execute("DELETE FROM notify.group_stories WHERE author_id = \(user)")
        try c.execute("DELETE FROM notify.parcels WHERE sender_id = \(user)")
        try c.execute("UPDATE notify.parcels SET recipient_id = NULL WHERE recipient_id = \(user)")
    }

    /// What notify holds of `user`, for their export: what was sent to them, and when.
    func export(_ c: Connection, _ user: UUID) throws -> [String: Any] {
        try Export.document(c, """
            SELECT json_build_object('deliveries', (SELECT coalesce(json_agg(json_build_object(
                'id', id, 'kind', kind, 'channel', channel, 'address', address, 'subject', subject, 'status', status,
                'createdAt', created_at, 'updatedAt', coalesce(updated_at, created_at), 'sentAt', sent_at, 'readAt', read_at) ORDER BY id), '[]'::json)
                FROM notify.deliveries WHERE user_id = \(user)),
                'pushSubscriptions', (SELECT coalesce(json_agg(json_build_object('id', id, 'endpoint', endpoint, 'createdAt', created_at,
                'updatedAt', coalesce(updated_at, created_at))
                ORDER BY created_at), '[]'::json) FROM notify.push_subscriptions WHERE user_id = \(user)),
                'pushDevices', (SELECT coalesce(json_agg(json_build_object('id', id, 'platform', platform, 'app', app,
                'environment', environment, 'locale', locale, 'timeZone', time_zone, 'createdAt', created_at,
                'updatedAt', coalesce(updated_at, created_at)) ORDER BY created_at), '[]'::json) FROM notify.push_devices WHERE user_id = \(user)),
                'preferences', (SELECT coalesce(json_agg(json_build_object('kind', kind, 'channel', channel, 'enabled', enabled)
                ORDER BY kind, channel), '[]'::json) FROM notify.preferences WHERE user_id = \(user)),
                'quietHours', (SELECT json_build_object('from', starts_at, 'to', ends_at, 'timeZone', time_zone) FROM notify.quiet_hours
                WHERE user_id = \(user)),
                'address', (SELECT json_build_object('email', email, 'verified', email_verified) FROM notify.people WHERE user_id = \(user)))::text AS export
            """)
    }
}
