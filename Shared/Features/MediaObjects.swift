import Foundation
import Imaging
import Postgres
import Runtime
import Web

/// Where `MediaStore` keeps an image's bytes: one object per image (and per rendition) in its `BlobStore`, the
/// table keeping only what is known of it. The objects follow the rows: an object is written before its row
/// commits, and removed after its row's deletion commits (a trigger notes every deleted row in `media_removed`, in
/// the deleting transaction, and `sweepRemoved` deletes the objects), so every way a row goes (an erasure, a
/// take-down, whatever comes later) takes its objects with it, and a rolled-back deletion takes nothing.
extension MediaStore {
    /// The renditions an image may have besides the full one, by name (`key(id, variant:)`): what `sweepRemoved`
    /// deletes with it.
    public static let variants: [String] = ImagePipeline.renditions.map(\.name)

    /// The object key of image `id` (`<schema>/<id>`), or of its rendition `variant` (`<schema>/<id>/<variant>`).
    public func key(_ id: UUID, variant: String? = nil) -> String {
        "\(schema)/\(id.lowercased)" + (variant.map { "/\($0)" } ?? "")
    }

    /// The stored bytes of image `id`: its object, or while its row still holds them (not yet moved) the table's;
    /// nil when neither has them. The store first: once the images are moved, a read asks the database nothing more.
    public func bytes(_ id: UUID, on c: Connection) throws -> [UInt8]? {
        if let bytes = try store.get(key(id)) { return bytes }
        return try c.bytes("SELECT bytes FROM \(unescaped: schema).media WHERE id = \(id) AND bytes IS NOT NULL")
    }

    /// The migration that takes the bytes out of the table: new rows hold none, and deleted rows are noted for
    /// `sweepRemoved` (one statement-level trigger, so an erasure of many rows writes one insert).
    public static func storeSQL(schema: String) -> String {
        """
        ALTER TABLE media ALTER COLUMN bytes DROP NOT NULL;
        CREATE INDEX media_bytes_in_table ON media (id) WHERE bytes IS NOT NULL;
        CREATE TABLE media_removed (
            id uuid PRIMARY KEY,
            removed_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE FUNCTION media_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO \(schema).media_removed (id) SELECT id FROM removed ON CONFLICT DO NOTHING;
            RETURN NULL;
        END $$;
        CREATE TRIGGER media_removed AFTER DELETE ON media REFERENCING OLD TABLE AS removed
            FOR EACH STATEMENT EXECUTE FUNCTION media_removed();
        """
    }

    /// Moves up to `batch` images whose bytes are still in the table into the store, in one transaction: each
    /// object is written (overwritten, if a run before was stopped after writing it), then the rows lose their
    /// bytes, then it commits. Stopped at any moment, nothing is lost: rows not committed keep their bytes and are
    /// moved again. Rows another instance is moving are skipped. Returns how many moved.
    @discardableResult
    public func moveToStore(_ pool: Pool, batch: Int = 20) throws -> Int {
        try pool.withTransaction { c in
            let rows = try c.rows("""
                SELECT id, content_type FROM \(unescaped: schema).media WHERE bytes IS NOT NULL ORDER BY id LIMIT \(batch) FOR UPDATE SKIP LOCKED
                """)
            var moved: [UUID] = []
            for row in rows {  // one image in memory at a time
                let id: UUID = try row["id"]
                guard let bytes = try c.bytes("SELECT bytes FROM \(unescaped: schema).media WHERE id = \(id)") else { continue }
                try store.put(key(id), bytes, contentType: try row["content_type"])
                moved.append(id)
            }
            try c.execute("UPDATE \(unescaped: schema).media SET bytes = NULL WHERE id = ANY(\(PostgresArray(moved))::uuid[])")
            return moved.count
        }
    }

    /// Deletes the objects of up to `batch` deleted images, and forgets them once deleted (a failure leaves them
    /// noted, for the next round). Returns how many.
    @discardableResult
    public func sweepRemoved(_ pool: Pool, batch: Int = 100) throws -> Int {
        try pool.withTransaction { c in
            let ids: [UUID] = try c.rows("""
                SELECT id FROM \(unescaped: schema).media_removed ORDER BY removed_at, id LIMIT \(batch) FOR UPDATE SKIP LOCKED
                """).map { try $0["id"] }
            for id in ids {
                try store.delete(key(id))
                for variant in Self.variants { try store.delete(key(id, variant: variant)) }
            }
            try c.execute("DELETE FROM \(unescaped: schema).media_removed WHERE id = ANY(\(PostgresArray(ids))::uuid[])")
            return ids.count
        }
    }

    /// The background work of the store, every `seconds` (and at start): moving images still in the table (a
    /// database from before the store; rows an older instance wrote during a rolling update) and deleting the
    /// objects of deleted images, each until none is left.
    public func maintenance(_ pool: Pool, logger: Logger, every seconds: TimeInterval = 5) -> Job {
        let name = "media-store"
        return Job(name) { cancellation in
            repeat {
                do {
                    var moved = 0
                    while !cancellation.isCancelled {
                        let n = try moveToStore(pool)
                        moved += n
                        if n == 0 { break }
                    }
                    if moved > 0 { logger.info("moved images from the table into the store", ["images": .int(moved)]) }
                    while !cancellation.isCancelled, try sweepRemoved(pool) > 0 {}
                } catch {
                    logger.warn("periodic job failed", ["job": .string(name), "error": .string("\(error)")])
                }
            } while cancellation.sleep(seconds)
        }
    }
}
