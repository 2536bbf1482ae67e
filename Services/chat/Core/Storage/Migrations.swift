import Events
import Features
import Identity
import Postgres

/// The chat schema, in order. Never edit an applied migration: add a new one.
let migrations: [Migration] = [
    Platform.migration,
    Platform.streamedOutbox,
    Platform.leanOutbox,
    Migration(2, "rooms, members, messages, the change log, todos, media, and what chat learns from other services", """
        CREATE TABLE rooms (
            id uuid PRIMARY KEY,
            kind text NOT NULL CHECK (kind IN ('team', 'direct', 'parcel')),
            name text NOT NULL CHECK (length(name) <= 100),
            topic text CHECK (length(topic) <= 500),
            invite_code text UNIQUE,
            direct_key text UNIQUE,
            parcel_id uuid UNIQUE,
            read_only boolean NOT NULL DEFAULT false,
            created_by uuid,
            change_seq bigint NOT NULL DEFAULT 0,
            message_seq bigint NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            CHECK ((kind = 'team') = (invite_code IS NOT NULL)),
            CHECK ((kind = 'direct') = (direct_key IS NOT NULL)),
            CHECK ((kind = 'parcel') = (parcel_id IS NOT NULL))
        );
        CREATE TABLE members (
            room_id uuid NOT NULL REFERENCES rooms ON DELETE CASCADE,
            user_id uuid NOT NULL,
            role text NOT NULL CHECK (role IN ('owner', 'member')),
            read_seq bigint NOT NULL DEFAULT 0,
            joined_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (room_id, user_id)
        );
        CREATE INDEX members_by_user ON members (user_id, room_id);
        CREATE TABLE messages (
            id uuid PRIMARY KEY,
            room_id uuid NOT NULL REFERENCES rooms ON DELETE CASCADE,
            seq bigint NOT NULL,
            author_id uuid NOT NULL,
            text text CHECK (length(text) <= 4000),
            client_id text,
            reply_to uuid,
            media_ids uuid[] NOT NULL DEFAULT '{}',
            created_at timestamptz NOT NULL DEFAULT now(),
            edited_at timestamptz,
            deleted_at timestamptz,
            search tsvector GENERATED ALWAYS AS (to_tsvector('simple', coalesce(text, ''))) STORED,
            UNIQUE (room_id, seq),
            UNIQUE (room_id, author_id, client_id)
        );
        CREATE INDEX messages_search ON messages USING gin (search);
        CREATE TABLE changes (
            room_id uuid NOT NULL REFERENCES rooms ON DELETE CASCADE,
            seq bigint NOT NULL,
            event text NOT NULL,
            body text NOT NULL,
            message_id uuid,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (room_id, seq)
        );
        CREATE INDEX changes_by_message ON changes (message_id) WHERE message_id IS NOT NULL;
        CREATE TABLE todos (
            id uuid PRIMARY KEY,
            room_id uuid NOT NULL REFERENCES rooms ON DELETE CASCADE,
            title text NOT NULL CHECK (length(title) BETWEEN 1 AND 500),
            done boolean NOT NULL DEFAULT false,
            done_by uuid,
            done_at timestamptz,
            assignee_id uuid,
            due_at timestamptz,
            position int NOT NULL,
            from_message_id uuid,
            created_by uuid NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX todos_by_room ON todos (room_id, done, position);
        \(Profiles.tableSQL)
        CREATE TABLE group_members (
            group_id uuid NOT NULL,
            user_id uuid NOT NULL,
            PRIMARY KEY (group_id, user_id)
        );
        CREATE INDEX group_members_by_user ON group_members (user_id);
        CREATE TABLE parcel_parties (
            parcel_id uuid NOT NULL,
            user_id uuid NOT NULL,
            role text NOT NULL CHECK (role IN ('sender', 'recipient', 'courier')),
            PRIMARY KEY (parcel_id, user_id, role)
        );
        CREATE INDEX parcel_parties_by_user ON parcel_parties (user_id);
        \(GuessThrottle.tableSQL())
        \(MediaStore.tableSQL)
        """),
    Migration(3, "single-use stream tickets", StreamTickets.tableSQL),
    Migration(4, "pictures hosted elsewhere (Google's) in profiles", Profiles.pictureSQL),
    Migration(5, "accounts erased here, by a hash of their id", Erasure.tableSQL),
    Migration(6, "who blocked whom", Blocks.tableSQL),
    Migration(7, "reports of messages, for the moderators", Reports.tableSQL),
    Migration(8, "what each image was uploaded for", MediaStore.purposeSQL(default: "message")),
    Migration(9, "images' bytes out of the table, into the media store", MediaStore.storeSQL(schema: "chat")),
    Migration(10, "each image's placeholder, and so its renditions", MediaStore.placeholderSQL),
]
