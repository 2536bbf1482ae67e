"""An example consumer of the backend's events, in Python with confluent-kafka (docs/events.md).

What every consumer must do, shown in one place:
  - subscribe with a consumer group of its own, offsets committed by hand (never automatically);
  - validate each event against its JSON Schema (Shared/Models/Schemas/<type>.json, or docs/asyncapi.json);
  - de-duplicate by the CloudEvents `id`: events arrive at least once (a relay retry, a `republish` after a broker
    loss), so the effect and the id are written in one transaction, and an id seen before changes nothing;
  - commit the offset only after that transaction: a crash in between replays the event, which the id absorbs.
Its "effect" here is a row in a SQLite table; put your own processing where `apply` is.

  pip install confluent-kafka jsonschema rfc3339-validator
  (rfc3339-validator: without it, jsonschema's format checker lets any text pass as a `date-time`.)
  python consume.py --brokers kafka:9092 --group my-app --topics story.created,parcel.status --state my-app.sqlite3
  (--idle N stops after N seconds without a message; otherwise it runs until interrupted.)
Prints one line per event: `processed`, `duplicate` or `invalid`, with the type, id, trace id and reason; then a summary.
"""
import argparse
import json
import os
import signal
import sqlite3
import sys
import time

import jsonschema
from confluent_kafka import Consumer, KafkaException

try:
    import rfc3339_validator  # noqa: F401 (jsonschema's date-time check uses it when it is installed)
except ImportError:
    sys.exit("consume.py: pip install rfc3339-validator: without it jsonschema checks no date-time")

SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../Shared/Models/Schemas")


def load_validators(directory):
    validators = {}
    for name in os.listdir(directory):
        if name.endswith(".json"):
            with open(os.path.join(directory, name)) as f:
                schema = json.load(f)
            validators[name[:-5]] = jsonschema.Draft202012Validator(
                schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return validators


def open_state(path):
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS processed (id TEXT PRIMARY KEY, type TEXT NOT NULL, subject TEXT NOT NULL, at REAL NOT NULL)")
    db.execute("CREATE TABLE IF NOT EXISTS effects (id TEXT PRIMARY KEY, type TEXT NOT NULL, subject TEXT NOT NULL, data TEXT NOT NULL)")
    return db


def apply(db, event):
    """The consumer's own processing, in the transaction that records the id."""
    db.execute("INSERT INTO effects (id, type, subject, data) VALUES (?, ?, ?, ?)",
               (event["id"], event["type"], event["subject"], json.dumps(event["data"])))


def trace_id(event):
    """The W3C trace id of the request that caused the event (its `traceparent`), to find it in the services' logs."""
    parts = str((event or {}).get("traceparent") or "").split("-") if isinstance(event, dict) else []
    return parts[1] if len(parts) == 4 else None


def handle(db, validators, message):
    """'processed', 'duplicate' or 'invalid', with the event (or None) and the reason."""
    try:
        event = json.loads(message.value())
    except (TypeError, ValueError) as error:
        return "invalid", None, f"not JSON: {error}"
    validator = validators.get(event.get("type") if isinstance(event, dict) else None)
    if validator is None:
        return "invalid", event, f"no schema for type {event.get('type') if isinstance(event, dict) else event!r}"
    problem = next(iter(validator.iter_errors(event)), None)
    if problem is not None:
        where = "/".join(str(p) for p in problem.absolute_path) or "(the envelope)"
        return "invalid", event, f"{where}: {problem.message}"
    db.execute("BEGIN IMMEDIATE")
    try:
        seen = db.execute("SELECT 1 FROM processed WHERE id = ?", (event["id"],)).fetchone()
        if seen:
            db.execute("ROLLBACK")
            return "duplicate", event, "id seen before"
        apply(db, event)
        db.execute("INSERT INTO processed (id, type, subject, at) VALUES (?, ?, ?, ?)",
                   (event["id"], event["type"], event["subject"], time.time()))
        db.execute("COMMIT")
    except Exception:
        db.execute("ROLLBACK")
        raise
    return "processed", event, ""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topics", required=True, help="comma-separated")
    parser.add_argument("--state", required=True, help="SQLite file: processed ids and the effects")
    parser.add_argument("--schemas", default=SCHEMAS)
    parser.add_argument("--idle", type=float, default=0, help="stop after this many seconds without a message")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a further librdkafka setting (security.protocol=SSL, session.timeout.ms=6000, ...)")
    args = parser.parse_args()

    validators = load_validators(args.schemas)
    db = open_state(args.state)
    settings = {"bootstrap.servers": args.brokers, "group.id": args.group, "enable.auto.commit": False,
                "auto.offset.reset": "earliest", "isolation.level": "read_committed"}
    settings.update(item.split("=", 1) for item in args.config)
    consumer = Consumer(settings)
    consumer.subscribe(args.topics.split(","))
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    counts = {"processed": 0, "duplicate": 0, "invalid": 0}
    last = time.time()
    try:
        while not stopping:
            message = consumer.poll(0.5)
            if message is None:
                if args.idle and time.time() - last > args.idle:
                    break
                continue
            if message.error():
                if message.error().fatal():
                    raise KafkaException(message.error())
                print(f"consume: {message.error()}", file=sys.stderr, flush=True)  # e.g. a topic not created yet
                continue
            last = time.time()
            outcome, event, reason = handle(db, validators, message)
            counts[outcome] += 1
            print(json.dumps({"outcome": outcome, "type": (event or {}).get("type"), "id": (event or {}).get("id"),
                              "traceId": trace_id(event), "reason": reason or None}), flush=True)
            # After processing, never before: an invalid event is committed too (it would never become valid;
            # a real consumer would also copy it to a dead-letter topic).
            consumer.commit(message=message, asynchronous=False)
    finally:
        consumer.close()
        db.close()
    print(json.dumps({"summary": counts}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
