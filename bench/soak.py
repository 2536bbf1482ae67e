"""The apps' mix for a stated time against the running local stack (bench/soak.sh starts it), a line a minute.

Each minute: each service's resident memory, its p99 and its 5xx answers in that minute (from the service's own
/metrics: the request histogram's buckets and counts, differences between two scrapes, so every client counts,
dispatch-load's too), what the mix's own clients saw fail, and the broker's and PostgreSQL's memory. At the end, what
grew from the second minute to the last, named.

The mix (each at a fixed rate, on threads of its own, beside dispatch-load which soak.sh runs for parcels, couriers and
fixes): Tapestry members post stories to their group and comment on each other's (stories; notify hears of both), read
the group's stories and the newsletter; a team chats in a room and reads its latest page (chat); a YouStudy user
browses a topic's videos and recommendations (curation).

    python3 bench/soak.py STATE MINUTES STORIES_PER_S CHAT_PER_S READS_PER_S
"""
import http.client
import json
import os
import re
import sys
import threading
import time

STATE, MINUTES = sys.argv[1], int(sys.argv[2])
STORY_RATE, CHAT_RATE, READ_RATE = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
PORTS = {"auth": 8081, "stories": 8082, "chat": 8083, "dispatch": 8084, "curation": 8085, "notify": 8086}
BUCKET = re.compile(r'^http_server_request_duration_seconds_bucket\{(.*),le="([^"]+)"\} (\d+)$')
STATUS = re.compile(r'status="(\d+)"')
ROUTE = re.compile(r'route="([^"]*)"')
QUIET = {"/healthz", "/readyz", "/metrics"}


def call(port, method, path, body=None, token=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = "Bearer " + str(token)
    c.request(method, path, json.dumps(body) if body is not None else None, headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, (json.loads(data) if data[:1] in (b"{", b"[") else None)


class Member:
    """A person of the mix, signed in again before their access token expires (auth's last 15 minutes)."""

    def __init__(self, name):
        self.name = name
        status, r = call(PORTS["auth"], "POST", "/v1/auth/signup", {
            "username": name, "email": name + "@example.com", "password": "soak test password", "fullName": name.title()})
        assert status == 201, (status, r)
        self.token, self.since = r["accessToken"], time.monotonic()
        self.lock = threading.Lock()

    def __str__(self):
        with self.lock:
            if time.monotonic() - self.since > 300:
                status, r = call(PORTS["auth"], "POST", "/v1/auth/login", {"username": self.name, "password": "soak test password"})
                if status == 200:
                    self.token, self.since = r["accessToken"], time.monotonic()
            return self.token


class Clients:
    """The mix's own count of requests and failures (anything but 2xx, or no answer), per minute."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sent = self.failed = 0

    def take(self):
        with self.lock:
            sent, failed, self.sent, self.failed = self.sent, self.failed, 0, 0
            return sent, failed

    def count(self, ok):
        with self.lock:
            self.sent += 1
            self.failed += 0 if ok else 1


clients = Clients()
stop = threading.Event()


def every(rate, action):
    """Runs `action` `rate` times a second on a schedule (not faster when it catches up) until the soak ends."""
    def loop():
        i, start = 0, time.monotonic()
        while not stop.is_set():
            i += 1
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                stop.wait(delay)
            try:
                ok = action(i)
            except Exception:
                ok = False
            clients.count(ok)
    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


def setup():
    run = str(int(time.time()))
    members = [Member(f"soak{run}m{i}") for i in range(4)]
    _, group = call(PORTS["stories"], "POST", "/v1/groups", {"name": "Soak family"}, members[0])
    for t in members[1:]:
        call(PORTS["stories"], "POST", "/v1/groups/join", {"inviteCode": group["inviteCode"]}, t)
    _, room = call(PORTS["chat"], "POST", "/v1/rooms", {"name": "Soak team"}, members[0])
    for t in members[1:]:
        call(PORTS["chat"], "POST", "/v1/rooms/join", {"inviteCode": room["inviteCode"]}, t)
    _, subjects = call(PORTS["curation"], "GET", "/v1/subjects", token=members[0])
    catalogue = []  # (topic, one of its videos)
    for s in (subjects or {}).get("items", [])[:3]:
        _, t = call(PORTS["curation"], "GET", f"/v1/subjects/{s['id']}/topics", token=members[0])
        for topic in [x["id"] for x in (t or {}).get("items", [])[:2]]:
            _, v = call(PORTS["curation"], "GET", f"/v1/topics/{topic}/videos", token=members[0])
            catalogue += [(topic, x["id"]) for x in (v or {}).get("items", [])[:1]]
    return members, group["id"], room["id"], catalogue


def mix(members, group, room, catalogue):
    stories = []

    def post_story(i):
        status, s = call(PORTS["stories"], "POST", "/v1/stories",
                         {"text": f"Soak story {i}", "groupIds": [group]}, members[i % len(members)])
        if status == 201:
            stories.append(s["id"])
            del stories[:-50]
        return status == 201

    def comment(i):
        if not stories:
            return True
        status, _ = call(PORTS["stories"], "POST", f"/v1/stories/{stories[-1]}/comments",
                         {"text": f"Soak comment {i}"}, members[(i + 1) % len(members)])
        return status == 201

    def chat(i):
        status, _ = call(PORTS["chat"], "POST", f"/v1/rooms/{room}/messages", {"text": f"Soak message {i}"},
                         members[i % len(members)])
        return status == 201

    def read(i):
        token = members[i % len(members)]
        path = [(PORTS["chat"], f"/v1/rooms/{room}/messages"), (PORTS["stories"], f"/v1/groups/{group}/stories"),
                (PORTS["stories"], f"/v1/groups/{group}/newsletter")]
        if catalogue:
            topic, video = catalogue[i % len(catalogue)]
            path += [(PORTS["curation"], f"/v1/topics/{topic}/videos"), (PORTS["curation"], f"/v1/videos/{video}/recommendations")]
        port, p = path[i % len(path)]
        status, _ = call(port, "GET", p, token=token)
        return status == 200

    every(STORY_RATE, post_story)
    every(STORY_RATE / 2, comment)
    every(CHAT_RATE, chat)
    every(READ_RATE, read)


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmRSS"))
    except (OSError, StopIteration):
        return 0


def pid(name):
    try:
        with open(os.path.join(STATE, name + ".pid")) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError):
        return 0


def postgres_mb():
    """The stack's PostgreSQL's private memory: its postmaster's and children's resident pages less the shared ones."""
    postmaster = pid(os.path.join("pg", "postmaster"))
    total = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            if int(p) != postmaster and int(fields["PPid"]) != postmaster:
                continue
            total += (int(fields["VmRSS"].split()[0]) - int(fields.get("RssShmem", "0 kB").split()[0])) // 1024
        except (OSError, KeyError, ValueError):
            continue
    return total


def scrape(service):
    """The request histogram summed over routes (but health and metrics): bucket bound → count; and the 5xx count."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", PORTS[service], timeout=10)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
    except OSError:
        return None
    buckets, errors = {}, 0
    for line in text.splitlines():
        m = BUCKET.match(line)
        if not m or ROUTE.search(m.group(1)) and ROUTE.search(m.group(1)).group(1) in QUIET:
            continue
        bound = float("inf") if m.group(2) == "+Inf" else float(m.group(2))
        buckets[bound] = buckets.get(bound, 0) + int(m.group(3))
        status = STATUS.search(m.group(1))
        if bound == float("inf") and status and status.group(1).startswith("5"):
            errors += int(m.group(3))
    return buckets, errors


def p99_ms(before, after):
    """The p99 of the requests between two scrapes, as the upper bound of the bucket it falls in ('>10000' past the last)."""
    delta = {b: after[b] - before.get(b, 0) for b in after}
    total = delta.get(float("inf"), 0)
    if total == 0:
        return "-"
    for bound in sorted(delta):
        if delta[bound] >= 0.99 * total:
            return ">10000" if bound == float("inf") else f"{bound * 1000:g}"
    return "-"


def main():
    members, group, room, catalogue = setup()
    mix(members, group, room, catalogue)
    services = list(PORTS)
    print("minute  " + "  ".join(f"{s + ' MB/p99 ms/5xx':>26}" for s in services) + "   broker MB  postgres MB  mix sent/failed")
    last = {s: scrape(s) for s in services}
    memory = []
    for minute in range(1, MINUTES + 1):
        time.sleep(60)
        now = {s: scrape(s) for s in services}
        row, mem = [], {}
        for s in services:
            mem[s] = rss_mb(pid(s))
            if now[s] and last[s]:
                row.append(f"{mem[s]:>8} {p99_ms(last[s][0], now[s][0]):>9} {now[s][1] - last[s][1]:>7}")
            else:
                row.append(f"{mem[s]:>8} {'down':>9} {'-':>7}")
        mem["broker"], mem["postgres"] = rss_mb(pid("tansu")), postgres_mb()
        sent, failed = clients.take()
        print(f"{minute:>6}  " + "  ".join(f"{r:>26}" for r in row) + f"   {mem['broker']:>9}  {mem['postgres']:>11}  {sent:>7}/{failed}",
              flush=True)
        memory.append(mem)
        last = now
    stop.set()
    if len(memory) >= 3:
        first, end = memory[1], memory[-1]
        grew = [f"{k} {first[k]} → {end[k]} MB" for k in first if end[k] - first[k] > max(5, first[k] * 0.1)]
        print("grew from minute 2 to the last: " + (", ".join(grew) if grew else "nothing (within 10% or 5 MB)"))


main()
