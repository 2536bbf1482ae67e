import Foundation
import Models
import Postgres
import Runtime
import Web

/// The tables every service has: the outbox, the consumer's processed-event ids and stored idempotent responses.
/// Put `Platform.migration` first in a service's migrations.
public enum Platform {
    public static let migration = Migration(1, "platform: outbox, processed events, idempotency keys", """
        CREATE TABLE outbox (
            id bigserial PRIMARY KEY,
            event_id uuid NOT NULL UNIQUE,
            topic text NOT NULL,
            key text NOT NULL,
            payload text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            sent_at timestamptz,
            attempts int NOT NULL DEFAULT 0,
            last_error text
        );
        CREATE INDEX outbox_unsent ON outbox (id) WHERE sent_at IS NULL;
        CREATE INDEX outbox_created ON outbox (created_at);
        CREATE TABLE processed_events (
            event_id uuid PRIMARY KEY,
            topic text NOT NULL,
            processed_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE idempotency_keys (
            caller text NOT NULL,
            key text NOT NULL,
            request_hash text NOT NULL,
            status int NOT NULL,
            body bytea NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (caller, key)
        );
        """)
}

extension Platform {
    /// The outbox read from the write-ahead log (`OutboxRelay`): its rows are never updated, so what marked them sent
    /// goes; the publication names what the relay's slot decodes (the inserts, and only the columns it publishes: the
    /// others' text forms cost the decoder more than the rest); `outbox_slot` records a slot whose snapshot of the
    /// outbox was published. Put it after `Platform.migration`.
    public static let streamedOutbox = Migration(10_000, "platform: the outbox read from the write-ahead log", """
        DROP INDEX outbox_unsent;
        ALTER TABLE outbox DROP COLUMN sent_at, DROP COLUMN attempts, DROP COLUMN last_error;
        CREATE TABLE outbox_slot (name text PRIMARY KEY, made_at timestamptz NOT NULL DEFAULT now());
        DO $$ BEGIN
            EXECUTE format('CREATE PUBLICATION %I FOR TABLE %I.outbox (topic, key, payload) WITH (publish = %L)',
                           current_schema() || '_outbox', current_schema(), 'insert');
        END $$;
        """)
}

extension Platform {
    /// Every outbox row paid three index entries, each a WAL record that every relay's slot decodes (a slot reads the
    /// whole cluster's WAL): the event id's uniqueness, which nothing looks up (ids are made here, version 7 UUIDs),
    /// goes; `created_at`, which only the cleanup and `republish` range over, is summarised by a BRIN index (the table
    /// is written in time order), which an insert into a page range not yet summarised does not write to. Put it after
    /// `Platform.streamedOutbox`.
    public static let leanOutbox = Migration(10_001, "platform: the outbox's indexes, fewer", """
        ALTER TABLE outbox DROP CONSTRAINT outbox_event_id_key;
        DROP INDEX outbox_created;
        CREATE INDEX outbox_created ON outbox USING brin (created_at);
        """)
}

/// Writes events into the outbox inside the caller's transaction, so an event exists exactly when its change does.
public struct Outbox: Sendable {
    /// The service's schema.
    public let schema: String
    /// The CloudEvents `source`, `/<service>`.
    public let source: String
    public init(schema: String, source: String) {
        self.schema = schema; self.source = source
    }

    /// Adds `payload` as an event about `subject` (its aggregate id, also the Kafka key). Returns the event id.
    @discardableResult
    public func add<P: EventPayload>(_ payload: P, subject: String, on connection: Connection, at time: Date = Date()) throws -> String {
        let row = try self.row(payload, subject: subject, at: time)
        // Nothing reads the row back in the transaction: it goes with the next statement or the commit.
        try connection.enqueue("INSERT INTO \(unescaped: schema).outbox (event_id, topic, key, payload) VALUES \(row.values)")
        return row.id.lowercased
    }

    /// The outbox row of `payload` as an event about `subject`, for a statement that writes it beside the change it
    /// tells of (one round trip instead of two): `INSERT INTO <schema>.outbox (event_id, topic, key, payload)
    /// VALUES \(row.values)`.
    public func row<P: EventPayload>(_ payload: P, subject: String, at time: Date = Date()) throws -> OutboxRow {
        let id = UUID.v7(at: time)
        let event = CloudEvent(id: id.lowercased, source: source, type: P.type, time: Timestamp.format(time), subject: subject,
                               dataschema: dataSchemaURI(for: P.type), traceparent: TraceContext.current?.traceparent, data: payload)
        return OutboxRow(id: id, topic: P.type, key: subject, payload: String(decoding: try JSON.encode(event), as: UTF8.self))
    }
}

/// An event as the outbox stores it (see `Outbox.row`).
public struct OutboxRow: Sendable {
    public let id: UUID
    public let topic: String
    public let key: String
    public let payload: String

    /// `(event_id, topic, key, payload)`'s values, bound: `INSERT INTO <schema>.outbox (event_id, topic, key, payload)
    /// VALUES \(row.values)`.
    public var values: SQL { "(\(id), \(topic), \(key), \(payload))" }
}
