#!/usr/bin/env bash
# Resident memory of every service fresh, right after a burst of SIGNUPS sign-ups (CONNECTIONS at a time: Argon2id,
# 19 MiB each; a 503 retried after its Retry-After) and 10 s later; sign-ups a second and the p99 of GET /healthz on
# auth during the burst.
#   bench/memory.sh              SIGNUPS=400 CONNECTIONS=32
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SIGNUPS="${SIGNUPS:-400}"; CONNECTIONS="${CONNECTIONS:-32}"
"$ROOT/deploy/local/stack" down >&2
"$ROOT/deploy/local/stack" up >&2
STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
SERVICES=(auth stories chat dispatch curation)
rss() { for s in "${SERVICES[@]}"; do awk '/VmRSS/ {printf "%d ", $2 / 1024}' "/proc/$(cat "$STATE/$s.pid")/status"; done; }
fresh="$(rss)"
burst="$(python3 - "$SIGNUPS" "$CONNECTIONS" <<'PY'
import http.client, json, sys, threading, time
n, conns = int(sys.argv[1]), int(sys.argv[2])
run = str(int(time.time()))
statuses, health, done = {}, [], threading.Event()
def signup(w):
    c = http.client.HTTPConnection("127.0.0.1", 8081)
    for i in range(w, n, conns):
        u = f"mem{run}_{i}"
        while True:  # as a client app: a 503 is retried after its Retry-After
            c.request("POST", "/v1/auth/signup", json.dumps({"username": u, "email": f"{u}@example.com",
                      "password": "memory benchmark password", "fullName": "Memory Bench"}), {"Content-Type": "application/json"})
            r = c.getresponse(); r.read()
            statuses[r.status] = statuses.get(r.status, 0) + 1
            if r.status != 503:
                break
            time.sleep(float(r.getheader("Retry-After", "1")))
def probe():
    c = http.client.HTTPConnection("127.0.0.1", 8081)
    while not done.is_set():
        t = time.monotonic(); c.request("GET", "/healthz"); c.getresponse().read(); health.append(time.monotonic() - t)
        time.sleep(0.01)
p = threading.Thread(target=probe); p.start()
t0 = time.monotonic()
ts = [threading.Thread(target=signup, args=(w,)) for w in range(conns)]
[t.start() for t in ts]; [t.join() for t in ts]
elapsed = time.monotonic() - t0
done.set(); p.join()
health.sort()
print(f"{statuses.get(201, 0) / elapsed:.0f} {health[int(len(health) * 0.99)] * 1000:.1f} {json.dumps(statuses, separators=(',', ':'))}")
PY
)"
after="$(rss)"
sleep 10
idle="$(rss)"
read -r rate hp99 statuses <<<"$burst"
echo
echo "memory, $(date -u +%Y-%m-%d), $(nproc) cores: $SIGNUPS sign-ups, $CONNECTIONS at a time: $rate created a second, answers $statuses (503: retried); auth /healthz p99 during the burst $hp99 ms"
printf '%-10s %10s %14s %14s\n' service "fresh MB" "after burst MB" "10 s later MB"
read -ra f <<<"$fresh"; read -ra a <<<"$after"; read -ra i <<<"$idle"
for k in "${!SERVICES[@]}"; do printf '%-10s %10s %14s %14s\n' "${SERVICES[$k]}" "${f[$k]}" "${a[$k]}" "${i[$k]}"; done
