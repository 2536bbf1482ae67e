import Events
import Foundation
import Geo
import Models
import Postgres

/// What dispatch knows of a person from auth's events.
struct ProfileRecord: PostgresRecord {
    let username: String
    let fullName: String
    let avatar: UUID?
    let picture: String?
    let phone: String?

    init(_ r: Row) throws {
        username = try r["username"]; fullName = try r["full_name"]; avatar = try r.decode("avatar_media_id")
        picture = try r.decode("picture_url"); phone = try r.decode("phone")
    }

    /// The columns, from the profiles' table as `f`.
    static let columns: SQL = "f.username, f.full_name, f.avatar_media_id, f.picture_url, f.phone"
}

extension Row {
    /// The place in the `lat` and `lon` columns; nil when either is null.
    func point() throws -> GeoPoint? {
        let lat: Double? = try decode("lat"), lon: Double? = try decode("lon")
        return lat.flatMap { la in lon.map { GeoPoint(lat: la, lon: $0) } }
    }
}

/// The dispatch schema's SQL.
struct DispatchStorage {
    /// The account with `username` (case-insensitive) as auth's events told it; nil when dispatch knows nobody by it.
    func userId(_ c: Connection, username: String) throws -> UUID? {
        try c.first("SELECT user_id FROM dispatch.profiles WHERE lower(username) = lower(\(username)) ORDER BY updated_at DESC LIMIT 1")?["user_id"]
    }

    /// A person's name and avatar as auth's events told them.
    func profile(_ c: Connection, _ user: UUID) throws -> ProfileRecord? {
        try c.one(ProfileRecord.self, "SELECT \(ProfileRecord.columns) FROM dispatch.profiles f WHERE user_id = \(user)")
    }

    /// Records how to reach a person from a `user.registered` or `user.updated`, when that event is the newest of the
    /// user's (`Profiles.apply` kept it): their phone number (a number removed is removed here too), and their e-mail
    /// address with whether they proved it.
    func recordContact(_ c: Connection, _ event: ReceivedEvent) throws {
        let (user, email, verified, phone, at): (UUID, String, Bool?, String?, Date)
        if event.type == UserUpdated.type, let u = try? event.decode(UserUpdated.self) {
            (user, email, verified, phone, at) = (u.userId, u.email, u.emailVerified, u.phone, u.updatedAt)
        } else if event.type == UserRegistered.type, let u = try? event.decode(UserRegistered.self) {
            (user, email, verified, phone, at) = (u.userId, u.email, u.emailVerified, nil, u.createdAt)
        } else { return }
        try c.execute("""
            UPDATE dispatch.profiles SET phone = \(phone), email = \(email), email_verified = \(verified ?? false)
            WHERE user_id = \(user) AND updated_at = \(at)
            """)
    }

    /// The account that proved `email` (case-insensitive), as auth's events told it; nil when none did.
    func userId(_ c: Connection, verifiedEmail email: String) throws -> UUID? {
        try c.first("""
            SELECT user_id FROM dispatch.profiles WHERE lower(email) = lower(\(email)) AND email_verified ORDER BY updated_at DESC LIMIT 1
            """)?["user_id"]
    }
}
