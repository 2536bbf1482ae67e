import Events
import Features
import Postgres

/// The notify schema, in order. Never edit an applied migration: add a new one.
let migrations: [Migration] = [
    Platform.migration,
    Platform.streamedOutbox,
    Platform.leanOutbox,
    Migration(2, "the delivery log: each (event, person, channel) once, with its outcome", """
        CREATE TABLE deliveries (
            id uuid PRIMARY KEY,
            event_id text NOT NULL,
            user_id uuid NOT NULL,
            channel text NOT NULL CHECK (channel IN ('email')),
            kind text NOT NULL,
            address text NOT NULL,
            subject text NOT NULL,
            body_text text,
            body_html text,
            status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sending', 'sent', 'failed')),
            attempts int NOT NULL DEFAULT 0,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            last_error text,
            expires_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            sent_at timestamptz,
            UNIQUE (event_id, user_id, channel)
        );
        CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status IN ('pending', 'sending');
        CREATE INDEX deliveries_by_user ON deliveries (user_id, created_at);
        \(Erasure.tableSQL)
        """),
    Migration(3, "Web Push: subscriptions, push deliveries (one per event, person and subscription), parcels' parties", """
        CREATE TABLE push_subscriptions (
            id uuid PRIMARY KEY,
            user_id uuid NOT NULL,
            endpoint text NOT NULL UNIQUE,
            p256dh text NOT NULL,
            auth text NOT NULL,
            vapid_key text NOT NULL,
            expires_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX push_subscriptions_by_user ON push_subscriptions (user_id);
        ALTER TABLE deliveries DROP CONSTRAINT deliveries_channel_check;
        ALTER TABLE deliveries ADD CONSTRAINT deliveries_channel_check CHECK (channel IN ('email', 'push'));
        ALTER TABLE deliveries ADD COLUMN subscription_id uuid REFERENCES push_subscriptions (id) ON DELETE SET NULL,
            ADD COLUMN ttl int, ADD COLUMN urgency text, ADD COLUMN topic text;
        ALTER TABLE deliveries DROP CONSTRAINT deliveries_event_id_user_id_channel_key;
        CREATE UNIQUE INDEX deliveries_once_by_mail ON deliveries (event_id, user_id) WHERE channel = 'email';
        CREATE UNIQUE INDEX deliveries_once_by_push ON deliveries (event_id, subscription_id) WHERE channel = 'push';
        CREATE INDEX deliveries_by_subscription ON deliveries (subscription_id) WHERE subscription_id IS NOT NULL;
        CREATE TABLE parcels (
            id uuid PRIMARY KEY,
            sender_id uuid NOT NULL,
            recipient_id uuid,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX parcels_by_sender ON parcels (sender_id);
        CREATE INDEX parcels_by_recipient ON parcels (recipient_id);
        """),
    Migration(4, "people's addresses, newsletters by mail, preferences, one-click unsubscribe links and quiet hours", """
        CREATE TABLE people (
            user_id uuid PRIMARY KEY,
            email text NOT NULL,
            email_verified boolean NOT NULL DEFAULT false
        );
        ALTER TABLE deliveries ADD COLUMN reference text;
        CREATE TABLE preferences (
            user_id uuid NOT NULL,
            kind text NOT NULL,
            channel text NOT NULL CHECK (channel IN ('email', 'push')),
            enabled boolean NOT NULL,
            PRIMARY KEY (user_id, kind, channel)
        );
        CREATE TABLE unsubscribe_tokens (
            token text PRIMARY KEY,
            user_id uuid NOT NULL,
            kind text NOT NULL,
            channel text NOT NULL,
            UNIQUE (user_id, kind, channel)
        );
        CREATE TABLE quiet_hours (
            user_id uuid PRIMARY KEY,
            starts_at smallint NOT NULL CHECK (starts_at BETWEEN 0 AND 1439),
            ends_at smallint NOT NULL CHECK (ends_at BETWEEN 0 AND 1439),
            time_zone text NOT NULL
        );
        """),
    Migration(5, "who is in which chat room, to tell them of messages", """
        CREATE TABLE room_members (
            room_id uuid NOT NULL,
            user_id uuid NOT NULL,
            PRIMARY KEY (room_id, user_id)
        );
        CREATE INDEX room_members_by_user ON room_members (user_id);
        """),
    Migration(6, "when a delivery or a push subscription last changed: null until it first does, read as its creation", """
        ALTER TABLE deliveries ADD COLUMN updated_at timestamptz;
        ALTER TABLE push_subscriptions ADD COLUMN updated_at timestamptz;
        """),
    Migration(7, "native push: apps' devices (APNs, FCM tokens), and push deliveries to a device", """
        CREATE TABLE push_devices (
            id uuid PRIMARY KEY,
            user_id uuid NOT NULL,
            platform text NOT NULL CHECK (platform IN ('apns', 'fcm')),
            token text NOT NULL,
            app text NOT NULL,
            environment text CHECK (environment IN ('production', 'sandbox')),
            locale text,
            time_zone text,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz,
            UNIQUE (platform, token)
        );
        CREATE INDEX push_devices_by_user ON push_devices (user_id, app);
        ALTER TABLE deliveries ADD COLUMN device_id uuid REFERENCES push_devices (id) ON DELETE SET NULL;
        CREATE UNIQUE INDEX deliveries_once_by_device ON deliveries (event_id, device_id) WHERE channel = 'push' AND device_id IS NOT NULL;
        CREATE INDEX deliveries_by_device ON deliveries (device_id) WHERE device_id IS NOT NULL;
        """),
    Migration(8, "the app a mail speaks as (its sender, colours and links): the one its request came from", """
        ALTER TABLE deliveries ADD COLUMN app text;
        """),
    Migration(9, "the in-app list: notices shown in the app (channel app) with read markers; the stories of a group's daily digest", """
        ALTER TABLE deliveries DROP CONSTRAINT deliveries_channel_check;
        ALTER TABLE deliveries ADD CONSTRAINT deliveries_channel_check CHECK (channel IN ('email', 'push', 'app'));
        ALTER TABLE deliveries ADD COLUMN read_at timestamptz;
        CREATE UNIQUE INDEX deliveries_once_in_app ON deliveries (event_id, user_id) WHERE channel = 'app';
        ALTER TABLE preferences DROP CONSTRAINT preferences_channel_check;
        ALTER TABLE preferences ADD CONSTRAINT preferences_channel_check CHECK (channel IN ('email', 'push', 'app'));
        CREATE TABLE group_stories (
            group_id uuid NOT NULL,
            window_start timestamptz NOT NULL,
            story_id uuid NOT NULL,
            author_id uuid NOT NULL,
            group_name text NOT NULL,
            PRIMARY KEY (group_id, window_start, story_id)
        );
        CREATE INDEX group_stories_by_author ON group_stories (author_id);
        """),
]
