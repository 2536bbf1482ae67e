import Events
import Features
import Postgres

/// The curation schema, in order. Never edit an applied migration: add a new one.
let migrations: [Migration] = [
    Platform.migration,
    Platform.streamedOutbox,
    Platform.leanOutbox,
    Migration(2, "the catalogue, what people watch and like, comments, playlists, preferences, recommendation scrolls", """
        CREATE TABLE subjects (
            id uuid PRIMARY KEY,
            name text NOT NULL UNIQUE,
            position int NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE topics (
            id uuid PRIMARY KEY,
            subject_id uuid NOT NULL REFERENCES subjects,
            name text NOT NULL,
            position int NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            UNIQUE (subject_id, name)
        );
        CREATE TABLE videos (
            id uuid PRIMARY KEY,
            youtube_id text NOT NULL UNIQUE,
            topic_id uuid NOT NULL REFERENCES topics,
            position int NOT NULL,
            subtopic text NOT NULL,
            path text NOT NULL,
            title text NOT NULL,
            description text NOT NULL,
            parent_description text NOT NULL,
            captions text,
            channel text NOT NULL,
            partner_content boolean NOT NULL,
            duration_seconds int NOT NULL,
            license text,
            source_url text,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            search tsvector GENERATED ALWAYS AS (
                setweight(to_tsvector('english', title), 'A') ||
                setweight(to_tsvector('english', subtopic || ' ' || description), 'B') ||
                setweight(to_tsvector('english', coalesce(captions, '') || ' ' || parent_description), 'C')) STORED
        );
        CREATE INDEX videos_by_topic ON videos (topic_id, position, id);
        CREATE INDEX videos_search ON videos USING gin (search);
        CREATE TABLE watches (
            user_id uuid NOT NULL,
            video_id uuid NOT NULL REFERENCES videos ON DELETE CASCADE,
            seconds int NOT NULL,
            completed boolean NOT NULL DEFAULT false,
            watched_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (user_id, video_id)
        );
        CREATE INDEX watches_by_time ON watches (user_id, watched_at DESC, video_id);
        CREATE TABLE likes (
            user_id uuid NOT NULL,
            video_id uuid NOT NULL REFERENCES videos ON DELETE CASCADE,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (user_id, video_id)
        );
        CREATE INDEX likes_by_video ON likes (video_id);
        CREATE INDEX likes_by_time ON likes (user_id, created_at DESC, video_id);
        CREATE TABLE comments (
            id uuid PRIMARY KEY,
            video_id uuid NOT NULL REFERENCES videos ON DELETE CASCADE,
            author_id uuid NOT NULL,
            text text NOT NULL CHECK (length(text) BETWEEN 1 AND 2000),
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX comments_by_video ON comments (video_id, created_at DESC, id);
        CREATE TABLE playlists (
            id uuid PRIMARY KEY,
            owner_id uuid NOT NULL,
            name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
            description text CHECK (length(description) <= 1000),
            public boolean NOT NULL DEFAULT false,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX playlists_by_owner ON playlists (owner_id, created_at DESC, id);
        CREATE TABLE playlist_items (
            playlist_id uuid NOT NULL REFERENCES playlists ON DELETE CASCADE,
            video_id uuid NOT NULL REFERENCES videos ON DELETE CASCADE,
            position int NOT NULL,
            added_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (playlist_id, video_id)
        );
        \(Profiles.tableSQL)
        CREATE TABLE preferences (
            user_id uuid PRIMARY KEY,
            theme text NOT NULL DEFAULT 'system' CHECK (theme IN ('system', 'light', 'dark', 'sepia')),
            autoplay boolean NOT NULL DEFAULT true,
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE scrolls (
            id uuid PRIMARY KEY,
            user_id uuid,
            video_id uuid NOT NULL,
            videos text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX scrolls_by_time ON scrolls (created_at);
        """),
    Migration(3, "pictures hosted elsewhere (Google's) in profiles", Profiles.pictureSQL),
    Migration(4, "accounts erased here, by a hash of their id", Erasure.tableSQL),
    Migration(5, "who blocked whom", Blocks.tableSQL),
    Migration(6, "reports of comments, and operators' decisions", Reports.tableSQL),
]
