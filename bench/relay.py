"""The outbox relay beside a raw producer, interleaved round by round (run by bench/relay.sh, which sets the env).

Each round:
  1. drain: EVENTS rows of a story.created-sized event committed to stories' outbox at once, on an empty topic of the
     bench's own (every phase below writes to a new one, deleted after it with the outbox rows it had); events/s from
     the commit to the last one the broker acknowledged (stories' relay reads them from the WAL), and the CPU of
     stories and PostgreSQL (its walsender; not the insert's backend) per 1,000 events; beside it, confluent-kafka's
     producer (idempotent, acks=all, linger 1 ms, as the relay's) sending the same events: the same key, value and
     `ce_type` header (the conventions' header; without it a message costs the producer and the broker about half as
     much, which the round prints apart);
  2. lag: POST /v1/stories at RATE a second for LAG_SECONDS, story.created read by a consumer assigned to every
     partition; lag = when the consumer has it - the event's time (set in the story's transaction); then outbox rows
     committed by pgbench at RATE a second (the relay's path without the HTTP service sharing the cores), lag from
     each commit (pgbench's log) and from each insert's clock; beside them, the same consumer reading what the raw
     producer sends at the same rate (lag from the produce call).
Each phase starts once the machine is quiet (`settle`). Prints medians of RUNS rounds; last, the broker alone on
story.created's shape as the rounds left it (`broker.alone`: a topic holding as many batches as it holds messages,
one consumer at the rate reached) and story.created's p99 against it and against the outbox rows'.
"""
import glob
import hashlib
import http.client
import itertools
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import broker  # bench/broker.py: the broker alone on a benchmark's shape

BROKERS = os.environ["KAFKA_BROKERS"]
EVENTS = int(os.environ.get("EVENTS", "50000"))
RUNS = int(os.environ.get("RUNS", "3"))
RATE = int(os.environ.get("RATE", "800"))
LAG_SECONDS = int(os.environ.get("LAG_SECONDS", "10"))
STATE = os.environ["STATE"]
PSQL = ["psql", "-h", "127.0.0.1", "-p", os.environ["PG_PORT"], "-U", "postgres", "-d", "stories",
        "-v", "ON_ERROR_STOP=1", "-qtA"]
TOKEN, GROUP = os.environ["TOKEN"], os.environ["GROUP"]
PARTITIONS = int(os.environ.get("KAFKA_TOPIC_PARTITIONS", "3"))
ADMIN = AdminClient({"bootstrap.servers": BROKERS})
TICK = os.sysconf("SC_CLK_TCK")

# A story.created event as the service writes it (about the same size).
EVENT = json.dumps({
    "specversion": "1.0", "id": str(uuid.uuid4()), "source": "/stories", "type": "story.created",
    "time": "2026-11-30T12:00:00.000Z", "subject": str(uuid.uuid4()), "datacontenttype": "application/json",
    "dataschema": "https://schemas.example.com/events/story.created.json",
    "data": {"storyId": str(uuid.uuid4()), "authorId": str(uuid.uuid4()), "groupIds": [str(uuid.uuid4())],
             "mediaIds": [], "backgroundColor": "#AABBCC", "createdAt": "2026-11-30T12:00:00.000Z"}})


def say(*a):
    print(*a, file=sys.stderr, flush=True)


class Session:
    """One psql session kept open, so polling costs PostgreSQL no new backend each time."""

    def __init__(self):
        self.p = subprocess.Popen(PSQL, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def one(self, sql):
        self.p.stdin.write(sql + ";\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def pg_cpu():
    """The postmaster's own and exited children's CPU, plus its live backends'."""
    with open(f"{STATE}/pg/postmaster.pid") as f:
        master = int(f.readline())
    with open(f"/proc/{master}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    total = sum(int(x) for x in fields[11:15])
    children = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True).stdout.split()
    for p in children:
        try:
            total += cpu(p)
        except OSError:
            pass
    return total


def busy():
    """The machine's busy and total CPU ticks so far (/proc/stat)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


def settle(phase, limit=30.0):
    """Waits until the machine is quiet (under 15% busy over half a second; at most `limit` seconds) before `phase`:
    the services that consume the stories just posted are still at work for a while after, and would share the cores
    with the next phase. Says how long it waited when it did."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        b0, a0 = busy()
        time.sleep(0.5)
        b1, a1 = busy()
        if (b1 - b0) < 0.15 * (a1 - a0):
            break
    if time.monotonic() - t0 > 1:
        say(f"  ({phase}: waited {time.monotonic() - t0:.1f} s for a quiet machine)")


def stories_pid():
    with open(f"{STATE}/stories.pid") as f:
        return int(f.read())


def drain_relay(topic):
    """-> (events/s, stories CPU ms per 1,000 events, PostgreSQL CPU ms per 1,000 events, the insert's excluded)"""
    payload = EVENT.replace("'", "''")
    db = Session()
    writer = int(db.one("SELECT pg_backend_pid()"))
    s0, p0, w0 = cpu(stories_pid()), pg_cpu(), cpu(writer)
    # The WAL position after the rows and before their commit: the relay confirms its slot past it once the broker
    # acknowledged every one of them (it confirms a transaction only then).
    written = db.one(f"WITH r AS (INSERT INTO stories.outbox (event_id, topic, key, payload) SELECT gen_random_uuid(), "
                     f"'{topic}', md5(i::text), '{payload}' FROM generate_series(1, {EVENTS}) i RETURNING id) "
                     f"SELECT pg_current_wal_insert_lsn() FROM (SELECT count(*) FROM r) n").strip()
    # Timed from the commit to the last event acknowledged by the broker: decoding the WAL is the relay's work.
    committed = time.monotonic()
    while db.one(f"SELECT confirmed_flush_lsn > '{written}' FROM pg_replication_slots "
                 f"WHERE slot_name = current_database() || '_stories_outbox'") != "t":
        time.sleep(0.002)
    elapsed = time.monotonic() - committed
    s1, p1, w1 = cpu(stories_pid()), pg_cpu(), cpu(writer)
    db.close()
    return EVENTS / max(elapsed, 1e-3), (s1 - s0) * 1e6 / TICK / EVENTS, ((p1 - p0) - (w1 - w0)) * 1e6 / TICK / EVENTS


def producer():
    return Producer({"bootstrap.servers": BROKERS, "enable.idempotence": True, "acks": "all", "linger.ms": 1,
                     "allow.auto.create.topics": False})


HEADER = [("ce_type", b"story.created")]
KEYS = [hashlib.md5(str(i).encode()).hexdigest().encode() for i in range(1, EVENTS + 1)]  # drain_relay's md5(i::text)


def drain_raw(topic, headers=HEADER):
    p = producer()
    value = EVENT.encode()
    p.produce(topic, b"warm", b"x")
    p.flush(10)
    t0 = time.monotonic()
    for k in KEYS:
        while True:
            try:
                p.produce(topic, value, k, headers=headers)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    if p.flush(60) != 0:
        raise SystemExit("the raw producer did not deliver everything")
    return EVENTS / (time.monotonic() - t0)


class Reader(threading.Thread):
    """A consumer assigned to every partition of a topic at its end; records each message's arrival time by the
    key it was told to expect."""

    def __init__(self, topic):
        super().__init__(daemon=True)
        self.topic, self.seen, self.stop = topic, {}, False
        self.c = Consumer({"bootstrap.servers": BROKERS, "group.id": f"bench-relay-{uuid.uuid4()}",
                           "enable.auto.commit": False, "fetch.wait.max.ms": 10, "fetch.min.bytes": 1})
        md = self.c.list_topics(topic, timeout=10)
        parts = md.topics[topic].partitions
        ends = [TopicPartition(topic, p, self.c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1])
                for p in parts]
        self.c.assign(ends)

    def run(self):
        while not self.stop:
            m = self.c.poll(0.05)
            if m is None or m.error():
                continue
            self.seen[m.value()] = time.time()
        self.c.close()


def lag_service():
    r = Reader("story.created")
    r.start()
    time.sleep(1)
    body = json.dumps({"text": "A lag story", "groupIds": [GROUP]})
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
    story_ids, failures = [], []
    workers = max(1, RATE // 100)  # each connection paced at RATE / workers, about 100 a second

    def post(w):
        conn = http.client.HTTPConnection("127.0.0.1", 8082)
        for i in range(w, RATE * LAG_SECONDS, workers):
            time.sleep(max(0, start + i / RATE - time.monotonic()))
            conn.request("POST", "/v1/stories", body, headers)
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 201:
                failures.append(f"POST /v1/stories answered {resp.status}: {data[:200]!r}")
                return
            story_ids.append(json.loads(data)["id"])

    start = time.monotonic()
    threads = [threading.Thread(target=post, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise SystemExit(failures[0])
    achieved = len(story_ids) / (time.monotonic() - start)
    time.sleep(2)
    r.stop = True
    r.join()
    wanted = set(story_ids)
    lags = []
    for value, arrived in r.seen.items():
        event = json.loads(value)
        if event["subject"] in wanted:
            sent = datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()
            lags.append((arrived - sent) * 1000)
    if len(lags) != len(wanted):
        raise SystemExit(f"the consumer read {len(lags)} of {len(wanted)} story.created events")
    return achieved, lags


def lag_outbox(topic):
    """Outbox rows committed at RATE a second by pgbench (4 connections), each carrying its client and its insert's
    time; the lag is when the consumer has it less its commit, which pgbench's per-transaction log gives (each client's
    transactions run one after another: its k-th row is its k-th logged transaction), and less the insert's time, which
    adds the commit itself (its fsync). -> (achieved rate, commit lags in ms, insert lags in ms)"""
    r = Reader(topic)
    r.start()
    time.sleep(1)
    data = json.dumps(json.loads(EVENT)["data"]).replace("'", "''")
    # The insert's clock as seconds since the epoch (a formatted time's colons would be pgbench variables).
    script = ("\\set k random(1, 1000000000)\n"
              "INSERT INTO stories.outbox (event_id, topic, key, payload) VALUES (gen_random_uuid(), "
              f"'{topic}', :k::text, '{{\"subject\": \"lag\", \"client\": ' || :client_id || ', \"epoch\": ' "
              f"|| extract(epoch FROM clock_timestamp()) || ', \"data\": {data}}}');\n")
    path, logs = f"/tmp/bench-relay-{os.getpid()}.sql", f"/tmp/bench-relay-{os.getpid()}-log"
    with open(path, "w") as f:
        f.write(script)
    out = subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", os.environ["PG_PORT"], "-U", "postgres", "-n", "-M", "prepared",
                          "-c", "4", "-j", "2", "-R", str(RATE), "-T", str(LAG_SECONDS), "-l", f"--log-prefix={logs}",
                          "-f", path, "stories"], capture_output=True, text=True)
    os.unlink(path)
    commits = {}  # client -> [(transaction number, commit time)]
    for name in glob.glob(logs + ".*"):
        with open(name) as f:
            for line in f:
                client, number, _, _, epoch, micros = line.split()[:6]
                commits.setdefault(int(client), []).append((int(number), int(epoch) + int(micros) / 1e6))
        os.unlink(name)
    if out.returncode != 0:
        raise SystemExit(f"pgbench failed: {out.stderr}")
    time.sleep(2)
    r.stop = True
    r.join()
    inserted = {}  # client -> [(insert time, arrival)]
    for value, arrived in r.seen.items():
        try:
            event = json.loads(value)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("subject") == "lag":
            inserted.setdefault(event["client"], []).append((float(event["epoch"]), arrived))
    if not inserted:
        raise SystemExit("the consumer read none of the outbox rows pgbench wrote")
    from_insert = [(arrived - at) * 1000 for rows in inserted.values() for at, arrived in rows]
    from_commit = []
    for client, rows in inserted.items():
        logged = sorted(commits.get(client, []))
        if len(logged) != len(rows):
            raise SystemExit(f"client {client}: pgbench logged {len(logged)} transactions, the consumer read {len(rows)} rows")
        from_commit += [(arrived - committed) * 1000 for (_, arrived), (_, committed) in zip(sorted(rows), logged)]
    return len(from_insert) / LAG_SECONDS, from_commit, from_insert


def lag_raw(topic):
    r = Reader(topic)
    r.start()
    time.sleep(1)
    p = producer()
    p.produce(topic, b"warm", b"x")
    p.flush(10)
    sent = {}
    start = time.monotonic()
    for i in range(RATE * LAG_SECONDS):
        time.sleep(max(0, start + i / RATE - time.monotonic()))
        value = f"{i}:{EVENT}".encode()
        sent[value] = time.time()
        p.produce(topic, value, str(i).encode(), headers=HEADER)
        p.poll(0)
    p.flush(10)
    time.sleep(2)
    r.stop = True
    r.join()
    lags = [(r.seen[v] - t) * 1000 for v, t in sent.items() if v in r.seen]
    if len(lags) != len(sent):
        raise SystemExit(f"the consumer read {len(lags)} of {len(sent)} raw messages")
    return lags


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


ROUND_TOPICS = itertools.count(1)


def on_fresh_topic(phase, run):
    """Runs a measurement on a topic of its own, made empty and deleted after it: Tansu keeps every message in memory,
    and a broker holding the earlier phases' messages answers later ones slower (a raw producer's p99 grew from 117 ms
    to 3.1 s over three rounds on one topic), which favoured whatever ran first."""
    topic = f"bench.relay.{os.getpid()}.{next(ROUND_TOPICS)}.{phase}"
    settle(phase)
    for f in ADMIN.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result()
    deadline = time.monotonic() + 10
    while topic not in ADMIN.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise SystemExit(f"the broker did not show the topic {topic}")
        time.sleep(0.1)
    try:
        return run(topic)
    finally:
        # With its outbox rows: none may stay for a republish or a re-made slot to send to a topic nobody creates.
        subprocess.run(PSQL + ["-c", f"DELETE FROM stories.outbox WHERE topic = '{topic}'"], check=True, capture_output=True)
        for f in ADMIN.delete_topics([topic]).values():
            f.result()


def main():
    # Topics of earlier runs on this broker (an interrupted run leaves its own).
    stale = [t for t in ADMIN.list_topics(timeout=10).topics if t.startswith("bench.relay")]
    if stale:
        for f in ADMIN.delete_topics(stale).values():
            f.result()
    rows = {k: [] for k in ("relay", "relay_svc", "relay_pg", "raw", "bare", "lag50", "lag99", "raw50", "raw99", "rate",
                            "out50", "out99", "com50", "com99", "out_rate")}
    for i in range(1, RUNS + 1):
        rate, svc, pg = on_fresh_topic("relay", drain_relay)
        raw = on_fresh_topic("raw", drain_raw)
        bare = on_fresh_topic("bare", lambda t: drain_raw(t, headers=None))
        settle("story.created")
        achieved, lags = lag_service()
        out_rate, com_lags, out_lags = on_fresh_topic("outbox-lag", lag_outbox)
        raw_lags = on_fresh_topic("raw-lag", lag_raw)
        for k, v in (("relay", rate), ("relay_svc", svc), ("relay_pg", pg), ("raw", raw), ("bare", bare), ("rate", achieved),
                     ("lag50", pct(lags, 0.5)), ("lag99", pct(lags, 0.99)),
                     ("raw50", pct(raw_lags, 0.5)), ("raw99", pct(raw_lags, 0.99)),
                     ("out_rate", out_rate), ("out50", pct(out_lags, 0.5)), ("out99", pct(out_lags, 0.99)),
                     ("com50", pct(com_lags, 0.5)), ("com99", pct(com_lags, 0.99))):
            rows[k].append(v)
        say(f"  round {i}: relay {rate:,.0f}/s ({svc:.0f}, {pg:.0f} ms CPU per 1,000) | raw producer {raw:,.0f}/s (without the header {bare:,.0f}/s) | "
            f"story.created lag at {achieved:.0f}/s p50 {pct(lags, 0.5):.1f} p99 {pct(lags, 0.99):.1f} ms | "
            f"outbox rows at {out_rate:.0f}/s from commit p50 {pct(com_lags, 0.5):.1f} p99 {pct(com_lags, 0.99):.1f} ms "
            f"(from insert {pct(out_lags, 0.5):.1f}, {pct(out_lags, 0.99):.1f}) | "
            f"raw p50 {pct(raw_lags, 0.5):.1f} p99 {pct(raw_lags, 0.99):.1f} ms")
    m = {k: statistics.median(v) for k, v in rows.items()}
    print(f"\nrelay, {time.strftime('%Y-%m-%d', time.gmtime())}, {os.cpu_count()} cores, {EVENTS:,} events a drain, "
          f"story.created at {RATE}/s for {LAG_SECONDS}s, medians of {RUNS} interleaved rounds")
    print(f"{'target':<52} {'events/s':>10} {'ratio':>7} {'CPU ms/1000: svc, pg':>22}")
    print(f"{'outbox relay draining a backlog':<52} {m['relay']:>10,.0f} {m['relay'] / m['raw']:>7.2f} "
          f"{m['relay_svc']:>15.0f}, {m['relay_pg']:.0f}")
    print(f"{'  confluent-kafka producer, the same messages':<52} {m['raw']:>10,.0f} {1:>7.2f} {'-':>22}")
    print(f"{'  the same without the ce_type header (not the same)':<52} {m['bare']:>10,.0f} {m['bare'] / m['raw']:>7.2f} {'-':>22}")
    print(f"{'target':<52} {'p50 ms':>10} {'p99 ms':>7}")
    print(f"{'story.created, commit to consumer, at %.0f/s' % m['rate']:<52} {m['lag50']:>10.1f} {m['lag99']:>7.1f}")
    print(f"{'outbox rows (pgbench), commit to consumer, at %.0f/s' % m['out_rate']:<52} {m['com50']:>10.1f} {m['com99']:>7.1f}"
          f"   p99 {m['com99'] / m['raw99']:.2f} of the raw producer's")
    print(f"{'  the same from the insert (its commit included)':<52} {m['out50']:>10.1f} {m['out99']:>7.1f}")
    print(f"{'  raw producer to the same consumer':<52} {m['raw50']:>10.1f} {m['raw99']:>7.1f}")
    # The broker alone on story.created's shape as the rounds left it: one consumer at the rate reached.
    with open(os.path.join(STATE, "tansu.pid")) as f:
        alone = broker.alone(BROKERS, "story.created", round(m["rate"]), 1, int(f.read().split()[0]))
    if alone:
        print(f"story.created p99 {m['lag99']:.1f} ms against the broker alone's {alone:.1f} ms on the same shape: "
              f"{m['lag99'] / alone:.2f}; against the outbox rows' (pgbench) {m['com99']:.1f} ms: {m['lag99'] / m['com99']:.2f} "
              f"(goal: at most 2)")


main()
