import Events
import Features
import Postgres

/// The auth schema, in order. Never edit an applied migration: add a new one.
let migrations: [Migration] = [
    Platform.migration,
    Platform.streamedOutbox,
    Platform.leanOutbox,
    Migration(2, "users, sessions, refresh tokens, signing keys, login failures", """
        CREATE TABLE users (
            id uuid PRIMARY KEY,
            username text NOT NULL CHECK (username ~ '^[a-z0-9_.]{3,32}$'),
            email text NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
            full_name text NOT NULL CHECK (length(full_name) BETWEEN 1 AND 100),
            password_hash text NOT NULL,
            avatar_media_id uuid,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE UNIQUE INDEX users_username_unique ON users (lower(username));
        CREATE UNIQUE INDEX users_email_unique ON users (lower(email));
        CREATE TABLE sessions (
            id uuid PRIMARY KEY,
            user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            created_at timestamptz NOT NULL DEFAULT now(),
            revoked_at timestamptz,
            revoke_reason text
        );
        CREATE INDEX sessions_active_by_user ON sessions (user_id) WHERE revoked_at IS NULL;
        CREATE TABLE refresh_tokens (
            token_hash text PRIMARY KEY,
            session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            created_at timestamptz NOT NULL DEFAULT now(),
            used_at timestamptz
        );
        CREATE INDEX refresh_tokens_by_session ON refresh_tokens (session_id);
        CREATE TABLE signing_keys (
            kid text PRIMARY KEY,
            seed bytea NOT NULL,
            public_key bytea NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE login_failures (
            id bigserial PRIMARY KEY,
            account_key text NOT NULL,
            client_key text NOT NULL,
            at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX login_failures_by_account ON login_failures (account_key, at);
        CREATE INDEX login_failures_by_client ON login_failures (client_key, at);
        """),
    Migration(3, "Google accounts linked to users", """
        CREATE TABLE google_accounts (
            subject text PRIMARY KEY,
            user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        """),
    Migration(4, "revoked sessions by time, for the list other services read", """
        CREATE INDEX sessions_revoked_at ON sessions (revoked_at) WHERE revoked_at IS NOT NULL;
        """),
    Migration(5, "devices a user signed in from: their logins are not slowed by others' failures", """
        CREATE TABLE devices (
            token_hash text PRIMARY KEY,
            user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            created_at timestamptz NOT NULL DEFAULT now(),
            last_used_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX devices_by_user ON devices (user_id);
        """),
    Migration(6, "signing keys: activation time for rotation, seeds sealed at rest", """
        ALTER TABLE signing_keys ADD COLUMN activates_at timestamptz, ADD COLUMN encrypted boolean NOT NULL DEFAULT false;
        UPDATE signing_keys SET activates_at = created_at;
        ALTER TABLE signing_keys ALTER COLUMN activates_at SET NOT NULL, ALTER COLUMN activates_at SET DEFAULT now();
        """),
    Migration(7, "lookups by a username nobody has, so that guessing names is limited", GuessThrottle.tableSQL("lookup_failures")),
    Migration(8, "the Google picture, the face shown until the user sets an avatar", "ALTER TABLE users ADD COLUMN picture_url text"),
    // Signed-in devices a user can list and sign out; accounts deleted after a grace period to undo it in.
    Migration(9, "sessions' devices and last use; account deletion", """
        ALTER TABLE sessions ADD COLUMN device text, ADD COLUMN last_used_at timestamptz;
        ALTER TABLE users ADD COLUMN deletes_at timestamptz;
        CREATE INDEX users_to_delete ON users (deletes_at) WHERE deletes_at IS NOT NULL;
        \(Erasure.tableSQL)
        """),
    Migration(10, "people a user blocked", """
        CREATE TABLE blocks (
            user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            blocked_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (user_id, blocked_id)
        );
        CREATE INDEX blocks_by_blocked ON blocks (blocked_id);
        """),
    Migration(11, "phone, postal address and whether the e-mail address is proven", """
        ALTER TABLE users ADD COLUMN phone text CHECK (length(phone) <= 32), ADD COLUMN postal_address text CHECK (length(postal_address) <= 300),
            ADD COLUMN email_verified boolean NOT NULL DEFAULT false;
        UPDATE users SET email_verified = true WHERE id IN (SELECT user_id FROM google_accounts);
        """),
    Migration(12, "reports of people, and accounts suspended after them", """
        ALTER TABLE users ADD COLUMN suspended_at timestamptz;
        \(Reports.tableSQL)
        """),
    Migration(13, "tokens mailed to prove an address or reset a password, and the requests for them", """
        CREATE TABLE email_tokens (
            token_hash text PRIMARY KEY,
            user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            purpose text NOT NULL CHECK (purpose IN ('verify', 'reset')),
            email text NOT NULL,
            expires_at timestamptz NOT NULL,
            used_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX email_tokens_by_user ON email_tokens (user_id, purpose) WHERE used_at IS NULL;
        CREATE TABLE mail_requests (
            key text NOT NULL,
            at timestamptz NOT NULL DEFAULT clock_timestamp()
        );
        CREATE INDEX mail_requests_by_key ON mail_requests (key, at);
        """),
    // What GET /v1/users/me shows changed (`CurrentUsers`): the user's row, or one of their sessions ended. Every
    // instance hears it at commit, whichever instance, job or operator wrote.
    Migration(14, "a notification at each change of a user or the end of a session", """
        CREATE FUNCTION user_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_TABLE_NAME = 'users' THEN
                PERFORM pg_catalog.pg_notify('\(CurrentUsers.channel)', OLD.id::text);
            ELSE
                PERFORM pg_catalog.pg_notify('\(CurrentUsers.channel)', OLD.user_id::text);
                IF TG_OP = 'UPDATE' AND NEW.user_id <> OLD.user_id THEN
                    PERFORM pg_catalog.pg_notify('\(CurrentUsers.channel)', NEW.user_id::text);
                END IF;
            END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER users_changed AFTER UPDATE OR DELETE ON users FOR EACH ROW EXECUTE FUNCTION user_changed();
        CREATE TRIGGER sessions_ended AFTER UPDATE OF revoked_at, user_id OR DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION user_changed();
        """),
    // An unproven address reserves nothing: only a proven one is unique (several unconfirmed sign-ups may name the same
    // address until one proves it), and a changed address waits in `pending_email` until the mail to it is answered.
    Migration(15, "only proven addresses are unique; a changed address is pending until proven", """
        ALTER TABLE users ADD COLUMN pending_email text CHECK (length(pending_email) BETWEEN 3 AND 254);
        DROP INDEX users_email_unique;
        CREATE UNIQUE INDEX users_verified_email_unique ON users (lower(email)) WHERE email_verified;
        CREATE INDEX users_by_email ON users (lower(email));
        """),
    // Sign in with Apple: the link, as Google's, and the refresh token its authorization code gave, which deleting the
    // account revokes at Apple. A revocation Apple has not confirmed waits in `apple_revocations`, which names no one:
    // only the token (sealed as the signing keys' seeds are, when SIGNING_KEY_ENCRYPTION_KEY is set) and the app.
    Migration(16, "Apple accounts linked to users, their refresh tokens, and the revocations still to make", """
        CREATE TABLE apple_accounts (
            subject text PRIMARY KEY,
            user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            client_id text,
            refresh_token bytea,
            refresh_sealed boolean NOT NULL DEFAULT false,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX apple_accounts_by_user ON apple_accounts (user_id);
        CREATE TABLE apple_revocations (
            id uuid PRIMARY KEY,
            client_id text NOT NULL,
            refresh_token bytea NOT NULL,
            refresh_sealed boolean NOT NULL,
            attempts integer NOT NULL DEFAULT 0,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX apple_revocations_due ON apple_revocations (next_attempt_at);
        """),
]
