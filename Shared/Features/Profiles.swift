import Events
import Foundation
import Models
import Postgres

/// What a service keeps of people from auth's events: their usernames, names and avatars, in its schema's `profiles`
/// table (`Profiles.tableSQL` in its migrations). The newest event wins, whatever order they arrive in.
public struct Profiles: Sendable {
    /// The service's schema.
    public let schema: String

    public init(schema: String) { self.schema = schema }

    /// The table, for a service's migrations.
    public static let tableSQL = """
        CREATE TABLE profiles (
            user_id uuid PRIMARY KEY,
            username text NOT NULL,
            full_name text NOT NULL,
            avatar_media_id uuid,
            updated_at timestamptz NOT NULL
        );
        """

    /// The column of a picture hosted elsewhere (Google's), added by a later migration of each service.
    public static let pictureSQL = "ALTER TABLE profiles ADD COLUMN picture_url text;"

    /// Records what a `user.registered` or `user.updated` event says; the user's id, and whether they are new (a
    /// `user.registered`). Nil for any other event, or one that names no user.
    @discardableResult
    public func apply(_ event: ReceivedEvent, on c: Connection) throws -> (user: UUID, registered: Bool)? {
        let (user, username, fullName, avatar, picture, at, registered): (UUID, String, String, UUID?, String?, Date, Bool)
        switch event.type {
        case UserRegistered.type:
            let u = try event.decode(UserRegistered.self)
            (user, username, fullName, avatar, picture, at, registered) = (u.userId, u.username, u.fullName, u.avatarMediaId, u.pictureUrl,
                                                                            u.createdAt, true)
        case UserUpdated.type:
            let u = try event.decode(UserUpdated.self)
            (user, username, fullName, avatar, picture, at, registered) = (u.userId, u.username, u.fullName, u.avatarMediaId, u.pictureUrl,
                                                                            u.updatedAt, false)
        default:
            return nil
        }
        let id = user
        guard try !Erasure.isErased(id, schema: schema, on: c) else { return nil }
        try c.execute("""
            INSERT INTO \(unescaped: schema).profiles (user_id, username, full_name, avatar_media_id, picture_url, updated_at)
            VALUES (\(id), \(username), \(fullName), \(avatar), \(picture.flatMap(Self.picture)), \(at))
            ON CONFLICT (user_id) DO UPDATE SET username = EXCLUDED.username, full_name = EXCLUDED.full_name,
                avatar_media_id = EXCLUDED.avatar_media_id, picture_url = EXCLUDED.picture_url, updated_at = EXCLUDED.updated_at
            WHERE \(unescaped: schema).profiles.updated_at <= EXCLUDED.updated_at
            """)
        return (id, registered)
    }

    /// A picture URL as it may be shown: http(s), at most 2,048 characters; anything else is dropped.
    public static func picture(_ url: String) -> String? {
        (url.hasPrefix("https://") || url.hasPrefix("http://")) && url.utf8.count <= 2048 && !url.contains(where: \.isWhitespace) ? url : nil
    }
}
