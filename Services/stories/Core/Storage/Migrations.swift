import Events
import Features
import Postgres

/// The stories schema, in order. Never edit an applied migration: add a new one.
let migrations: [Migration] = [
    Platform.migration,
    Platform.streamedOutbox,
    Migration(2, "profiles, groups, memberships, media, stories, comments", """
        \(Profiles.tableSQL)
        CREATE TABLE groups (
            id uuid PRIMARY KEY,
            kind text NOT NULL CHECK (kind IN ('group', 'journal')),
            name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
            image_media_id uuid,
            invite_code text UNIQUE,
            created_by uuid NOT NULL,
            default_journal boolean NOT NULL DEFAULT false,
            newsletter_frequency text NOT NULL DEFAULT 'weekly' CHECK (newsletter_frequency IN ('daily', 'weekly')),
            newsletter_weekday int NOT NULL DEFAULT 7 CHECK (newsletter_weekday BETWEEN 1 AND 7),
            newsletter_hour int NOT NULL DEFAULT 18 CHECK (newsletter_hour BETWEEN 0 AND 23),
            newsletter_time_zone text NOT NULL DEFAULT 'UTC',
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            CHECK ((kind = 'journal') = (invite_code IS NULL))
        );
        CREATE UNIQUE INDEX groups_one_default_journal ON groups (created_by) WHERE default_journal;
        CREATE TABLE memberships (
            group_id uuid NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
            user_id uuid NOT NULL,
            role text NOT NULL CHECK (role IN ('admin', 'member')),
            joined_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (group_id, user_id)
        );
        CREATE INDEX memberships_by_user ON memberships (user_id, group_id);
        \(GuessThrottle.tableSQL())
        \(MediaStore.tableSQL)
        CREATE TABLE stories (
            id uuid PRIMARY KEY,
            author_id uuid NOT NULL,
            text text NOT NULL CHECK (length(text) <= 10000),
            background_color text CHECK (background_color ~ '^#[0-9A-F]{6}$'),
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX stories_by_author ON stories (author_id, created_at);
        CREATE TABLE story_groups (
            story_id uuid NOT NULL REFERENCES stories (id) ON DELETE CASCADE,
            group_id uuid NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
            created_at timestamptz NOT NULL,
            PRIMARY KEY (story_id, group_id)
        );
        CREATE INDEX story_groups_by_group ON story_groups (group_id, created_at DESC, story_id DESC);
        CREATE TABLE story_media (
            story_id uuid NOT NULL REFERENCES stories (id) ON DELETE CASCADE,
            position int NOT NULL,
            media_id uuid NOT NULL REFERENCES media (id),
            PRIMARY KEY (story_id, position)
        );
        CREATE INDEX story_media_by_media ON story_media (media_id);
        CREATE TABLE comments (
            id uuid PRIMARY KEY,
            story_id uuid NOT NULL REFERENCES stories (id) ON DELETE CASCADE,
            author_id uuid NOT NULL,
            text text NOT NULL CHECK (length(text) BETWEEN 1 AND 2000),
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX comments_by_story ON comments (story_id, created_at, id);
        """),
    Migration(3, "newsletters and when each group's period closes", """
        ALTER TABLE groups ADD COLUMN newsletter_due_at timestamptz;
        CREATE INDEX groups_newsletter_due ON groups (newsletter_due_at) WHERE kind = 'group';
        CREATE TABLE newsletters (
            id uuid PRIMARY KEY,
            group_id uuid NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
            period_start timestamptz NOT NULL,
            period_end timestamptz NOT NULL,
            story_count int NOT NULL,
            content text NOT NULL,
            compiled_at timestamptz NOT NULL DEFAULT now(),
            UNIQUE (group_id, period_end)
        );
        """),
    Migration(4, "pictures hosted elsewhere (Google's) in profiles", Profiles.pictureSQL),
    Migration(5, "accounts erased here, by a hash of their id", Erasure.tableSQL),
    Migration(6, "who blocked whom", Blocks.tableSQL),
    Migration(7, "each member's newsletter delivery, and the authors a person would rather not see", """
        ALTER TABLE memberships ADD COLUMN newsletter text NOT NULL DEFAULT 'app' CHECK (newsletter IN ('off', 'app', 'email'));
        CREATE TABLE hidden_authors (
            user_id uuid NOT NULL,
            author_id uuid NOT NULL,
            hidden_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (user_id, author_id)
        );
        CREATE INDEX hidden_authors_by_author ON hidden_authors (author_id);
        """),
    Migration(8, "reports of stories, for the moderators", Reports.tableSQL),
    Migration(9, "when a group's silent members are next reminded, before its period closes", """
        ALTER TABLE groups ADD COLUMN reminder_due_at timestamptz;
        CREATE INDEX groups_reminder_due ON groups (reminder_due_at) WHERE kind = 'group';
        """),
]
