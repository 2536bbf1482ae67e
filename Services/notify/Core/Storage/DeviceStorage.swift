import Features
import Foundation
import Models
import Postgres

/// A phone's installation of an app: where APNs or FCM reaches it.
struct DeviceRecord: PostgresRecord {
    let id: UUID
    let userId: UUID
    /// `apns` or `fcm`.
    let platform: String
    let token: String
    let app: String
    /// APNs: `production` or `sandbox` (a development build's token); FCM: nil.
    let environment: String?
    let locale: String?
    let timeZone: String?
    let createdAt: Date
    /// When it was last registered (its creation until then).
    let updatedAt: Date

    /// Read through the alias `d` (`notify.push_devices d`): a statement that joins it names its own columns apart.
    static let columns: SQL = "d.id, d.user_id, d.platform, d.token, d.app, d.environment, d.locale, d.time_zone, d.created_at, d.updated_at"

    init(_ r: Row) throws {
        id = try r["id"]; userId = try r["user_id"]; platform = try r["platform"]; token = try r["token"]; app = try r["app"]
        environment = try r["environment"]; locale = try r["locale"]; timeZone = try r["time_zone"]
        createdAt = try r["created_at"]; updatedAt = try r["updated_at", as: Date?.self] ?? createdAt
    }

    /// What the delivery log shows as where it went.
    var address: String { platform == "apns" ? (environment == "sandbox" ? "apns-sandbox" : "apns") : "fcm" }
}

extension NotifyStorage {
    /// The language of the device `user` registered last with one (`locale`, a language tag); nil when none says.
    func language(_ c: Connection, of user: UUID) throws -> String? {
        try c.rows("""
            SELECT locale FROM notify.push_devices WHERE user_id = \(user) AND locale IS NOT NULL ORDER BY created_at DESC, id DESC LIMIT 1
            """).first.flatMap { try $0.decode("locale") }
    }

    /// Registers a device (a known token: now `user`'s, with these details); whether it is new. When the token was
    /// someone else's, what still waited to go to it for them is given up.
    func registerDevice(_ c: Connection, id: UUID, user: UUID, platform: String, token: String, app: String, environment: String?,
                        locale: String?, timeZone: String?) throws -> (device: DeviceRecord, created: Bool) {
        if let previous = try c.first("SELECT id, user_id FROM notify.push_devices WHERE platform = \(platform) AND token = \(token) FOR UPDATE"),
           try previous["user_id"] as UUID != user {
            try failDeliveries(c, device: try previous["id"], why: "the device was registered by someone else")
        }
        let row = try c.first("""
            INSERT INTO notify.push_devices AS d (id, user_id, platform, token, app, environment, locale, time_zone)
            VALUES (\(id), \(user), \(platform), \(token), \(app), \(environment), \(locale), \(timeZone))
            ON CONFLICT (platform, token) DO UPDATE SET user_id = \(user), app = \(app), environment = \(environment), locale = \(locale),
                time_zone = \(timeZone), updated_at = now()
            RETURNING \(DeviceRecord.columns), (xmax = 0) AS inserted
            """)!
        return (try DeviceRecord(row), try row["inserted"])
    }

    /// Drops `user`'s devices past the `keep` registered most recently.
    func keepNewestDevices(_ c: Connection, of user: UUID, _ keep: Int) throws {
        let old = try c.rows("""
            SELECT id FROM notify.push_devices WHERE user_id = \(user) ORDER BY coalesce(updated_at, created_at) DESC, id DESC OFFSET \(keep)
            """).map { try $0["id"] as UUID }
        for id in old { try removeDevice(c, id, user: user) }
    }

    func devices(_ c: Connection, of user: UUID) throws -> [DeviceRecord] {
        try c.all(DeviceRecord.self, "SELECT \(DeviceRecord.columns) FROM notify.push_devices d WHERE d.user_id = \(user) ORDER BY d.created_at, d.id")
    }

    func device(_ c: Connection, _ id: UUID) throws -> DeviceRecord? {
        try c.one(DeviceRecord.self, "SELECT \(DeviceRecord.columns) FROM notify.push_devices d WHERE d.id = \(id)")
    }

    /// Removes a device (`user`'s own, when given); false when there was none. What waited to go to it is given up.
    @discardableResult
    func removeDevice(_ c: Connection, _ id: UUID, user: UUID?) throws -> Bool {
        guard try c.first("SELECT 1 AS x FROM notify.push_devices WHERE id = \(id) AND (\(user)::uuid IS NULL OR user_id = \(user)::uuid) FOR UPDATE")
            != nil else { return false }
        try failDeliveries(c, device: id, why: "the device was removed")
        return try c.execute("DELETE FROM notify.push_devices WHERE id = \(id)") == 1
    }

    private func failDeliveries(_ c: Connection, device: UUID, why: String) throws {
        try c.execute("""
            UPDATE notify.deliveries SET status = 'failed', body_text = NULL, last_error = \(why), updated_at = now()
            WHERE device_id = \(device) AND status IN ('pending', 'sending')
            """)
    }

    /// The devices a push of `kind` to `users` goes to: those of `app`, none for people erased here or who said no
    /// to `kind` by push (the same preferences as Web Push).
    func deviceTargets(_ c: Connection, _ users: [UUID], kind: String, app: String) throws -> [DeviceRecord] {
        guard !users.isEmpty else { return [] }
        return try c.all(DeviceRecord.self, """
            SELECT \(DeviceRecord.columns) FROM unnest(\(PostgresArray(users))::uuid[], \(PostgresArray(users.map(Erasure.hash)))::text[]) AS t(user_id, id_hash)
            JOIN notify.push_devices d ON d.user_id = t.user_id AND d.app = \(app)
            WHERE \(Erasure.notErased("t.id_hash", schema: "notify")) AND \(Self.allowed(user: "t.user_id", kind: "\(kind)", channel: "'push'"))
            ORDER BY d.created_at, d.id
            """)
    }
}
