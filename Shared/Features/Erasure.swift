import Crypto
import Foundation
import Postgres

/// Forgetting someone whose account was deleted (`user.deleted`), in what the kit keeps for a service: the sent events
/// that name them (the outbox keeps sent rows a while) and the answers kept for their idempotent retries. Events not
/// yet sent stay and go out: their consumers erase what they bring when `user.deleted` reaches them. Each service
/// then erases or anonymises its own tables (`docs/privacy.md` says what is kept and why).
///
/// A service remembers whom it erased by a one-way hash of the id only (`erased_users`), so that an event about them
/// that arrives late (a `user.updated` on another partition) does not bring a profile back.
public enum Erasure {
    /// The table of erased accounts, for a service's migrations.
    public static let tableSQL = """
        CREATE TABLE erased_users (
            id_hash text PRIMARY KEY,
            erased_at timestamptz NOT NULL DEFAULT now()
        );
        """

    /// Who a kept record names in place of someone erased (a chat message's author, an anonymised parcel's sender).
    public static let nobody = UUID(uuidString: "00000000-0000-0000-0000-000000000000")!

    public static func forget(_ user: UUID, schema: String, on c: Connection) throws {
        let id = user.lowercased
        try c.execute("DELETE FROM \(unescaped: schema).outbox WHERE strpos(payload, \(id)) > 0")
        try c.execute("DELETE FROM \(unescaped: schema).idempotency_keys WHERE caller = \(id)")
        try c.execute("INSERT INTO \(unescaped: schema).erased_users (id_hash) VALUES (\(hash(user))) ON CONFLICT DO NOTHING")
    }

    /// Whether `user` was erased here.
    public static func isErased(_ user: UUID, schema: String, on c: Connection) throws -> Bool {
        try c.first("SELECT 1 AS one FROM \(unescaped: schema).erased_users WHERE id_hash = \(hash(user))") != nil
    }

    /// SQL that holds unless the user whose hash is `hash` (an SQL expression: a parameter, a column) was erased here: for
    /// a statement that reads what concerns them to check it too, instead of a round trip of its own.
    public static func notErased(_ hash: SQL, schema: String) -> SQL {
        "NOT EXISTS (SELECT 1 FROM \(unescaped: schema).erased_users WHERE id_hash = \(hash))"
    }

    public static func hash(_ user: UUID) -> String { hexString(sha256(Array(user.lowercased.utf8))) }
}

extension Profiles {
    /// Forgets a deleted user's name and face.
    public func forget(_ user: UUID, on c: Connection) throws {
        try c.execute("DELETE FROM \(unescaped: schema).profiles WHERE user_id = \(user)")
    }
}

extension MediaStore {
    /// Erases every image `owner` uploaded: its signed URLs stop loading (404).
    public func forget(owner: UUID, on c: Connection) throws {
        try c.execute("DELETE FROM \(unescaped: schema).media WHERE owner_id = \(owner)")
    }
}
