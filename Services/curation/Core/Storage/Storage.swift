import Features
import Foundation
import Models
import Postgres

// MARK: - Records

struct SubjectRecord { let id: UUID; let name: String; let position: Int; let topicCount: Int; let createdAt: Date; let updatedAt: Date }
struct TopicRecord { let id: UUID; let subjectId: UUID; let name: String; let position: Int; let videoCount: Int; let createdAt: Date; let updatedAt: Date }

/// A video as the catalogue holds it, with what the reader did with it when asked.
struct VideoRecord {
    let id: UUID
    let youtubeId: String
    let topicId: UUID
    let position: Int
    let subtopic: String
    let path: String
    let title: String
    let description: String
    let parentDescription: String
    let captions: String?
    let channel: String
    let partnerContent: Bool
    let durationSeconds: Int
    let license: String?
    let createdAt: Date
    let updatedAt: Date
    var likeCount: Int?
    var commentCount: Int?
    var liked: Bool?
    var watched: Bool?

    static let columns = """
        v.id, v.youtube_id, v.topic_id, v.position, v.subtopic, v.path, v.title, v.description, v.parent_description, v.captions,
        v.channel, v.partner_content, v.duration_seconds, v.license, v.created_at, v.updated_at
        """

    init(_ r: Row) throws {
        id = try r["id"]; youtubeId = try r["youtube_id"]; topicId = try r["topic_id"]; position = try r["position"]
        subtopic = try r["subtopic"]; path = try r["path"]; title = try r["title"]; description = try r["description"]
        parentDescription = try r["parent_description"]; captions = try r.decode("captions"); channel = try r["channel"]
        partnerContent = try r["partner_content"]; durationSeconds = try r["duration_seconds"]; license = try r.decode("license")
        createdAt = try r["created_at"]; updatedAt = try r["updated_at"]
        // Present only where a query asks for them.
        likeCount = (try? r.decode("like_count", as: Int.self)) ?? nil; commentCount = (try? r.decode("comment_count", as: Int.self)) ?? nil
        liked = (try? r.decode("liked", as: Bool.self)) ?? nil; watched = (try? r.decode("watched", as: Bool.self)) ?? nil
    }
}

struct CommentRecord {
    let id: UUID; let videoId: UUID; let authorId: UUID; let authorName: String?; let authorAvatar: UUID?; let authorPicture: String?; let text: String; let createdAt: Date
}

struct PlaylistRecord {
    let id: UUID
    let ownerId: UUID
    var name: String
    var description: String?
    var isPublic: Bool
    let createdAt: Date
    var updatedAt: Date
    var videoIds: [UUID] = []

    init(_ r: Row) throws {
        id = try r["id"]; ownerId = try r["owner_id"]; name = try r["name"]; description = try r.decode("description")
        isPublic = try r["public"]; createdAt = try r["created_at"]; updatedAt = try r["updated_at"]
    }
}

/// One line of a catalogue file, as it is stored.
struct CatalogueEntry: Decodable {
    let youtubeId: String
    let title: String
    let description: String
    let durationSeconds: Int
    let channel: String
    let partnerContent: Bool?
    let subject: String
    let topic: String
    let subtopic: String
    let path: [String]
    let parentDescription: String?
    let captions: String?
    let sourceUrl: String?
    let license: String?
}

/// The curation schema's SQL, and nothing else.
struct CurationStorage: Sendable {
    // MARK: The catalogue

    func upsertSubject(_ c: Connection, name: String, position: Int) throws -> UUID {
        try c.first("""
            INSERT INTO curation.subjects (id, name, position) VALUES ($1, $2, $3)
            ON CONFLICT (name) DO UPDATE SET position = LEAST(curation.subjects.position, $3) RETURNING id
            """, [UUID.v7(), name, position])!["id"]
    }

    func upsertTopic(_ c: Connection, subject: UUID, name: String, position: Int) throws -> UUID {
        try c.first("""
            INSERT INTO curation.topics (id, subject_id, name, position) VALUES ($1, $2, $3, $4)
            ON CONFLICT (subject_id, name) DO UPDATE SET position = LEAST(curation.topics.position, $4) RETURNING id
            """, [UUID.v7(), subject, name, position])!["id"]
    }

    /// Inserts or updates a video by its YouTube id: true when it was new, false when it changed, nil when it was the same.
    func upsertVideo(_ c: Connection, _ e: CatalogueEntry, topic: UUID, position: Int) throws -> Bool? {
        try c.first("""
            INSERT INTO curation.videos (id, youtube_id, topic_id, position, subtopic, path, title, description, parent_description,
                captions, channel, partner_content, duration_seconds, license, source_url)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
            ON CONFLICT (youtube_id) DO UPDATE SET topic_id = $3, position = $4, subtopic = $5, path = $6, title = $7, description = $8,
                parent_description = $9, captions = COALESCE($10, curation.videos.captions), channel = $11, partner_content = $12,
                duration_seconds = $13, license = $14, source_url = $15, updated_at = now()
            WHERE (curation.videos.topic_id, curation.videos.position, curation.videos.title, curation.videos.description,
                   curation.videos.parent_description, curation.videos.subtopic, curation.videos.path, curation.videos.duration_seconds)
                  IS DISTINCT FROM ($3, $4, $7, $8, $9, $5, $6, $13) OR $10::text IS DISTINCT FROM curation.videos.captions
            RETURNING (xmax = 0) AS inserted
            """, [UUID.v7(), e.youtubeId, topic, position, e.subtopic, e.path.joined(separator: " > "), e.title, e.description,
                  e.parentDescription ?? "", e.captions, e.channel, e.partnerContent ?? false, e.durationSeconds, e.license,
                  e.sourceUrl])?["inserted"]
    }

    /// A topic's name and its subject's.
    func topicPlace(_ c: Connection, _ topic: UUID) throws -> (subject: String, topic: String)? {
        try c.first("SELECT s.name AS subject, t.name AS topic FROM curation.topics t JOIN curation.subjects s ON s.id = t.subject_id WHERE t.id = $1",
                     [topic]).map { (try $0["subject"], try $0["topic"]) }
    }

    func position(_ c: Connection, of youtubeId: String, in topic: UUID) throws -> Int? {
        try c.first("SELECT position FROM curation.videos WHERE youtube_id = $1 AND topic_id = $2", [youtubeId, topic])?["position"]
    }

    func nextPosition(_ c: Connection, in topic: UUID) throws -> Int {
        try c.first("SELECT COALESCE(max(position), 0) + 1 AS p FROM curation.videos WHERE topic_id = $1", [topic])!["p"]
    }

    func subjects(_ c: Connection) throws -> [SubjectRecord] {
        try c.rows("""
            SELECT s.id, s.name, s.position, s.created_at, s.updated_at, (SELECT count(*) FROM curation.topics t WHERE t.subject_id = s.id) AS n
            FROM curation.subjects s ORDER BY s.position, s.name
            """).map { SubjectRecord(id: try $0["id"], name: try $0["name"], position: try $0["position"], topicCount: try $0["n"],
                                     createdAt: try $0["created_at"], updatedAt: try $0["updated_at"]) }
    }

    func subjectExists(_ c: Connection, _ id: UUID) throws -> Bool {
        try c.first("SELECT 1 AS one FROM curation.subjects WHERE id = $1", [id]) != nil
    }

    func topics(_ c: Connection, subject: UUID) throws -> [TopicRecord] {
        try c.rows("""
            SELECT t.id, t.subject_id, t.name, t.position, t.created_at, t.updated_at,
                   (SELECT count(*) FROM curation.videos v WHERE v.topic_id = t.id) AS n
            FROM curation.topics t WHERE t.subject_id = $1 ORDER BY t.position, t.name
            """, [subject]).map { TopicRecord(id: try $0["id"], subjectId: try $0["subject_id"], name: try $0["name"],
                                             position: try $0["position"], videoCount: try $0["n"], createdAt: try $0["created_at"],
                                             updatedAt: try $0["updated_at"]) }
    }

    func topicExists(_ c: Connection, _ id: UUID) throws -> Bool {
        try c.first("SELECT 1 AS one FROM curation.topics WHERE id = $1", [id]) != nil
    }

    /// A topic's videos in its sequence, the ones `reader` has not watched first; keyset on (watched, position).
    func topicVideos(_ c: Connection, topic: UUID, reader: UUID?, after: (Bool, Int)?, limit: Int) throws -> [VideoRecord] {
        try c.rows("""
            SELECT * FROM (
                SELECT \(VideoRecord.columns), (w.user_id IS NOT NULL) AS watched FROM curation.videos v
                LEFT JOIN curation.watches w ON w.video_id = v.id AND w.user_id = $2 WHERE v.topic_id = $1) v
            WHERE ($3::bool IS NULL OR (v.watched, v.position) > ($3::bool, $4::int))
            ORDER BY v.watched, v.position LIMIT $5
            """, [topic, reader, after?.0, after?.1, limit]).map(VideoRecord.init)
    }

    /// A video's topic, or nil when there is no such video.
    func topic(of video: UUID, _ c: Connection) throws -> UUID? {
        try c.first("SELECT topic_id FROM curation.videos WHERE id = $1", [video]).map { try $0["topic_id"] }
    }

    /// A video with its like and comment counts and whether `reader` liked and watched it.
    func video(_ c: Connection, _ id: UUID, reader: UUID?) throws -> VideoRecord? {
        try c.first("""
            SELECT \(VideoRecord.columns),
                   (SELECT count(*) FROM curation.likes l WHERE l.video_id = v.id) AS like_count,
                   (SELECT count(*) FROM curation.comments cm WHERE cm.video_id = v.id) AS comment_count,
                   EXISTS (SELECT 1 FROM curation.likes l WHERE l.video_id = v.id AND l.user_id = $2) AS liked,
                   EXISTS (SELECT 1 FROM curation.watches w WHERE w.video_id = v.id AND w.user_id = $2) AS watched
            FROM curation.videos v WHERE v.id = $1
            """, [id, reader]).map(VideoRecord.init)
    }

    func videos(_ c: Connection, _ ids: [UUID]) throws -> [UUID: VideoRecord] {
        var out: [UUID: VideoRecord] = [:]
        for v in try c.rows("SELECT \(VideoRecord.columns) FROM curation.videos v WHERE v.id = ANY($1::uuid[])", [PostgresArray(ids)])
            .map(VideoRecord.init) { out[v.id] = v }
        return out
    }

    /// Full-text search, ranked, within a topic when given; keyset on (rank, id).
    func search(_ c: Connection, query: String, topic: UUID?, after: (Double, UUID)?, limit: Int) throws -> [(VideoRecord, Double)] {
        try c.rows("""
            SELECT * FROM (
                SELECT \(VideoRecord.columns), ts_rank(v.search, q)::float8 AS rank
                FROM curation.videos v, websearch_to_tsquery('english', $1) q
                WHERE v.search @@ q AND ($2::uuid IS NULL OR v.topic_id = $2)) v
            WHERE ($3::float8 IS NULL OR (v.rank < $3 OR (v.rank = $3 AND v.id > $4::uuid)))
            ORDER BY v.rank DESC, v.id LIMIT $5
            """, [query, topic, after?.0, after?.1, limit]).map { (try VideoRecord($0), try $0["rank", as: Double.self]) }
    }

    /// Every video's text, for the recommendation index.
    func catalogue(_ c: Connection) throws -> [VideoRecord] {
        try c.rows("SELECT \(unescaped: VideoRecord.columns) FROM curation.videos v ORDER BY v.topic_id, v.position").map(VideoRecord.init)
    }

    /// Changes whenever the catalogue does: its size and its latest update.
    func catalogueVersion(_ c: Connection) throws -> String {
        let row = try c.first("SELECT count(*) AS n, COALESCE(max(updated_at), 'epoch') AS at FROM curation.videos")!
        return "\(try row["n", as: Int.self])@\(try row["at", as: Date.self].timeIntervalSince1970)"
    }

    // MARK: What people do

    /// The videos of `topic` that `user` watched and liked.
    func activity(_ c: Connection, user: UUID, topic: UUID) throws -> (watched: Set<UUID>, liked: Set<UUID>) {
        var watched = Set<UUID>(), liked = Set<UUID>()
        for row in try c.rows("""
            SELECT v.id, (w.user_id IS NOT NULL) AS watched, (l.user_id IS NOT NULL) AS liked FROM curation.videos v
            LEFT JOIN curation.watches w ON w.video_id = v.id AND w.user_id = $1
            LEFT JOIN curation.likes l ON l.video_id = v.id AND l.user_id = $1
            WHERE v.topic_id = $2 AND (w.user_id IS NOT NULL OR l.user_id IS NOT NULL)
            """, [user, topic]) {
            let id: UUID = try row["id"]
            if try row["watched", as: Bool.self] { watched.insert(id) }
            if try row["liked", as: Bool.self] { liked.insert(id) }
        }
        return (watched, liked)
    }

    func recordWatch(_ c: Connection, user: UUID, video: UUID, seconds: Int, completed: Bool) throws -> Date {
        try c.first("""
            INSERT INTO curation.watches (user_id, video_id, seconds, completed) VALUES ($1, $2, $3, $4)
            ON CONFLICT (user_id, video_id) DO UPDATE SET seconds = GREATEST(curation.watches.seconds, $3),
                completed = curation.watches.completed OR $4, watched_at = now()
            RETURNING watched_at
            """, [user, video, seconds, completed])!["watched_at"]
    }

    func history(_ c: Connection, user: UUID, after: (Int64, UUID)?, limit: Int) throws -> [(VideoRecord, seconds: Int, completed: Bool, at: Date, micros: Int64)] {
        try c.rows("""
            SELECT \(VideoRecord.columns), w.seconds, w.completed, w.watched_at, (EXTRACT(EPOCH FROM w.watched_at) * 1000000)::int8 AS at_us
            FROM curation.watches w JOIN curation.videos v ON v.id = w.video_id WHERE w.user_id = $1
              AND ($2::int8 IS NULL OR ((EXTRACT(EPOCH FROM w.watched_at) * 1000000)::int8, w.video_id) < ($2::int8, $3::uuid))
            ORDER BY w.watched_at DESC, w.video_id DESC LIMIT $4
            """, [user, after?.0, after?.1, limit]).map {
            (try VideoRecord($0), try $0["seconds"], try $0["completed"], try $0["watched_at"], try $0["at_us"])
        }
    }

    func like(_ c: Connection, user: UUID, video: UUID) throws -> Bool {
        try c.execute("INSERT INTO curation.likes (user_id, video_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", [user, video]) == 1
    }

    func unlike(_ c: Connection, user: UUID, video: UUID) throws -> Bool {
        try c.execute("DELETE FROM curation.likes WHERE user_id = $1 AND video_id = $2", [user, video]) == 1
    }

    func likes(_ c: Connection, user: UUID, after: (Int64, UUID)?, limit: Int) throws -> [(VideoRecord, micros: Int64)] {
        try c.rows("""
            SELECT \(VideoRecord.columns), (EXTRACT(EPOCH FROM l.created_at) * 1000000)::int8 AS at_us
            FROM curation.likes l JOIN curation.videos v ON v.id = l.video_id WHERE l.user_id = $1
              AND ($2::int8 IS NULL OR ((EXTRACT(EPOCH FROM l.created_at) * 1000000)::int8, l.video_id) < ($2::int8, $3::uuid))
            ORDER BY l.created_at DESC, l.video_id DESC LIMIT $4
            """, [user, after?.0, after?.1, limit]).map { (try VideoRecord($0), try $0["at_us"]) }
    }

    // MARK: Comments

    func addComment(_ c: Connection, video: UUID, author: UUID, text: String) throws -> CommentRecord {
        try comment(c, try c.first("""
            INSERT INTO curation.comments (id, video_id, author_id, text) VALUES ($1, $2, $3, $4) RETURNING id
            """, [UUID.v7(), video, author, text])!["id"])!
    }

    func comment(_ c: Connection, _ id: UUID) throws -> CommentRecord? {
        try c.first("""
            SELECT cm.id, cm.video_id, cm.author_id, cm.text, cm.created_at, p.full_name, p.avatar_media_id, p.picture_url FROM curation.comments cm
            LEFT JOIN curation.profiles p ON p.user_id = cm.author_id WHERE cm.id = $1
            """, [id]).map(Self.commentRecord)
    }

    /// A video's comments, newest first; a signed-in `reader` sees none of people they blocked.
    func comments(_ c: Connection, video: UUID, reader: UUID?, after: (Int64, UUID)?, limit: Int) throws -> [(CommentRecord, micros: Int64)] {
        try c.rows("""
            SELECT cm.id, cm.video_id, cm.author_id, cm.text, cm.created_at, p.full_name, p.avatar_media_id, p.picture_url,
                   (EXTRACT(EPOCH FROM cm.created_at) * 1000000)::int8 AS at_us
            FROM curation.comments cm LEFT JOIN curation.profiles p ON p.user_id = cm.author_id WHERE cm.video_id = $1
              AND ($2::int8 IS NULL OR ((EXTRACT(EPOCH FROM cm.created_at) * 1000000)::int8, cm.id) < ($2::int8, $3::uuid))
              AND ($5::uuid IS NULL OR \(Blocks(schema: "curation").notBlockedBy(reader: 5, author: "cm.author_id")))
            ORDER BY cm.created_at DESC, cm.id DESC LIMIT $4
            """, [video, after?.0, after?.1, limit, reader]).map { (try Self.commentRecord($0), try $0["at_us"]) }
    }

    func deleteComment(_ c: Connection, _ id: UUID) throws {
        try c.execute("DELETE FROM curation.comments WHERE id = $1", [id])
    }

    private static func commentRecord(_ r: Row) throws -> CommentRecord {
        CommentRecord(id: try r["id"], videoId: try r["video_id"], authorId: try r["author_id"], authorName: try r.decode("full_name"),
                      authorAvatar: try r.decode("avatar_media_id"), authorPicture: try r.decode("picture_url"), text: try r["text"], createdAt: try r["created_at"])
    }

    // MARK: Playlists

    func createPlaylist(_ c: Connection, owner: UUID, name: String, description: String?, isPublic: Bool) throws -> PlaylistRecord {
        try PlaylistRecord(c.first("""
            INSERT INTO curation.playlists (id, owner_id, name, description, public) VALUES ($1, $2, $3, $4, $5) RETURNING *
            """, [UUID.v7(), owner, name, description, isPublic])!)
    }

    func playlist(_ c: Connection, _ id: UUID, lock: Bool = false) throws -> PlaylistRecord? {
        guard var p = try c.first("SELECT * FROM curation.playlists WHERE id = $1 \(lock ? "FOR UPDATE" : "")", [id]).map(PlaylistRecord.init) else {
            return nil
        }
        p.videoIds = try c.rows("SELECT video_id FROM curation.playlist_items WHERE playlist_id = $1 ORDER BY position, added_at",
                                [id]).map { try $0["video_id"] }
        return p
    }

    func playlists(_ c: Connection, owner: UUID, onlyPublic: Bool) throws -> [PlaylistRecord] {
        let lists = try c.rows("""
            SELECT * FROM curation.playlists WHERE owner_id = $1 AND (public OR NOT $2) ORDER BY created_at DESC, id DESC LIMIT 500
            """, [owner, onlyPublic]).map(PlaylistRecord.init)
        return try lists.map { try playlist(c, $0.id)! }
    }

    func savePlaylist(_ c: Connection, _ p: PlaylistRecord) throws {
        try c.execute("UPDATE curation.playlists SET name = $2, description = $3, public = $4, updated_at = now() WHERE id = $1",
                      [p.id, p.name, p.description, p.isPublic])
    }

    /// Sets a playlist's items to `videos`, in that order.
    func setItems(_ c: Connection, playlist: UUID, _ videos: [UUID]) throws {
        try c.execute("DELETE FROM curation.playlist_items WHERE playlist_id = $1 AND NOT (video_id = ANY($2::uuid[]))",
                      [playlist, PostgresArray(videos)])
        try c.execute("""
            INSERT INTO curation.playlist_items (playlist_id, video_id, position)
            SELECT $1, v, o FROM unnest($2::uuid[]) WITH ORDINALITY AS t (v, o)
            ON CONFLICT (playlist_id, video_id) DO UPDATE SET position = EXCLUDED.position
            """, [playlist, PostgresArray(videos)])
        try c.execute("UPDATE curation.playlists SET updated_at = now() WHERE id = $1", [playlist])
    }

    func deletePlaylist(_ c: Connection, _ id: UUID) throws {
        try c.execute("DELETE FROM curation.playlists WHERE id = $1", [id])
    }

    // MARK: People

    func profile(_ c: Connection, _ user: UUID) throws -> (name: String, username: String, avatar: UUID?, picture: String?)? {
        try c.first("SELECT full_name, username, avatar_media_id, picture_url FROM curation.profiles WHERE user_id = $1", [user]).map {
            (try $0["full_name"], try $0["username"], try $0.decode("avatar_media_id"), try $0.decode("picture_url"))
        }
    }

    func preferences(_ c: Connection, _ user: UUID) throws -> (theme: String, autoplay: Bool, updatedAt: Date?) {
        guard let row = try c.first("SELECT theme, autoplay, updated_at FROM curation.preferences WHERE user_id = $1", [user]) else {
            return ("system", true, nil)
        }
        return (try row["theme"], try row["autoplay"], try row["updated_at"])
    }

    func setPreferences(_ c: Connection, _ user: UUID, theme: String, autoplay: Bool) throws {
        try c.execute("""
            INSERT INTO curation.preferences (user_id, theme, autoplay) VALUES ($1, $2, $3)
            ON CONFLICT (user_id) DO UPDATE SET theme = $2, autoplay = $3, updated_at = now()
            """, [user, theme, autoplay])
    }

    // MARK: Recommendation scrolls

    func saveScroll(_ c: Connection, id: UUID, user: UUID?, video: UUID, order: [UUID]) throws {
        try c.execute("INSERT INTO curation.scrolls (id, user_id, video_id, videos) VALUES ($1, $2, $3, $4)",
                      [id, user, video, order.map(\.lowercased).joined(separator: ",")])
    }

    func scroll(_ c: Connection, _ id: UUID) throws -> (user: UUID?, video: UUID, order: [UUID])? {
        try c.first("SELECT user_id, video_id, videos FROM curation.scrolls WHERE id = $1", [id]).map {
            (try $0.decode("user_id"), try $0["video_id"],
             try $0["videos", as: String.self].split(separator: ",").compactMap { UUID(uuidString: String($0)) })
        }
    }

    func deleteOldScrolls(_ c: Connection) throws {
        try c.execute("DELETE FROM curation.scrolls WHERE created_at < now() - interval '7 days'")
    }
}
