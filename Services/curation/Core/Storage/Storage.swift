import Features
import Foundation
import Models
import Postgres

// MARK: - Records

struct SubjectRecord: PostgresRecord {
    let id: UUID; let name: String; let position: Int; let topicCount: Int; let createdAt: Date; let updatedAt: Date

    static let columns: SQL = """
        s.id, s.name, s.position, s.created_at, s.updated_at, (SELECT count(*) FROM curation.topics t WHERE t.subject_id = s.id) AS n
        """

    init(_ r: Row) throws {
        id = try r["id"]; name = try r["name"]; position = try r["position"]; topicCount = try r["n"]
        createdAt = try r["created_at"]; updatedAt = try r["updated_at"]
    }
}

struct TopicRecord: PostgresRecord {
    let id: UUID; let subjectId: UUID; let name: String; let position: Int; let videoCount: Int; let createdAt: Date; let updatedAt: Date

    static let columns: SQL = """
        t.id, t.subject_id, t.name, t.position, t.created_at, t.updated_at,
        (SELECT count(*) FROM curation.videos v WHERE v.topic_id = t.id) AS n
        """

    init(_ r: Row) throws {
        id = try r["id"]; subjectId = try r["subject_id"]; name = try r["name"]; position = try r["position"]; videoCount = try r["n"]
        createdAt = try r["created_at"]; updatedAt = try r["updated_at"]
    }
}

/// A video as the catalogue holds it, with what the reader did with it when asked.
struct VideoRecord: PostgresRecord {
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

    static let columns: SQL = """
        v.id, v.youtube_id, v.topic_id, v.position, v.subtopic, v.path, v.title, v.description, v.parent_description, v.captions,
        v.channel, v.partner_content, v.duration_seconds, v.license, v.created_at, v.updated_at
        """

    init(_ r: Row) throws {
        id = try r["id"]; youtubeId = try r["youtube_id"]; topicId = try r["topic_id"]; position = try r["position"]
        subtopic = try r["subtopic"]; path = try r["path"]; title = try r["title"]; description = try r["description"]
        parentDescription = try r["parent_description"]; captions = try r["captions"]; channel = try r["channel"]
        partnerContent = try r["partner_content"]; durationSeconds = try r["duration_seconds"]; license = try r["license"]
        createdAt = try r["created_at"]; updatedAt = try r["updated_at"]
        // Present only where a query asks for them.
        likeCount = (try? r.decode("like_count", as: Int.self)) ?? nil; commentCount = (try? r.decode("comment_count", as: Int.self)) ?? nil
        liked = (try? r.decode("liked", as: Bool.self)) ?? nil; watched = (try? r.decode("watched", as: Bool.self)) ?? nil
    }
}

/// A comment with its author's name and face; its columns join `curation.comments cm` with `curation.profiles p`.
struct CommentRecord: PostgresRecord {
    let id: UUID; let videoId: UUID; let authorId: UUID; let authorName: String?; let authorAvatar: UUID?; let authorPicture: String?; let text: String; let createdAt: Date

    static let columns: SQL = "cm.id, cm.video_id, cm.author_id, cm.text, cm.created_at, p.full_name, p.avatar_media_id, p.picture_url"

    init(_ r: Row) throws {
        id = try r["id"]; videoId = try r["video_id"]; authorId = try r["author_id"]; authorName = try r["full_name"]
        authorAvatar = try r["avatar_media_id"]; authorPicture = try r["picture_url"]; text = try r["text"]; createdAt = try r["created_at"]
    }
}

struct PlaylistRecord: PostgresRecord {
    let id: UUID
    let ownerId: UUID
    var name: String
    var description: String?
    var isPublic: Bool
    let createdAt: Date
    var updatedAt: Date
    var videoIds: [UUID] = []

    static let columns: SQL = "id, owner_id, name, description, public, created_at, updated_at"

    init(_ r: Row) throws {
        id = try r["id"]; ownerId = try r["owner_id"]; name = try r["name"]; description = try r["description"]
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
            INSERT INTO curation.subjects (id, name, position) VALUES (\(UUID.v7()), \(name), \(position))
            ON CONFLICT (name) DO UPDATE SET position = LEAST(curation.subjects.position, \(position)) RETURNING id
            """)!["id"]
    }

    func upsertTopic(_ c: Connection, subject: UUID, name: String, position: Int) throws -> UUID {
        try c.first("""
            INSERT INTO curation.topics (id, subject_id, name, position) VALUES (\(UUID.v7()), \(subject), \(name), \(position))
            ON CONFLICT (subject_id, name) DO UPDATE SET position = LEAST(curation.topics.position, \(position)) RETURNING id
            """)!["id"]
    }

    /// Inserts or updates a video by its YouTube id: true when it was new, false when it changed, nil when it was the same.
    func upsertVideo(_ c: Connection, _ e: CatalogueEntry, topic: UUID, position: Int) throws -> Bool? {
        let path = e.path.joined(separator: " > "), parentDescription = e.parentDescription ?? "", partnerContent = e.partnerContent ?? false
        return try c.first("""
            INSERT INTO curation.videos (id, youtube_id, topic_id, position, subtopic, path, title, description, parent_description,
                captions, channel, partner_content, duration_seconds, license, source_url)
            VALUES (\(UUID.v7()), \(e.youtubeId), \(topic), \(position), \(e.subtopic), \(path), \(e.title), \(e.description),
                \(parentDescription), \(e.captions), \(e.channel), \(partnerContent), \(e.durationSeconds), \(e.license), \(e.sourceUrl))
            ON CONFLICT (youtube_id) DO UPDATE SET topic_id = \(topic), position = \(position), subtopic = \(e.subtopic), path = \(path),
                title = \(e.title), description = \(e.description), parent_description = \(parentDescription),
                captions = COALESCE(\(e.captions)::text, curation.videos.captions), channel = \(e.channel), partner_content = \(partnerContent),
                duration_seconds = \(e.durationSeconds), license = \(e.license), source_url = \(e.sourceUrl), updated_at = now()
            WHERE (curation.videos.topic_id, curation.videos.position, curation.videos.title, curation.videos.description,
                   curation.videos.parent_description, curation.videos.subtopic, curation.videos.path, curation.videos.duration_seconds)
                  IS DISTINCT FROM (\(topic)::uuid, \(position)::int, \(e.title)::text, \(e.description)::text, \(parentDescription)::text,
                                    \(e.subtopic)::text, \(path)::text, \(e.durationSeconds)::int)
                  OR \(e.captions)::text IS DISTINCT FROM curation.videos.captions
            RETURNING (xmax = 0) AS inserted
            """)?["inserted"]
    }

    /// A topic's name and its subject's.
    func topicPlace(_ c: Connection, _ topic: UUID) throws -> (subject: String, topic: String)? {
        try c.first("SELECT s.name AS subject, t.name AS topic FROM curation.topics t JOIN curation.subjects s ON s.id = t.subject_id WHERE t.id = \(topic)")
            .map { (try $0["subject"], try $0["topic"]) }
    }

    func position(_ c: Connection, of youtubeId: String, in topic: UUID) throws -> Int? {
        try c.first("SELECT position FROM curation.videos WHERE youtube_id = \(youtubeId) AND topic_id = \(topic)")?["position"]
    }

    func nextPosition(_ c: Connection, in topic: UUID) throws -> Int {
        try c.first("SELECT COALESCE(max(position), 0) + 1 AS p FROM curation.videos WHERE topic_id = \(topic)")!["p"]
    }

    func subjects(_ c: Connection) throws -> [SubjectRecord] {
        try c.all(SubjectRecord.self, "SELECT \(SubjectRecord.columns) FROM curation.subjects s ORDER BY s.position, s.name")
    }

    func subjectExists(_ c: Connection, _ id: UUID) throws -> Bool {
        try c.first("SELECT 1 AS one FROM curation.subjects WHERE id = \(id)") != nil
    }

    func topics(_ c: Connection, subject: UUID) throws -> [TopicRecord] {
        try c.all(TopicRecord.self, "SELECT \(TopicRecord.columns) FROM curation.topics t WHERE t.subject_id = \(subject) ORDER BY t.position, t.name")
    }

    func topicExists(_ c: Connection, _ id: UUID) throws -> Bool {
        try c.first("SELECT 1 AS one FROM curation.topics WHERE id = \(id)") != nil
    }

    /// A topic's videos in its sequence, the ones `reader` has not watched first; keyset on (watched, position).
    func topicVideos(_ c: Connection, topic: UUID, reader: UUID?, after: (Bool, Int)?, limit: Int) throws -> [VideoRecord] {
        try c.all(VideoRecord.self, """
            SELECT \(VideoRecord.columns), v.watched FROM (
                SELECT \(VideoRecord.columns), (w.user_id IS NOT NULL) AS watched FROM curation.videos v
                LEFT JOIN curation.watches w ON w.video_id = v.id AND w.user_id = \(reader) WHERE v.topic_id = \(topic)) v
            WHERE (\(after?.0)::bool IS NULL OR (v.watched, v.position) > (\(after?.0)::bool, \(after?.1)::int))
            ORDER BY v.watched, v.position LIMIT \(limit)
            """)
    }

    /// A video's topic, or nil when there is no such video.
    func topic(of video: UUID, _ c: Connection) throws -> UUID? {
        try c.first("SELECT topic_id FROM curation.videos WHERE id = \(video)").map { try $0["topic_id"] }
    }

    /// A video with its like and comment counts and whether `reader` liked and watched it.
    func video(_ c: Connection, _ id: UUID, reader: UUID?) throws -> VideoRecord? {
        try c.one(VideoRecord.self, """
            SELECT \(VideoRecord.columns),
                   (SELECT count(*) FROM curation.likes l WHERE l.video_id = v.id) AS like_count,
                   (SELECT count(*) FROM curation.comments cm WHERE cm.video_id = v.id) AS comment_count,
                   EXISTS (SELECT 1 FROM curation.likes l WHERE l.video_id = v.id AND l.user_id = \(reader)::uuid) AS liked,
                   EXISTS (SELECT 1 FROM curation.watches w WHERE w.video_id = v.id AND w.user_id = \(reader)::uuid) AS watched
            FROM curation.videos v WHERE v.id = \(id)
            """)
    }

    func videos(_ c: Connection, _ ids: [UUID]) throws -> [UUID: VideoRecord] {
        var out: [UUID: VideoRecord] = [:]
        for v in try c.all(VideoRecord.self, "SELECT \(VideoRecord.columns) FROM curation.videos v WHERE v.id = ANY(\(PostgresArray(ids))::uuid[])") {
            out[v.id] = v
        }
        return out
    }

    /// Full-text search, ranked, within a topic when given; keyset on (rank, id).
    func search(_ c: Connection, query: String, topic: UUID?, after: (Double, UUID)?, limit: Int) throws -> [(VideoRecord, Double)] {
        try c.rows("""
            SELECT \(VideoRecord.columns), v.rank FROM (
                SELECT \(VideoRecord.columns), ts_rank(v.search, q)::float8 AS rank
                FROM curation.videos v, websearch_to_tsquery('english', \(query)) q
                WHERE v.search @@ q AND (\(topic)::uuid IS NULL OR v.topic_id = \(topic)::uuid)) v
            WHERE (\(after?.0)::float8 IS NULL OR (v.rank < \(after?.0)::float8 OR (v.rank = \(after?.0)::float8 AND v.id > \(after?.1)::uuid)))
            ORDER BY v.rank DESC, v.id LIMIT \(limit)
            """).map { (try VideoRecord($0), try $0["rank", as: Double.self]) }
    }

    /// Every video's text, for the recommendation index.
    func catalogue(_ c: Connection) throws -> [VideoRecord] {
        try c.all(VideoRecord.self, "SELECT \(VideoRecord.columns) FROM curation.videos v ORDER BY v.topic_id, v.position")
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
            LEFT JOIN curation.watches w ON w.video_id = v.id AND w.user_id = \(user)
            LEFT JOIN curation.likes l ON l.video_id = v.id AND l.user_id = \(user)
            WHERE v.topic_id = \(topic) AND (w.user_id IS NOT NULL OR l.user_id IS NOT NULL)
            """) {
            let id: UUID = try row["id"]
            if try row["watched", as: Bool.self] { watched.insert(id) }
            if try row["liked", as: Bool.self] { liked.insert(id) }
        }
        return (watched, liked)
    }

    func recordWatch(_ c: Connection, user: UUID, video: UUID, seconds: Int, completed: Bool) throws -> Date {
        try c.first("""
            INSERT INTO curation.watches (user_id, video_id, seconds, completed) VALUES (\(user), \(video), \(seconds), \(completed))
            ON CONFLICT (user_id, video_id) DO UPDATE SET seconds = GREATEST(curation.watches.seconds, \(seconds)),
                completed = curation.watches.completed OR \(completed), watched_at = now()
            RETURNING watched_at
            """)!["watched_at"]
    }

    func history(_ c: Connection, user: UUID, after: (Int64, UUID)?, limit: Int) throws -> [(VideoRecord, seconds: Int, completed: Bool, at: Date, micros: Int64)] {
        try c.rows("""
            SELECT \(VideoRecord.columns), w.seconds, w.completed, w.watched_at, (EXTRACT(EPOCH FROM w.watched_at) * 1000000)::int8 AS at_us
            FROM curation.watches w JOIN curation.videos v ON v.id = w.video_id WHERE w.user_id = \(user)
              AND (\(after?.0)::int8 IS NULL OR ((EXTRACT(EPOCH FROM w.watched_at) * 1000000)::int8, w.video_id) < (\(after?.0)::int8, \(after?.1)::uuid))
            ORDER BY w.watched_at DESC, w.video_id DESC LIMIT \(limit)
            """).map {
            (try VideoRecord($0), try $0["seconds"], try $0["completed"], try $0["watched_at"], try $0["at_us"])
        }
    }

    func like(_ c: Connection, user: UUID, video: UUID) throws -> Bool {
        try c.execute("INSERT INTO curation.likes (user_id, video_id) VALUES (\(user), \(video)) ON CONFLICT DO NOTHING") == 1
    }

    func unlike(_ c: Connection, user: UUID, video: UUID) throws -> Bool {
        try c.execute("DELETE FROM curation.likes WHERE user_id = \(user) AND video_id = \(video)") == 1
    }

    func likes(_ c: Connection, user: UUID, after: (Int64, UUID)?, limit: Int) throws -> [(VideoRecord, micros: Int64)] {
        try c.rows("""
            SELECT \(VideoRecord.columns), (EXTRACT(EPOCH FROM l.created_at) * 1000000)::int8 AS at_us
            FROM curation.likes l JOIN curation.videos v ON v.id = l.video_id WHERE l.user_id = \(user)
              AND (\(after?.0)::int8 IS NULL OR ((EXTRACT(EPOCH FROM l.created_at) * 1000000)::int8, l.video_id) < (\(after?.0)::int8, \(after?.1)::uuid))
            ORDER BY l.created_at DESC, l.video_id DESC LIMIT \(limit)
            """).map { (try VideoRecord($0), try $0["at_us"]) }
    }

    // MARK: Comments

    func addComment(_ c: Connection, video: UUID, author: UUID, text: String) throws -> CommentRecord {
        try comment(c, try c.first("""
            INSERT INTO curation.comments (id, video_id, author_id, text) VALUES (\(UUID.v7()), \(video), \(author), \(text)) RETURNING id
            """)!["id"])!
    }

    func comment(_ c: Connection, _ id: UUID) throws -> CommentRecord? {
        try c.one(CommentRecord.self, """
            SELECT \(CommentRecord.columns) FROM curation.comments cm
            LEFT JOIN curation.profiles p ON p.user_id = cm.author_id WHERE cm.id = \(id)
            """)
    }

    /// A video's comments, newest first; a signed-in `reader` sees none of people they blocked.
    func comments(_ c: Connection, video: UUID, reader: UUID?, after: (Int64, UUID)?, limit: Int) throws -> [(CommentRecord, micros: Int64)] {
        try c.rows("""
            SELECT \(CommentRecord.columns), (EXTRACT(EPOCH FROM cm.created_at) * 1000000)::int8 AS at_us
            FROM curation.comments cm LEFT JOIN curation.profiles p ON p.user_id = cm.author_id WHERE cm.video_id = \(video)
              AND (\(after?.0)::int8 IS NULL OR ((EXTRACT(EPOCH FROM cm.created_at) * 1000000)::int8, cm.id) < (\(after?.0)::int8, \(after?.1)::uuid))
              AND (\(reader)::uuid IS NULL OR
                   NOT EXISTS (SELECT 1 FROM curation.blocks bl WHERE bl.user_id = \(reader)::uuid AND bl.blocked_id = cm.author_id))
            ORDER BY cm.created_at DESC, cm.id DESC LIMIT \(limit)
            """).map { (try CommentRecord($0), try $0["at_us"]) }
    }

    func deleteComment(_ c: Connection, _ id: UUID) throws {
        try c.execute("DELETE FROM curation.comments WHERE id = \(id)")
    }

    // MARK: Playlists

    func createPlaylist(_ c: Connection, owner: UUID, name: String, description: String?, isPublic: Bool) throws -> PlaylistRecord {
        try c.one(PlaylistRecord.self, """
            INSERT INTO curation.playlists (id, owner_id, name, description, public) VALUES (\(UUID.v7()), \(owner), \(name), \(description), \(isPublic))
            RETURNING \(PlaylistRecord.columns)
            """)!
    }

    func playlist(_ c: Connection, _ id: UUID, lock: Bool = false) throws -> PlaylistRecord? {
        guard var p = try c.one(PlaylistRecord.self, "SELECT \(PlaylistRecord.columns) FROM curation.playlists WHERE id = \(id) \(unescaped: lock ? "FOR UPDATE" : "")")
        else { return nil }
        p.videoIds = try c.rows("SELECT video_id FROM curation.playlist_items WHERE playlist_id = \(id) ORDER BY position, added_at").map { try $0["video_id"] }
        return p
    }

    func playlists(_ c: Connection, owner: UUID, onlyPublic: Bool) throws -> [PlaylistRecord] {
        let lists = try c.all(PlaylistRecord.self, """
            SELECT \(PlaylistRecord.columns) FROM curation.playlists WHERE owner_id = \(owner) AND (public OR NOT \(onlyPublic))
            ORDER BY created_at DESC, id DESC LIMIT 500
            """)
        return try lists.map { try playlist(c, $0.id)! }
    }

    func savePlaylist(_ c: Connection, _ p: PlaylistRecord) throws {
        try c.execute("UPDATE curation.playlists SET name = \(p.name), description = \(p.description), public = \(p.isPublic), updated_at = now() WHERE id = \(p.id)")
    }

    /// Sets a playlist's items to `videos`, in that order.
    func setItems(_ c: Connection, playlist: UUID, _ videos: [UUID]) throws {
        try c.execute("DELETE FROM curation.playlist_items WHERE playlist_id = \(playlist) AND NOT (video_id = ANY(\(PostgresArray(videos))::uuid[]))")
        try c.execute("""
            INSERT INTO curation.playlist_items (playlist_id, video_id, position)
            SELECT \(playlist)::uuid, v, o FROM unnest(\(PostgresArray(videos))::uuid[]) WITH ORDINALITY AS t (v, o)
            ON CONFLICT (playlist_id, video_id) DO UPDATE SET position = EXCLUDED.position
            """)
        try c.execute("UPDATE curation.playlists SET updated_at = now() WHERE id = \(playlist)")
    }

    func deletePlaylist(_ c: Connection, _ id: UUID) throws {
        try c.execute("DELETE FROM curation.playlists WHERE id = \(id)")
    }

    // MARK: People

    func profile(_ c: Connection, _ user: UUID) throws -> (name: String, username: String, avatar: UUID?, picture: String?)? {
        try c.first("SELECT full_name, username, avatar_media_id, picture_url FROM curation.profiles WHERE user_id = \(user)").map {
            (try $0["full_name"], try $0["username"], try $0["avatar_media_id"], try $0["picture_url"])
        }
    }

    func preferences(_ c: Connection, _ user: UUID) throws -> (theme: String, autoplay: Bool, updatedAt: Date?) {
        guard let row = try c.first("SELECT theme, autoplay, updated_at FROM curation.preferences WHERE user_id = \(user)") else {
            return ("system", true, nil)
        }
        return (try row["theme"], try row["autoplay"], try row["updated_at"])
    }

    func setPreferences(_ c: Connection, _ user: UUID, theme: String, autoplay: Bool) throws {
        try c.execute("""
            INSERT INTO curation.preferences (user_id, theme, autoplay) VALUES (\(user), \(theme), \(autoplay))
            ON CONFLICT (user_id) DO UPDATE SET theme = \(theme), autoplay = \(autoplay), updated_at = now()
            """)
    }

    // MARK: Recommendation scrolls

    func saveScroll(_ c: Connection, id: UUID, user: UUID?, video: UUID, order: [UUID]) throws {
        try c.execute("INSERT INTO curation.scrolls (id, user_id, video_id, videos) VALUES (\(id), \(user), \(video), \(order.map(\.lowercased).joined(separator: ",")))")
    }

    func scroll(_ c: Connection, _ id: UUID) throws -> (user: UUID?, video: UUID, order: [UUID])? {
        try c.first("SELECT user_id, video_id, videos FROM curation.scrolls WHERE id = \(id)").map {
            (try $0["user_id"], try $0["video_id"],
             try $0["videos", as: String.self].split(separator: ",").compactMap { UUID(uuidString: String($0)) })
        }
    }

    func deleteOldScrolls(_ c: Connection) throws {
        try c.execute("DELETE FROM curation.scrolls WHERE created_at < now() - interval '7 days'")
    }
}
