import Events
import Features
import Postgres

/// The stories schema, in order. Never edit an applied migration: add a new one.
let migrations: [Migration] = [
    Platform.migration,
    Platform.streamedOutbox,
    Platform.leanOutbox,
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
    // The version a cached newsletter is checked against (`NewsletterCache`): the sum of a group's counters, which the
    // triggers raise in the writing transaction, whoever writes (any instance, an operator's SQL), so a read that sees
    // the sum sees the change. A counter per group and backend (`pg_backend_pid() % 16`), not one on the group's row:
    // one row every writer of a busy group updated was a lock they all queued on and a row version each.
    // Names and time zones are checked from the group row itself; the authors a reader hides are applied after. The
    // function names its tables with their schema: it runs with the writer's search_path.
    Migration(10, "a group's content version, raised by every change its newsletter shows", """
        CREATE TABLE group_versions (
            group_id uuid NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
            slot int NOT NULL,
            version bigint NOT NULL,
            PRIMARY KEY (group_id, slot)
        ) WITH (fillfactor = 50);
        CREATE FUNCTION group_content_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            changed record;
            affected uuid[];
        BEGIN
            IF TG_OP = 'DELETE' THEN changed := OLD; ELSE changed := NEW; END IF;
            IF TG_TABLE_NAME IN ('story_groups', 'memberships') THEN
                affected := ARRAY[changed.group_id];
            ELSIF TG_TABLE_NAME = 'stories' THEN
                affected := ARRAY(SELECT group_id FROM stories.story_groups WHERE story_id = changed.id);
            ELSIF TG_TABLE_NAME IN ('story_media', 'comments') THEN
                affected := ARRAY(SELECT group_id FROM stories.story_groups WHERE story_id = changed.story_id);
            ELSE
                affected := ARRAY(SELECT group_id FROM stories.memberships WHERE user_id = changed.user_id
                                  UNION SELECT sg.group_id FROM stories.stories s JOIN stories.story_groups sg ON sg.story_id = s.id
                                        WHERE s.author_id = changed.user_id);
            END IF;
            -- A group deleted in this transaction (its rows deleted by cascade) has nothing left to version.
            INSERT INTO stories.group_versions (group_id, slot, version)
            SELECT id, pg_backend_pid() % 16, 1 FROM stories.groups WHERE id = ANY(affected)
            ON CONFLICT (group_id, slot) DO UPDATE SET version = stories.group_versions.version + 1;
            RETURN NULL;
        END $$;
        CREATE TRIGGER story_groups_content AFTER INSERT OR UPDATE OR DELETE ON story_groups
            FOR EACH ROW EXECUTE FUNCTION group_content_changed();
        CREATE TRIGGER memberships_content AFTER INSERT OR UPDATE OR DELETE ON memberships
            FOR EACH ROW EXECUTE FUNCTION group_content_changed();
        CREATE TRIGGER stories_content AFTER UPDATE ON stories
            FOR EACH ROW EXECUTE FUNCTION group_content_changed();
        CREATE TRIGGER story_media_content AFTER INSERT OR UPDATE OR DELETE ON story_media
            FOR EACH ROW EXECUTE FUNCTION group_content_changed();
        CREATE TRIGGER comments_content AFTER INSERT OR DELETE ON comments
            FOR EACH ROW EXECUTE FUNCTION group_content_changed();
        CREATE TRIGGER profiles_content AFTER INSERT OR UPDATE OF full_name, avatar_media_id OR DELETE ON profiles
            FOR EACH ROW EXECUTE FUNCTION group_content_changed();
        """),
    // An upload says what it is for, and is used for that alone: a photo shared with a few never becomes the face
    // shown to everyone. The avatars members already show are their owners' own images, marked as such.
    Migration(11, "what each image was uploaded for", """
        \(MediaStore.purposeSQL(default: "photo"));
        UPDATE media m SET purpose = 'avatar' FROM profiles p WHERE p.avatar_media_id = m.id AND p.user_id = m.owner_id;
        """),
    Migration(12, "images' bytes out of the table, into the media store", MediaStore.storeSQL(schema: "stories")),
    Migration(13, "each image's placeholder, and so its renditions", MediaStore.placeholderSQL),
    // Any interval: every N days or weeks from a date, or monthly. Daily and weekly groups keep their stored
    // frequency and weekday, so their periods do not change.
    Migration(14, "newsletters every N days or weeks, or monthly", """
        ALTER TABLE groups DROP CONSTRAINT groups_newsletter_frequency_check,
            ADD CONSTRAINT groups_newsletter_frequency_check
                CHECK (newsletter_frequency IN ('daily', 'weekly', 'every_n_days', 'every_n_weeks', 'monthly')),
            ADD COLUMN newsletter_count int CHECK (newsletter_count BETWEEN 1 AND 365),
            ADD COLUMN newsletter_start_date date,
            ADD COLUMN newsletter_day_of_month int CHECK (newsletter_day_of_month BETWEEN 1 AND 31),
            ADD CONSTRAINT groups_newsletter_complete CHECK (
                (newsletter_frequency NOT IN ('every_n_days', 'every_n_weeks')
                 OR (newsletter_count IS NOT NULL AND newsletter_start_date IS NOT NULL))
                AND (newsletter_frequency <> 'monthly' OR newsletter_day_of_month IS NOT NULL));
        """),
    // A place the author chooses (`StoryPlace`): its coordinates only as finely as the precision says, which the table
    // holds too, so a value off its grid (finer than chosen) cannot be written by any path.
    Migration(15, "a place the author chooses for a story, rounded to the precision they chose", """
        ALTER TABLE stories
            ADD COLUMN place_name text CHECK (length(place_name) BETWEEN 1 AND 100),
            ADD COLUMN place_latitude double precision CHECK (place_latitude BETWEEN -90 AND 90),
            ADD COLUMN place_longitude double precision CHECK (place_longitude BETWEEN -180 AND 180),
            ADD COLUMN place_precision text CHECK (place_precision IN ('exact', 'neighbourhood', 'city')),
            ADD CONSTRAINT stories_place_whole CHECK (
                (place_name IS NULL) = (place_latitude IS NULL) AND (place_name IS NULL) = (place_longitude IS NULL)
                AND (place_name IS NULL) = (place_precision IS NULL)),
            ADD CONSTRAINT stories_place_on_grid CHECK (place_precision IS NULL OR (
                place_latitude = round(place_latitude::numeric, CASE place_precision WHEN 'city' THEN 1 WHEN 'neighbourhood' THEN 2 ELSE 5 END)::float8
                AND place_longitude = round(place_longitude::numeric, CASE place_precision WHEN 'city' THEN 1 WHEN 'neighbourhood' THEN 2 ELSE 5 END)::float8));
        """),
    // Habits a person keeps in their journal: the days they did them (a day once, whatever the repeats), and the
    // groups whose newsletter shows their streak.
    Migration(16, "habits, the days they were done, and the groups they are shared with", """
        CREATE TABLE habits (
            id uuid PRIMARY KEY,
            owner_id uuid NOT NULL,
            title text NOT NULL CHECK (length(title) BETWEEN 1 AND 100),
            target_count int NOT NULL CHECK (target_count BETWEEN 1 AND 7),
            target_per text NOT NULL CHECK (target_per IN ('day', 'week')),
            time_zone text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            CHECK (target_per = 'week' OR target_count = 1)
        );
        CREATE INDEX habits_by_owner ON habits (owner_id, created_at, id);
        CREATE TABLE habit_days (
            habit_id uuid NOT NULL REFERENCES habits (id) ON DELETE CASCADE,
            day date NOT NULL,
            story_id uuid REFERENCES stories (id) ON DELETE SET NULL,
            marked_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (habit_id, day)
        );
        CREATE INDEX habit_days_by_story ON habit_days (story_id) WHERE story_id IS NOT NULL;
        CREATE TABLE habit_shares (
            habit_id uuid NOT NULL REFERENCES habits (id) ON DELETE CASCADE,
            group_id uuid NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
            shared_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (habit_id, group_id)
        );
        CREATE INDEX habit_shares_by_group ON habit_shares (group_id);
        """),
    // The prompt each period of a group offered (`GroupPrompts`), kept so the period keeps it and the next ones can
    // leave it out; and the prompt a story answers (an id of `Prompt.catalogue`, checked by the domain when posted).
    Migration(17, "the prompt offered to a group each period, and the prompt a story answers", """
        CREATE TABLE group_prompts (
            group_id uuid NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
            period_start timestamptz NOT NULL,
            prompt_id text NOT NULL CHECK (length(prompt_id) BETWEEN 1 AND 64),
            PRIMARY KEY (group_id, period_start)
        );
        ALTER TABLE stories ADD COLUMN prompt_id text CHECK (length(prompt_id) BETWEEN 1 AND 64);
        """),
]
