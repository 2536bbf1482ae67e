"""The fault suite, run by `deploy/local/stack faults` against the running local stack.

A bounded writer posts stories and parcels from 8 threads, each at most ten a second, while, one after another, a service, the PostgreSQL
postmaster and the broker are killed with SIGKILL and started again the way an operator's supervisor would
(`deploy/local/stack start`; after the broker, which loses every event when it restarts, `republish` as the README
says). Then the broker is paused while the writes go on, so the outboxes build a backlog in the write-ahead log; once
it is back, stories is killed with SIGKILL as its relay starts draining, and started again. Meanwhile a logged-out
token is tried every half second and the services' readiness is watched. Each story writer also comments on a story
of its own, one comment after another (`story.commented`, keyed by that story). Then it checks, with a Kafka client of
its own (not watermarks: Tansu reports them short):
  - every acknowledged write is in the database,
  - every one has exactly one distinct event id on its topic,
  - no event on those topics lacks its row,
  - the comments written since the broker's restart reached the topic in the order they were written, each key's
    (read as a consumer does: an event id seen before is skipped),
  - readiness said 503 while a dependency was down,
  - the logged-out token was never accepted.
It prints the counts and exits 1 on any failure.
"""
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

from confluent_kafka import Consumer, TopicPartition

ROOT = sys.argv[1]
STATE = sys.argv[2]
BIN = sys.argv[3]
STACK = os.path.join(ROOT, "deploy/local/stack")
BASE = int(os.environ.get("STACK_PORT_BASE", "8080"))  # the stack's: the services listen on the next six ports
SERVICES = {"auth": BASE + 1, "stories": BASE + 2, "chat": BASE + 3, "dispatch": BASE + 4, "curation": BASE + 5}
AUTH, STORIES, DISPATCH = (f"http://127.0.0.1:{SERVICES[s]}" for s in ("auth", "stories", "dispatch"))
WRITERS = 8
# A real 8 × 8 JPEG (uploads are decoded and re-encoded, so bytes that only look like one are refused).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "document.jpg"), "rb") as f:
    JPEG = f.read()
started = time.time()


def log(message):
    print(f"[{time.time() - started:6.1f}s] {message}", file=sys.stderr, flush=True)


def call(method, url, body=None, token=None, raw=None, content_type="application/json", timeout=5):
    """(status, parsed JSON or None); status 0 when the service could not be reached."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", content_type)
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read()
            return response.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as error:
        return error.code, None
    except Exception:
        return 0, None


def psql(sql, database="postgres"):
    """Rows of `sql` in `database` (each service's is named after it; the slots are the cluster's, seen from any)."""
    out = subprocess.run(["psql", "-h", "127.0.0.1", "-p", os.environ["PG_PORT"], "-U", "postgres", "-tAc", sql, database],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return [line for line in out.stdout.splitlines() if line]


def ready(port):
    return call("GET", f"http://127.0.0.1:{port}/readyz", timeout=2)[0] == 200


def wait_until(condition, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.25)
    raise SystemExit(f"faults: {what} did not happen within {timeout} s")


def wait_for_slots(which, what):
    """Waits until the replication slots `which` (an SQL condition) have confirmed the WAL position of now."""
    now = psql("SELECT pg_current_wal_lsn()")[0]
    wait_until(lambda: psql(f"SELECT bool_and(confirmed_flush_lsn >= '{now}') FROM pg_replication_slots WHERE {which}") == ["t"],
               180, what)


def signup(prefix):
    name = prefix + uuid.uuid4().hex[:10]
    status, body = call("POST", AUTH + "/v1/auth/signup", {"username": name, "email": name + "@example.com",
                                                           "password": "correct horse battery", "fullName": name})
    if status != 201:
        raise SystemExit(f"faults: sign-up failed ({status})")
    return body["user"]["id"], body["accessToken"]


# MARK: - The writer and the watchers

acked = {"story.created": set(), "parcel.created": set()}
acked_lock = threading.Lock()
threads = {}  # (writer, phase) -> [the story commented on, [its comment ids in the order written]]
phase = [0]  # 1 once the broker has restarted and republish ran: the order of these comments is checked
senders = {}  # parcel id -> its sender's token
stop = threading.Event()
revoked_accepted = []
readiness_seen = {}  # (fault, service) -> saw 503


def writer(index, token, group, photo):
    kind = "story.created" if index % 2 == 0 else "parcel.created"
    n = 0
    while not stop.is_set():
        n += 1
        if kind == "story.created":
            status, body = call("POST", STORIES + "/v1/stories", {"text": f"fault run story {index}-{n}", "groupIds": [group]}, token)
        else:
            status, body = call("POST", DISPATCH + "/v1/parcels", {
                "pickup": {"lat": 10.5, "lon": 10.5, "address": "nowhere 1"}, "dropoff": {"lat": 10.6, "lon": 10.6, "address": "nowhere 2"},
                "recipient": {"name": "R", "phone": "+40 700 000 000"}, "service": "standard", "paymentMethod": "cash",
                "documentPhotoMediaId": photo}, token)
        if status == 201 and body and "id" in body:
            with acked_lock:
                acked[kind].add(body["id"])
                if kind == "parcel.created":
                    senders[body["id"]] = token
            if kind == "story.created":
                thread = threads.setdefault((index, phase[0]), [body["id"], []])
                status, comment = call("POST", f"{STORIES}/v1/stories/{thread[0]}/comments", {"text": f"comment {n}"}, token)
                if status == 201 and comment and "id" in comment:
                    thread[1].append(comment["id"])
        else:
            time.sleep(0.2)  # the service or a dependency is down: try again shortly
        # Ten writes a second per thread keep writes in flight at every kill; flat out, the run would take the CPU
        # the test suite runs on beside it, and prove nothing more.
        time.sleep(0.1)


def revocation_watch(token):
    while not stop.is_set():
        for url in (STORIES + "/v1/groups", DISPATCH + "/v1/parcels"):
            status, _ = call("GET", url, token=token, timeout=2)
            if status == 200:
                revoked_accepted.append((round(time.time() - started, 1), url))
        time.sleep(0.5)


def watch_readiness(fault, services, seconds):
    """Polls readiness for `seconds`; records whether each service said 503 at least once."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        for name in services:
            status = call("GET", f"http://127.0.0.1:{SERVICES[name]}/readyz", timeout=2)[0]
            if status == 503:
                readiness_seen[(fault, name)] = True
            readiness_seen.setdefault((fault, name), False)
        if all(readiness_seen.get((fault, s)) for s in services):
            return
        time.sleep(0.25)


def kill9(pidfile):
    with open(pidfile) as f:
        pid = int(f.readline().strip())
    os.kill(pid, 9)
    return pid


def supervise():
    """What a supervisor does: start whatever is not running, then wait for every service to be ready."""
    subprocess.run([STACK, "start"], check=True, stdout=subprocess.DEVNULL)
    wait_until(lambda: all(ready(p) for p in SERVICES.values()), 120, "readiness of every service")


def main():
    run_start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 5))
    log("preparing writers")
    writers = []
    for i in range(WRITERS):
        user, token = signup("faults")
        status, group = call("POST", STORIES + "/v1/groups", {"name": f"fault run {i}"}, token)
        status2, media = call("POST", DISPATCH + "/v1/dispatch/media", raw=JPEG, token=token, content_type="image/jpeg")
        if status != 201 or status2 != 201:
            raise SystemExit(f"faults: setup failed (group {status}, photo {status2})")
        writers.append(threading.Thread(target=writer, args=(i, token, group["id"], media["id"]), daemon=True))
    # A relay reads the whole write-ahead log of the cluster from its slot's position: right after the test suite,
    # gigabytes of other databases' changes, which take the relays a while to pass, and every event waits until they
    # have, a revocation too. The logout is meant to travel through a relay that has caught up.
    caught_up = time.time()
    wait_for_slots("database IN ('auth', 'stories', 'chat', 'dispatch', 'curation', 'notify') AND slot_name LIKE '%\\_outbox'",
                   "the relays reading the present")
    log(f"the relays read the present in {time.time() - caught_up:.1f} s")
    _, revoked = signup("revoked")
    if call("POST", AUTH + "/v1/auth/logout", token=revoked)[0] != 204:
        raise SystemExit("faults: logout failed")
    time.sleep(1)
    watchers = [threading.Thread(target=revocation_watch, args=(revoked,), daemon=True)]
    for t in writers + watchers:
        t.start()
    time.sleep(5)

    log("kill -9 stories")
    kill9(os.path.join(STATE, "stories.pid"))
    time.sleep(2)
    supervise()
    time.sleep(5)

    log("kill -9 the PostgreSQL postmaster")
    kill9(os.path.join(STATE, "pg", "postmaster.pid"))
    watch_readiness("postgres", ["auth", "stories", "dispatch"], 15)
    time.sleep(1)
    supervise()
    time.sleep(5)

    log("kill -9 the broker (Tansu forgets every topic and offset)")
    kill9(os.path.join(STATE, "tansu.pid"))
    watch_readiness("broker", ["auth", "stories", "dispatch"], 15)
    time.sleep(1)
    supervise()
    for service in ("stories", "dispatch"):
        out = subprocess.run([os.path.join(BIN, service), "republish", "--since", run_start], capture_output=True, text=True,
                             env={**os.environ, "DATABASE_URL": f"{os.environ['DATABASE_SERVER']}/{service}"})
        if out.returncode != 0:
            raise SystemExit(f"faults: {service} republish failed: {out.stderr}")
    phase[0] = 1
    time.sleep(5)

    log("pause the broker for 20 s while the writes go on: the outboxes' backlog grows in the write-ahead log")
    with open(os.path.join(STATE, "tansu.pid")) as f:
        broker = int(f.readline().strip())
    published = lambda: sum(float(line.split()[-1]) for line in urllib.request.urlopen(STORIES + "/metrics", timeout=5).read().decode().splitlines()
                            if line.startswith("outbox_published_events_total"))
    before = published()
    os.kill(broker, 19)  # SIGSTOP
    paused = time.time()
    watch_readiness("broker pause", ["auth", "stories", "dispatch"], 20)
    time.sleep(max(0.0, 20 - (time.time() - paused)))
    backlog = psql("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint FROM pg_replication_slots "
                   "WHERE database = 'stories' AND slot_name LIKE '%\\_outbox'")
    os.kill(broker, 18)  # SIGCONT
    deadline = time.time() + 60
    while (at_kill := published()) == before and time.time() < deadline:
        time.sleep(0.01)
    kill9(os.path.join(STATE, "stories.pid"))
    log(f"kill -9 stories as its relay drains a backlog of {int(backlog[0]) // 1024 if backlog else '?'} kB of WAL "
        f"({int(at_kill - before)} events published when killed)")
    supervise()
    time.sleep(5)

    stop.set()
    for t in writers + watchers:
        t.join(timeout=10)
    log(f"writers stopped: {len(acked['story.created'])} stories, {len(acked['parcel.created'])} parcels acknowledged")

    log("waiting for the outboxes to drain: their slots confirmed past every write")
    wait_for_slots("database IN ('stories', 'dispatch') AND slot_name LIKE '%\\_outbox'", "outbox drain")

    failures = []
    stored = {"story.created": set(psql(f"SELECT id FROM stories.stories WHERE created_at >= '{run_start}'", "stories")),
              "parcel.created": set(psql(f"SELECT id FROM dispatch.parcels WHERE created_at >= '{run_start}'", "dispatch"))}
    for kind, ids in acked.items():
        missing = ids - stored[kind]
        if missing:
            failures.append(f"{len(missing)} acknowledged {kind} writes are not in the database, e.g. {sorted(missing)[:3]}")

    log("reading story.created and parcel.created from the beginning")
    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BROKERS"], "group.id": "faults-" + uuid.uuid4().hex,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    partitions = []
    for topic in acked:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        partitions += [TopicPartition(topic, p, 0) for p in metadata.partitions]
    metadata = consumer.list_topics("story.commented", timeout=10).topics["story.commented"]
    partitions += [TopicPartition("story.commented", p, 0) for p in metadata.partitions]
    consumer.assign(partitions)
    events = {kind: {} for kind in acked}  # subject -> set of event ids
    comments = {}  # story -> comment ids, first sightings in the order read
    last = time.time()
    while time.time() - last < 10:
        message = consumer.poll(0.5)
        if message is None or message.error():
            continue
        last = time.time()
        event = json.loads(message.value())
        if message.topic() == "story.commented":
            seen = comments.setdefault(event["subject"], [])
            if event["data"]["commentId"] not in seen:
                seen.append(event["data"]["commentId"])
            continue
        events[message.topic()].setdefault(event["subject"], set()).add(event["id"])
    consumer.close()

    ordered = [t for (w, p), t in threads.items() if p == 1]
    checked = sum(len(written) for _, written in ordered)
    for story, written in ordered:
        read = [c for c in comments.get(story, []) if c in set(written)]
        if read != written:
            failures.append(f"story {story}: {len(written)} comments written, {len(read)} read, "
                            f"{'out of order' if sorted(read) == sorted(written) else 'some missing'}")

    for kind, ids in acked.items():
        seen = events[kind]
        none = [i for i in ids if i not in seen]
        several = [i for i in ids if len(seen.get(i, ())) > 1]
        if none:
            failures.append(f"{len(none)} acknowledged {kind} writes have no event, e.g. {none[:3]}")
        if several:
            failures.append(f"{len(several)} {kind} writes have more than one event id, e.g. {several[:3]}")
        database, table = ("stories", "stories.stories") if kind == "story.created" else ("dispatch", "dispatch.parcels")
        recent = [s for s in seen if s not in stored[kind]]
        if recent:
            known = set(psql(f"SELECT id FROM {table} WHERE id IN ({','.join(repr(s) for s in recent)})", database))
            orphans = [s for s in recent if s not in known]
            if orphans:
                failures.append(f"{len(orphans)} {kind} events lack their row, e.g. {orphans[:3]}")
    for (fault, service), saw in sorted(readiness_seen.items()):
        if not saw:
            failures.append(f"{service} never said 503 on /readyz while {fault} was down")
    if revoked_accepted:
        failures.append(f"a logged-out token was accepted {len(revoked_accepted)} times, first {revoked_accepted[0]}")

    # Leave no stranded parcels behind (they would slow the dispatch path for whoever uses the stack next).
    for parcel, token in senders.items():
        call("POST", f"{DISPATCH}/v1/parcels/{parcel}/cancel", token=token)

    took = time.time() - started
    print(f"faults: {took:.0f} s; acknowledged {len(acked['story.created'])} stories and {len(acked['parcel.created'])} parcels; "
          f"in the database {len(stored['story.created'] & acked['story.created'])} and {len(stored['parcel.created'] & acked['parcel.created'])}; "
          f"with exactly one event id {sum(len(events['story.created'].get(i, ())) == 1 for i in acked['story.created'])} and "
          f"{sum(len(events['parcel.created'].get(i, ())) == 1 for i in acked['parcel.created'])}; "
          f"{checked} comments on {len(ordered)} stories since the broker's restart read in the order written; "
          f"readiness said 503 in {sum(readiness_seen.values())} of {len(readiness_seen)} service outages; "
          f"logged-out token accepted {len(revoked_accepted)} times; {len(failures)} failures")
    for failure in failures:
        print("FAIL: " + failure)
    sys.exit(1 if failures else 0)


main()
