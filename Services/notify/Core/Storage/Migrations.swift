import Events
import Features
import Postgres

/// The notify schema, in order. Never edit an applied migration: add a new one.
let migrations: [Migration] = [
    Platform.migration,
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
]
