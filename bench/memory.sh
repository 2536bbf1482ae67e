#!/usr/bin/env bash
# Resident memory of every service fresh, right after a burst of SIGNUPS sign-ups (CONNECTIONS at a time: Argon2id,
# 19 MiB each; a 503 retried after its Retry-After) and 10 s later; sign-ups a second, and GET /healthz on auth
# during the first 8 s of the burst (curl every 50 ms, its own timing): what the other routes see meanwhile.
#   bench/memory.sh              SIGNUPS=400 CONNECTIONS=32
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SIGNUPS="${SIGNUPS:-400}"; CONNECTIONS="${CONNECTIONS:-32}"
STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
"$ROOT/deploy/local/stack" down >&2
seen="$(cat "$STATE/logs/curation.log" 2>/dev/null | wc -l)"
"$ROOT/deploy/local/stack" up >&2
# Curation measured with its recommendation index of the demo catalogue, which `up` imports into an empty database
# after curation started (its next refresh builds the index, within 30 s).
for _ in $(seq 1 120); do
    tail -n +"$((seen + 1))" "$STATE/logs/curation.log" | grep -q '"recommendation index built","videos":[1-9]' && break
    sleep 0.5
done
SERVICES=(auth stories chat dispatch curation notify)
rss() { for s in "${SERVICES[@]}"; do awk '/VmRSS/ {printf "%d ", $2 / 1024}' "/proc/$(cat "$STATE/$s.pid")/status"; done; }
fresh="$(rss)"
( end=$(($(date +%s) + 8)); while [ "$(date +%s)" -lt "$end" ]; do
    curl -s -o /dev/null -w '%{time_total}\n' http://127.0.0.1:8081/healthz; sleep 0.05
  done >"$STATE/memory-health.txt" ) &
probe=$!
burst="$(python3 - "$SIGNUPS" "$CONNECTIONS" <<'PY'
import http.client, json, sys, threading, time
n, conns = int(sys.argv[1]), int(sys.argv[2])
run = str(int(time.time()))
statuses = {}
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
t0 = time.monotonic()
ts = [threading.Thread(target=signup, args=(w,)) for w in range(conns)]
[t.start() for t in ts]; [t.join() for t in ts]
elapsed = time.monotonic() - t0
print(f"{statuses.get(201, 0) / elapsed:.0f} {json.dumps(statuses, separators=(',', ':'))}")
PY
)"
after="$(rss)"
wait "$probe"
health="$(sort -g "$STATE/memory-health.txt" | awk '{a[NR]=$1} END {printf "p50 %.1f ms, max %.1f ms of %d", a[int(NR/2)+1]*1000, a[NR]*1000, NR}')"
sleep 10
idle="$(rss)"
read -r rate statuses <<<"$burst"
echo
echo "memory, $(date -u +%Y-%m-%d), $(nproc) cores: $SIGNUPS sign-ups, $CONNECTIONS at a time: $rate created a second, answers $statuses (503: retried); auth GET /healthz meanwhile: $health"
printf '%-10s %10s %14s %14s\n' service "fresh MB" "after burst MB" "10 s later MB"
read -ra f <<<"$fresh"; read -ra a <<<"$after"; read -ra i <<<"$idle"
for k in "${!SERVICES[@]}"; do printf '%-10s %10s %14s %14s\n' "${SERVICES[$k]}" "${f[$k]}" "${a[$k]}" "${i[$k]}"; done
