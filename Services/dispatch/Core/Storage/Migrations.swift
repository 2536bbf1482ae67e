import Events
import Features
import Identity
import Postgres

/// The dispatch schema, in order. Never edit an applied migration: add a new one.
let migrations: [Migration] = [
    Platform.migration,
    Platform.streamedOutbox,
    Platform.leanOutbox,
    Migration(2, "media", MediaStore.tableSQL),
    Migration(3, "couriers, parcels, their history and declined offers", """
        CREATE TABLE couriers (
            user_id uuid PRIMARY KEY,
            vehicle text NOT NULL CHECK (vehicle IN ('foot', 'bike', 'scooter', 'car')),
            capacity int NOT NULL CHECK (capacity BETWEEN 1 AND 50),
            active int NOT NULL DEFAULT 0,
            online boolean NOT NULL DEFAULT false,
            lat float8, lon float8, heading float8, speed_mps float8, fix_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            CHECK (active >= 0 AND active <= capacity)
        );
        CREATE INDEX couriers_by_update ON couriers (updated_at);
        CREATE TABLE parcels (
            id uuid PRIMARY KEY,
            sender_id uuid NOT NULL,
            recipient_user_id uuid,
            recipient_name text NOT NULL,
            recipient_phone text,
            pickup_lat float8 NOT NULL, pickup_lon float8 NOT NULL, pickup_address text NOT NULL,
            dropoff_lat float8 NOT NULL, dropoff_lon float8 NOT NULL, dropoff_address text NOT NULL,
            service text NOT NULL CHECK (service IN ('express', 'standard')),
            payment_method text NOT NULL CHECK (payment_method IN ('card', 'cash', 'wallet')),
            insured boolean NOT NULL,
            description text,
            document_photo_media_id uuid NOT NULL,
            delivery_photo_media_id uuid,
            receipt_photo_media_id uuid,
            failure_reason text,
            amount_minor int NOT NULL,
            currency text NOT NULL,
            eta_seconds int NOT NULL,
            distance_m int NOT NULL,
            status text NOT NULL,
            courier_id uuid,
            offered_to uuid,
            offer_expires_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX parcels_awaiting ON parcels (created_at) WHERE status = 'awaiting_courier';
        CREATE INDEX parcels_offers ON parcels (offer_expires_at) WHERE status = 'offered';
        CREATE UNIQUE INDEX parcels_one_offer_per_courier ON parcels (offered_to) WHERE status = 'offered';
        CREATE INDEX parcels_by_sender ON parcels (sender_id, id DESC);
        CREATE INDEX parcels_by_recipient ON parcels (recipient_user_id, id DESC);
        CREATE INDEX parcels_by_courier ON parcels (courier_id, id DESC);
        CREATE TABLE parcel_history (
            id bigserial PRIMARY KEY,
            parcel_id uuid NOT NULL REFERENCES parcels (id) ON DELETE CASCADE,
            at timestamptz NOT NULL DEFAULT clock_timestamp(),
            from_status text,
            to_status text NOT NULL,
            actor text NOT NULL,
            actor_id uuid,
            lat float8, lon float8
        );
        CREATE INDEX parcel_history_by_parcel ON parcel_history (parcel_id, id);
        CREATE TABLE parcel_declines (
            parcel_id uuid NOT NULL REFERENCES parcels (id) ON DELETE CASCADE,
            courier_id uuid NOT NULL,
            PRIMARY KEY (parcel_id, courier_id)
        );
        """),
    // Parcels no courier was within reach of are marked, and matching reads only the others: a district with
    // nobody online must not slow the parcels that can be served.
    Migration(4, "stranded parcels", """
        ALTER TABLE parcels ADD COLUMN stranded_at timestamptz;
        CREATE INDEX parcels_matchable ON parcels (created_at) WHERE status = 'awaiting_courier' AND stranded_at IS NULL;
        CREATE INDEX parcels_stranded ON parcels (created_at) WHERE status = 'awaiting_courier' AND stranded_at IS NOT NULL;
        """),
    Migration(5, "single-use stream tickets", StreamTickets.tableSQL),
    // Recipients named by username, e-mail or phone: a username dispatch knows (from auth's events) is the
    // recipient at once; anyone else claims the parcel with the code the sender passes on. The PIN is the
    // recipient's proof at the door; wrong ones are counted.
    Migration(6, "named recipients, claim codes and delivery PINs", """
        \(Profiles.tableSQL)
        \(Profiles.pictureSQL)
        \(Erasure.tableSQL)
        CREATE INDEX profiles_by_username ON profiles (lower(username));
        \(GuessThrottle.tableSQL("claim_failures"))
        ALTER TABLE parcels ADD COLUMN recipient_username text, ADD COLUMN recipient_email text,
            ADD COLUMN claim_code text UNIQUE,
            ADD COLUMN delivery_pin text NOT NULL DEFAULT lpad((floor(random() * 10000))::int::text, 4, '0'),
            ADD COLUMN pin_failures int NOT NULL DEFAULT 0;
        ALTER TABLE parcels ALTER COLUMN delivery_pin DROP DEFAULT;
        """),
    Migration(7, "the phone a courier's parties may call", "ALTER TABLE profiles ADD COLUMN phone text CHECK (length(phone) <= 32);"),
    Migration(8, "addresses people proved, to match a recipient named by one", """
        ALTER TABLE profiles ADD COLUMN email text, ADD COLUMN email_verified boolean NOT NULL DEFAULT false;
        CREATE INDEX profiles_by_verified_email ON profiles (lower(email)) WHERE email_verified;
        """),
    // Payments that are really taken: a card is held at booking and taken at delivery through the provider, cash is
    // recorded at the hand-over. `due` is the provider call a payment waits for, retried under the same idempotency
    // key until the provider answers; the ledger is append-only, and a kind of entry happens once per payment.
    Migration(9, "payments, their ledger and the provider's events", """
        CREATE TABLE payments (
            id uuid PRIMARY KEY,
            parcel_id uuid NOT NULL UNIQUE REFERENCES parcels (id),
            payer_id uuid NOT NULL,
            method text NOT NULL CHECK (method IN ('card', 'cash')),
            amount_minor int NOT NULL CHECK (amount_minor >= 0),
            currency text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
            card_payment_method text,
            status text NOT NULL CHECK (status IN ('pending', 'authorised', 'declined', 'captured', 'voided', 'cash_on_delivery', 'cash_collected')),
            provider_intent text UNIQUE,
            decline_code text,
            due text CHECK (due IN ('authorise', 'capture', 'void')),
            due_at timestamptz,
            attempts int NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            CHECK ((due IS NULL) = (due_at IS NULL)),
            CHECK (method = 'card' OR card_payment_method IS NULL)
        );
        CREATE INDEX payments_due ON payments (due_at) WHERE due IS NOT NULL;
        CREATE INDEX payments_by_payer ON payments (payer_id);
        CREATE TABLE payment_ledger (
            id bigserial PRIMARY KEY,
            payment_id uuid NOT NULL REFERENCES payments (id),
            parcel_id uuid NOT NULL,
            entry text NOT NULL CHECK (entry IN ('authorised', 'declined', 'captured', 'voided', 'cash_collected')),
            amount_minor int NOT NULL CHECK (amount_minor >= 0),
            currency text NOT NULL,
            courier_id uuid,
            provider_reference text,
            decline_code text,
            at timestamptz NOT NULL DEFAULT clock_timestamp()
        );
        CREATE UNIQUE INDEX payment_ledger_once ON payment_ledger (payment_id, entry);
        CREATE INDEX payment_ledger_by_day ON payment_ledger (at);
        CREATE FUNCTION payment_ledger_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'the payment ledger is append-only'; END $$;
        CREATE TRIGGER payment_ledger_append_only BEFORE UPDATE OR DELETE ON payment_ledger
            FOR EACH ROW EXECUTE FUNCTION payment_ledger_is_append_only();
        CREATE TABLE provider_events (
            id text PRIMARY KEY,
            type text NOT NULL,
            received_at timestamptz NOT NULL DEFAULT now()
        );
        """),
    // Reception centres: a parcel may be brought to one instead of picked up, and collected at one instead of
    // delivered. Staff are people an operator named; a centre parcel carries a code its sender (or recipient) shows.
    Migration(10, "reception centres, their staff, and parcels through them", """
        CREATE TABLE centres (
            id uuid PRIMARY KEY,
            name text NOT NULL,
            address text NOT NULL,
            lat float8 NOT NULL CHECK (lat BETWEEN -90 AND 90),
            lon float8 NOT NULL CHECK (lon BETWEEN -180 AND 180),
            time_zone text NOT NULL,
            opening_hours text NOT NULL,
            accepts_drop_offs boolean NOT NULL,
            accepts_collections boolean NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE centre_staff (
            centre_id uuid NOT NULL REFERENCES centres (id) ON DELETE CASCADE,
            user_id uuid NOT NULL,
            PRIMARY KEY (centre_id, user_id)
        );
        CREATE INDEX centre_staff_by_user ON centre_staff (user_id);
        ALTER TABLE parcels ADD COLUMN drop_off_centre_id uuid REFERENCES centres (id),
            ADD COLUMN collection_centre_id uuid REFERENCES centres (id), ADD COLUMN centre_code text UNIQUE;
        ALTER TABLE payment_ledger ADD COLUMN centre_id uuid;
        """),
    // Loyalty points: earned per delivered parcel, spent against a price, given back when a booking is called off;
    // one entry of a kind per parcel. Only the person's erasure deletes entries.
    Migration(11, "loyalty points", """
        CREATE TABLE loyalty_ledger (
            id bigserial PRIMARY KEY,
            user_id uuid NOT NULL,
            parcel_id uuid NOT NULL,
            entry text NOT NULL CHECK (entry IN ('earned', 'spent', 'returned')),
            points int NOT NULL CHECK (points > 0),
            at timestamptz NOT NULL DEFAULT clock_timestamp(),
            UNIQUE (parcel_id, entry)
        );
        CREATE INDEX loyalty_ledger_by_user ON loyalty_ledger (user_id, id);
        CREATE FUNCTION loyalty_ledger_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'the loyalty ledger is append-only'; END $$;
        CREATE TRIGGER loyalty_ledger_append_only BEFORE UPDATE ON loyalty_ledger
            FOR EACH ROW EXECUTE FUNCTION loyalty_ledger_is_append_only();
        ALTER TABLE parcels ADD COLUMN points_spent int NOT NULL DEFAULT 0 CHECK (points_spent >= 0);
        """),
    // The wallet and plans: a payment may be a wallet top-up or a plan's month as well as a parcel's price; a wallet
    // pays a parcel at booking and is paid back when it is called off; a plan is taken by card month after month.
    // Both ledgers are append-only (only the person's erasure deletes their entries: the payment ledger keeps the
    // money), and a kind of entry happens once per payment.
    Migration(12, "wallets and plans", """
        ALTER TABLE payments ALTER COLUMN parcel_id DROP NOT NULL,
            ADD COLUMN purpose text NOT NULL DEFAULT 'parcel' CHECK (purpose IN ('parcel', 'top_up', 'plan')),
            ADD COLUMN subscription_id uuid,
            ADD CHECK ((purpose = 'parcel') = (parcel_id IS NOT NULL)),
            DROP CONSTRAINT payments_method_check, ADD CHECK (method IN ('card', 'cash', 'wallet')),
            DROP CONSTRAINT payments_status_check,
            ADD CHECK (status IN ('pending', 'authorised', 'declined', 'captured', 'voided', 'cash_on_delivery', 'cash_collected',
                                  'wallet_debited', 'wallet_returned'));
        ALTER TABLE payment_ledger ALTER COLUMN parcel_id DROP NOT NULL,
            DROP CONSTRAINT payment_ledger_entry_check,
            ADD CHECK (entry IN ('authorised', 'declined', 'captured', 'voided', 'cash_collected', 'wallet_debited', 'wallet_returned'));
        CREATE TABLE wallet_ledger (
            id bigserial PRIMARY KEY,
            user_id uuid NOT NULL,
            payment_id uuid NOT NULL REFERENCES payments (id),
            parcel_id uuid,
            entry text NOT NULL CHECK (entry IN ('topped_up', 'spent', 'returned')),
            amount_minor int NOT NULL CHECK (amount_minor > 0),
            currency text NOT NULL,
            at timestamptz NOT NULL DEFAULT clock_timestamp(),
            UNIQUE (payment_id, entry)
        );
        CREATE INDEX wallet_ledger_by_user ON wallet_ledger (user_id, currency, id);
        CREATE TRIGGER wallet_ledger_append_only BEFORE UPDATE ON wallet_ledger
            FOR EACH ROW EXECUTE FUNCTION payment_ledger_is_append_only();
        CREATE TABLE subscriptions (
            id uuid PRIMARY KEY,
            user_id uuid NOT NULL,
            plan_id text NOT NULL,
            status text NOT NULL CHECK (status IN ('pending', 'active', 'declined', 'lapsed')),
            card_payment_method text,
            -- The provider's customer the card is saved to, for the renewals.
            provider_customer text,
            period_end timestamptz,
            renews boolean NOT NULL DEFAULT true,
            renewal_payment_id uuid,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX subscriptions_by_user ON subscriptions (user_id, created_at);
        CREATE INDEX subscriptions_to_renew ON subscriptions (period_end) WHERE status = 'active' AND renews;
        CREATE TABLE plan_ledger (
            id bigserial PRIMARY KEY,
            subscription_id uuid NOT NULL REFERENCES subscriptions (id),
            user_id uuid NOT NULL,
            plan_id text NOT NULL,
            entry text NOT NULL CHECK (entry IN ('started', 'renewed', 'declined', 'lapsed', 'renewal_stopped')),
            amount_minor int NOT NULL CHECK (amount_minor >= 0),
            currency text NOT NULL,
            payment_id uuid,
            period_end timestamptz,
            at timestamptz NOT NULL DEFAULT clock_timestamp()
        );
        CREATE UNIQUE INDEX plan_ledger_once ON plan_ledger (payment_id, entry) WHERE payment_id IS NOT NULL;
        CREATE INDEX plan_ledger_by_subscription ON plan_ledger (subscription_id, id);
        CREATE TRIGGER plan_ledger_append_only BEFORE UPDATE ON plan_ledger
            FOR EACH ROW EXECUTE FUNCTION payment_ledger_is_append_only();
        """),
    // The nearest centres by a GiST index on their place, not a sort of the table (bench/centres.sh: 10,000 centres
    // took the scan 28 ms at p99).
    Migration(13, "centres indexed by place", "CREATE INDEX centres_by_place ON centres USING gist (point(lon, lat));"),
    // A fix was an UPDATE of the courier's row, whose `updated_at` is indexed for the matching refresh: never HOT, so
    // every fix wrote a row version and two index entries. Positions now live in a narrow table no index covers but
    // its key, with room on each page (fillfactor 50), so a fix is one heap-only tuple; other instances learn of
    // fixes from notifications, not by reading an index of changed rows.
    Migration(14, "courier positions apart from couriers", """
        CREATE TABLE courier_positions (
            user_id uuid PRIMARY KEY REFERENCES couriers (user_id) ON DELETE CASCADE,
            lat float8, lon float8, heading float8, speed_mps float8, fix_at timestamptz
        ) WITH (fillfactor = 50);
        INSERT INTO courier_positions SELECT user_id, lat, lon, heading, speed_mps, fix_at FROM couriers;
        ALTER TABLE couriers DROP COLUMN lat, DROP COLUMN lon, DROP COLUMN heading, DROP COLUMN speed_mps, DROP COLUMN fix_at;
        """),
    // A fix was one heap-only update of the courier's position: a row version, its WAL and two key lookups per fix,
    // the floor of what a fleet's batches cost. A request's fixes are now one appended row, folded into
    // `courier_positions` every `FIX_FOLD_SECONDS` (the newest fix of each courier once, however many it sent); the
    // arrays stay out of line uncompressed (coordinates do not compress, and trying costs CPU on every request).
    Migration(15, "fixes appended in batches", """
        CREATE TABLE fix_batches (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            couriers uuid[] NOT NULL, lat float8[] NOT NULL, lon float8[] NOT NULL, heading float8[] NOT NULL,
            speed_mps float8[] NOT NULL, fix_at timestamptz[] NOT NULL,
            appended_at timestamptz NOT NULL DEFAULT now()
        );
        ALTER TABLE fix_batches ALTER couriers SET STORAGE EXTERNAL, ALTER lat SET STORAGE EXTERNAL,
            ALTER lon SET STORAGE EXTERNAL, ALTER heading SET STORAGE EXTERNAL, ALTER speed_mps SET STORAGE EXTERNAL,
            ALTER fix_at SET STORAGE EXTERNAL;
        -- Statistics of the arrays would be read out of line at every analyze, and no query needs them.
        ALTER TABLE fix_batches ALTER couriers SET STATISTICS 0, ALTER lat SET STATISTICS 0, ALTER lon SET STATISTICS 0,
            ALTER heading SET STATISTICS 0, ALTER speed_mps SET STATISTICS 0, ALTER fix_at SET STATISTICS 0;
        """),
    // A parcel's update (its offer, its acceptance, each step after) cannot be heap-only: its status and courier are
    // indexed. So every update added an entry to each index on the table, NULL keys included: a claim code, a centre
    // code, a courier or a recipient most parcels do not have at that moment, which no query looks up (`= $1` never
    // matches NULL). Those indexes now hold only the rows that have the key: two or three fewer entries for each row
    // version, WAL records every relay's slot decodes. The same for a payment's provider intent, which cash never has.
    Migration(16, "indexes without the NULL keys nobody looks up", """
        ALTER TABLE parcels DROP CONSTRAINT parcels_claim_code_key, DROP CONSTRAINT parcels_centre_code_key;
        CREATE UNIQUE INDEX parcels_claim_code_key ON parcels (claim_code) WHERE claim_code IS NOT NULL;
        CREATE UNIQUE INDEX parcels_centre_code_key ON parcels (centre_code) WHERE centre_code IS NOT NULL;
        DROP INDEX parcels_by_recipient, parcels_by_courier;
        CREATE INDEX parcels_by_recipient ON parcels (recipient_user_id, id DESC) WHERE recipient_user_id IS NOT NULL;
        CREATE INDEX parcels_by_courier ON parcels (courier_id, id DESC) WHERE courier_id IS NOT NULL;
        ALTER TABLE payments DROP CONSTRAINT payments_provider_intent_key;
        CREATE UNIQUE INDEX payments_provider_intent_key ON payments (provider_intent) WHERE provider_intent IS NOT NULL;
        """),
    // A batch of fixes looked each courier up by key to learn whether they carry parcels (and are registered, which
    // the matching index mostly knows already): a thousand descents of an index of every courier. The couriers
    // carrying parcels are few, and an index of them alone answers the same question in a fifth of the time.
    Migration(17, "an index of the couriers carrying parcels", "CREATE INDEX couriers_carrying ON couriers (user_id) WHERE active > 0;"),
    Migration(18, "what each image was uploaded for", MediaStore.purposeSQL(default: "parcel")),
    // A person dispatch hears of (`user.registered`, `user.updated`) is looked up among the parcels still waiting for
    // the recipient their sender named by username or address: only those rows are in these indexes.
    Migration(19, "the parcels waiting for a recipient named by username or address", """
        CREATE INDEX parcels_awaiting_username ON parcels (lower(recipient_username))
            WHERE recipient_user_id IS NULL AND recipient_username IS NOT NULL;
        CREATE INDEX parcels_awaiting_email ON parcels (lower(recipient_email))
            WHERE recipient_user_id IS NULL AND recipient_email IS NOT NULL;
        """),
    Migration(20, "images' bytes out of the table, into the media store", MediaStore.storeSQL(schema: "dispatch")),
    Migration(21, "each image's placeholder, and so its renditions", MediaStore.placeholderSQL),
    // A courier is offered parcels only once an operator approved them (`Vetting`). Couriers already registered keep
    // working: the column's first default approves every existing row without rewriting the table, and only then
    // does a new courier start unvetted.
    Migration(22, "couriers vetted before they are offered anything: applications and the operators' decisions", """
        ALTER TABLE couriers ADD COLUMN vetting text NOT NULL DEFAULT 'approved'
            CHECK (vetting IN ('unvetted', 'pending', 'approved', 'rejected', 'suspended'));
        ALTER TABLE couriers ALTER COLUMN vetting SET DEFAULT 'unvetted';
        CREATE INDEX couriers_vetting ON couriers (vetting, updated_at) WHERE vetting <> 'approved';
        CREATE TABLE courier_applications (
            user_id uuid PRIMARY KEY,
            legal_name text NOT NULL,
            phone text NOT NULL,
            vehicle text NOT NULL,
            identity_media_id uuid,
            vehicle_media_id uuid,
            consented_at timestamptz NOT NULL,
            decided_at timestamptz,
            documents_erased_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX courier_applications_documents_due ON courier_applications (decided_at)
            WHERE identity_media_id IS NOT NULL AND decided_at IS NOT NULL;
        CREATE TABLE courier_vetting_history (
            id bigserial PRIMARY KEY,
            user_id uuid NOT NULL,
            decision text NOT NULL,
            reason text,
            operator_name text,
            at timestamptz NOT NULL DEFAULT clock_timestamp()
        );
        CREATE INDEX courier_vetting_history_by_user ON courier_vetting_history (user_id, id);
        """),
    // A card whose holder must authenticate (3-D Secure) stays `pending` with its authorisation due: the app gets the
    // intent's client secret to complete it with Stripe's SDK, until the payment is given up at `action_expires_at`.
    // The secret is kept only while they are waited for: the index holds those payments alone (a subscription's).
    Migration(23, "card payments waiting for their holder to authenticate", """
        ALTER TABLE payments ADD COLUMN client_secret text CHECK (length(client_secret) <= 500),
            ADD COLUMN action_expires_at timestamptz;
        CREATE INDEX payments_awaiting_holder ON payments (subscription_id) WHERE client_secret IS NOT NULL;
        """),
    // Tariffs and plans' prices as data: the one in force at a time is the one effective last at or before it; a
    // new one never takes effect in the past. The seeds keep today's prices in force until an operator sets others. A
    // parcel keeps the tariff that priced it (none for the parcels booked before); a subscription keeps the price it
    // was taken at.
    // Each payment captured gets a receipt, numbered without gaps within a year by the year's counter row, which the
    // capture's transaction increments.
    Migration(24, "tariffs and plan prices, kept by each parcel and subscription; receipts", """
        CREATE TABLE tariffs (
            id uuid PRIMARY KEY,
            currency text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
            base_minor int NOT NULL CHECK (base_minor >= 0),
            per_km_minor int NOT NULL CHECK (per_km_minor >= 0),
            express_basis_points int NOT NULL CHECK (express_basis_points BETWEEN 10000 AND 50000),
            insurance_minor int NOT NULL CHECK (insurance_minor >= 0),
            effective_from timestamptz NOT NULL UNIQUE,
            created_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        INSERT INTO tariffs (id, currency, base_minor, per_km_minor, express_basis_points, insurance_minor, effective_from, created_by)
        VALUES (gen_random_uuid(), 'EUR', 300, 80, 15000, 150, '1970-01-01T00:00:00Z', 'migration 24');
        ALTER TABLE parcels ADD COLUMN tariff_id uuid REFERENCES tariffs (id);
        CREATE TABLE plan_prices (
            id uuid PRIMARY KEY,
            plan_id text NOT NULL,
            price_minor int NOT NULL CHECK (price_minor BETWEEN 50 AND 1000000),
            currency text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
            effective_from timestamptz NOT NULL,
            created_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            UNIQUE (plan_id, effective_from)
        );
        INSERT INTO plan_prices (id, plan_id, price_minor, currency, effective_from, created_by)
        VALUES (gen_random_uuid(), 'plus', 900, 'EUR', '1970-01-01T00:00:00Z', 'migration 24'),
               (gen_random_uuid(), 'pro', 1900, 'EUR', '1970-01-01T00:00:00Z', 'migration 24');
        ALTER TABLE subscriptions ADD COLUMN price_minor int CHECK (price_minor >= 0);
        UPDATE subscriptions s SET price_minor = p.price_minor FROM plan_prices p WHERE p.plan_id = s.plan_id;
        CREATE TABLE receipt_counters (
            year int PRIMARY KEY,
            last int NOT NULL CHECK (last > 0)
        );
        CREATE TABLE receipts (
            number text PRIMARY KEY,
            year int NOT NULL,
            seq int NOT NULL,
            payment_id uuid NOT NULL UNIQUE REFERENCES payments (id),
            payer_id uuid NOT NULL,
            purpose text NOT NULL,
            parcel_id uuid,
            currency text NOT NULL,
            total_minor int NOT NULL CHECK (total_minor >= 0),
            tax_rate_basis_points int NOT NULL CHECK (tax_rate_basis_points BETWEEN 0 AND 10000),
            tax_minor int NOT NULL CHECK (tax_minor BETWEEN 0 AND total_minor),
            lines jsonb NOT NULL,
            issued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            UNIQUE (year, seq)
        );
        CREATE INDEX receipts_by_payer ON receipts (payer_id, issued_at);
        -- A receipt's figures never change; only an erased payer becomes nobody on it.
        CREATE FUNCTION receipts_keep_their_figures() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF (NEW.number, NEW.year, NEW.seq, NEW.payment_id, NEW.purpose, NEW.parcel_id, NEW.currency, NEW.total_minor,
                    NEW.tax_rate_basis_points, NEW.tax_minor, NEW.lines, NEW.issued_at)
                   IS DISTINCT FROM (OLD.number, OLD.year, OLD.seq, OLD.payment_id, OLD.purpose, OLD.parcel_id, OLD.currency, OLD.total_minor,
                    OLD.tax_rate_basis_points, OLD.tax_minor, OLD.lines, OLD.issued_at) THEN
                    RAISE EXCEPTION 'a receipt does not change';
                END IF;
                RETURN NEW;
            END $$;
        CREATE TRIGGER receipts_keep_their_figures BEFORE UPDATE ON receipts
            FOR EACH ROW EXECUTE FUNCTION receipts_keep_their_figures();
        CREATE TRIGGER receipts_stay BEFORE DELETE ON receipts
            FOR EACH ROW EXECUTE FUNCTION payment_ledger_is_append_only();
        """),
    // What couriers earn, one entry per parcel they delivered (the share it was worked out by kept with it; only an
    // erasure changes an entry, to name nobody), and the
    // refunds operators make after a sale: a refund to the card is `pending` until the provider answers (asked again
    // under the same idempotency key, its id, from `due_at`), and is written to the payment ledger (and a refund to
    // the wallet to the wallet's) once done, one entry per refund; pending and done refunds together never exceed
    // what was taken, which the payment's row lock keeps.
    Migration(25, "couriers' earnings and refunds", """
        CREATE TABLE courier_earnings (
            parcel_id uuid PRIMARY KEY REFERENCES parcels (id),
            courier_id uuid NOT NULL,
            price_minor int NOT NULL CHECK (price_minor >= 0),
            share_percent int NOT NULL CHECK (share_percent BETWEEN 0 AND 100),
            amount_minor int NOT NULL CHECK (amount_minor BETWEEN 0 AND price_minor),
            currency text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
            at timestamptz NOT NULL DEFAULT clock_timestamp()
        );
        CREATE INDEX courier_earnings_by_courier ON courier_earnings (courier_id, at);
        CREATE INDEX courier_earnings_by_time ON courier_earnings (at);
        CREATE TABLE refunds (
            id uuid PRIMARY KEY,
            payment_id uuid NOT NULL REFERENCES payments (id),
            parcel_id uuid NOT NULL,
            payer_id uuid NOT NULL,
            destination text NOT NULL CHECK (destination IN ('card', 'wallet')),
            amount_minor int NOT NULL CHECK (amount_minor > 0),
            currency text NOT NULL,
            reason text NOT NULL CHECK (length(reason) BETWEEN 1 AND 500),
            status text NOT NULL CHECK (status IN ('pending', 'refunded', 'failed')),
            provider_refund text,
            failure text,
            due_at timestamptz,
            attempts int NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            CHECK ((status = 'pending') = (due_at IS NOT NULL))
        );
        CREATE INDEX refunds_due ON refunds (due_at) WHERE status = 'pending';
        CREATE INDEX refunds_by_payment ON refunds (payment_id);
        ALTER TABLE payment_ledger ADD COLUMN refund_id uuid REFERENCES refunds (id),
            DROP CONSTRAINT payment_ledger_entry_check,
            ADD CHECK (entry IN ('authorised', 'declined', 'captured', 'voided', 'cash_collected', 'wallet_debited', 'wallet_returned',
                                 'refunded')),
            ADD CHECK ((entry = 'refunded') = (refund_id IS NOT NULL));
        DROP INDEX payment_ledger_once;
        CREATE UNIQUE INDEX payment_ledger_once ON payment_ledger (payment_id, entry) WHERE refund_id IS NULL;
        CREATE UNIQUE INDEX payment_ledger_refund_once ON payment_ledger (refund_id) WHERE refund_id IS NOT NULL;
        ALTER TABLE wallet_ledger ADD COLUMN refund_id uuid REFERENCES refunds (id),
            DROP CONSTRAINT wallet_ledger_payment_id_entry_key;
        CREATE UNIQUE INDEX wallet_ledger_once ON wallet_ledger (payment_id, entry) WHERE refund_id IS NULL;
        CREATE UNIQUE INDEX wallet_ledger_refund_once ON wallet_ledger (refund_id) WHERE refund_id IS NOT NULL;
        """),
]
