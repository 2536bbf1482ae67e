#!/usr/bin/env bash
# Dispatch latency (parcel created → offered to a courier) on the local stack, with parcels no courier can reach
# waiting in the table, as a district with nobody online leaves them:
#   bench/dispatch.sh            STRANDED=1000 COURIERS=100000 FIXES=2000 DURATION=30 RATES="10 50 300" LARGE=0
# Each run starts on an empty database (what earlier runs wrote made later ones slower: a day of runs, 1.9 GB, cost
# the 300/s phase a third of its parcels), unless LARGE=1000000, which first fills the database (once; kept for
# later runs) with that many offline couriers, who have not moved for a day, and as many received parcels: the
# service must stay fast on a table that holds a city's history.
# Per rate: dispatch-load (`deploy/local/stack load`) seeds the couriers, sends their fixes, creates parcels at the
# rate and accepts every offer; this prints the created → offered p50/p99, the parcels created and assigned per
# second, and the CPU seconds dispatch and PostgreSQL used per parcel (from /proc). No reference runs beside it: the
# goal is absolute (p50 < 10 ms and p99 < 50 ms at 10 and 50 parcels/s; 300/s sustained).
# INSTANCES=3 runs two more dispatch instances beside the stack's (its settings, ports 8184 and 8284), spreads the
# load's clients over the three (a client whose instance stops answering moves to the next), and kill -9s the one
# on 8184 KILL_AT seconds (default half of DURATION) into the last rate's run; it prints how the parcels created
# around the kill were offered (the invariants must hold, as in every run).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STACK="$ROOT/deploy/local/stack"
STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
STRANDED="${STRANDED:-1000}" COURIERS="${COURIERS:-100000}" FIXES="${FIXES:-2000}" DURATION="${DURATION:-30}"
RATES="${RATES:-10 50 300}" LARGE="${LARGE:-0}" INSTANCES="${INSTANCES:-1}" KILL_AT="${KILL_AT:-$((DURATION / 2))}"
work="$(mktemp -d)"
extra=()  # the pids of the extra instances
trap 'for p in "${extra[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

# The services of this build, started afresh, on an empty database unless LARGE keeps its tables.
if [ "$LARGE" -gt 0 ]; then "$STACK" down >/dev/null 2>&1; else "$STACK" down --wipe >/dev/null 2>&1; fi
"$STACK" up >/dev/null
PG_PORT="$(cat "$STATE/pg.port")"
PG="postgres://postgres@127.0.0.1:$PG_PORT/dispatch"
SENDER=00000000-0000-7000-8000-00000000beef  # the stranded parcels' sender, to remove them afterwards
HISTORY=00000000-0000-7000-8000-00000000cafe  # the sender of LARGE's received parcels
have="$(psql "$PG" -qtAc "SELECT count(*) FROM dispatch.parcels WHERE sender_id = '$HISTORY'")"
if [ "$LARGE" -gt "$have" ]; then
    echo "==> adding $((LARGE - have)) offline couriers and received parcels (kept for later runs)" >&2
    t0=$(date +%s)
    psql "$PG" -qc "
        WITH c AS (
            INSERT INTO dispatch.couriers (user_id, vehicle, capacity, online, created_at, updated_at)
            SELECT gen_random_uuid(), 'bike', 3, false, now() - interval '30 days', now() - interval '1 day'
            FROM generate_series(1, $((LARGE - have))) RETURNING user_id)
        INSERT INTO dispatch.courier_positions (user_id, lat, lon, fix_at)
        SELECT user_id, 44.4 + random() * 0.2, 26.0 + random() * 0.2, now() - interval '1 day' FROM c;
        INSERT INTO dispatch.parcels (id, sender_id, recipient_name, pickup_lat, pickup_lon, pickup_address, dropoff_lat,
            dropoff_lon, dropoff_address, service, payment_method, insured, document_photo_media_id, amount_minor, currency,
            eta_seconds, distance_m, status, courier_id, created_at, updated_at, delivery_pin)
        SELECT gen_random_uuid(), '$HISTORY', 'R', 44.4, 26.0, 'then', 44.5, 26.1, 'there', 'standard', 'card', false,
            gen_random_uuid(), 500, 'RON', 600, 1000, 'received', gen_random_uuid(), now() - (i % 720 || ' hours')::interval,
            now() - (i % 720 || ' hours')::interval, '0000'
        FROM generate_series(1, $((LARGE - have))) i;
        ANALYZE dispatch.couriers; ANALYZE dispatch.courier_positions; ANALYZE dispatch.parcels;"
    echo "    in $(($(date +%s) - t0)) s" >&2
    "$STACK" down >/dev/null 2>&1; "$STACK" up >/dev/null  # the service starts on the large tables, as after a deploy
fi
psql "$PG" -qc "DELETE FROM dispatch.parcels WHERE sender_id = '$SENDER'"
psql "$PG" -qc "
    INSERT INTO dispatch.parcels (id, sender_id, recipient_name, pickup_lat, pickup_lon, pickup_address, dropoff_lat,
        dropoff_lon, dropoff_address, service, payment_method, insured, document_photo_media_id, amount_minor, currency,
        eta_seconds, distance_m, status, created_at, delivery_pin)
    SELECT gen_random_uuid(), '$SENDER', 'R', 10 + i * 0.001, 10, 'nowhere', 10.1, 10.1, 'nowhere', 'standard', 'card',
        false, gen_random_uuid(), 500, 'RON', 600, 1000, 'awaiting_courier', now() - interval '1 hour', '0000'
    FROM generate_series(1, $STRANDED) i"
echo "dispatch, $(date -u +%F), $STRANDED stranded parcels, $COURIERS couriers, $FIXES fixes/s, $DURATION s a rate;" \
    "in the tables: $(psql "$PG" -qtAc "SELECT count(*) FROM dispatch.couriers") couriers, $(psql "$PG" -qtAc "SELECT count(*) FROM dispatch.parcels") parcels;" \
    "dispatch RSS at start $(awk '/VmRSS/ {printf "%d MB", $2 / 1024}' "/proc/$(cat "$STATE/dispatch.pid")/status")"

source "$ROOT/bench/lib.sh"  # pid_of, cpu_of, pg_cpu (CPU ticks from /proc), service_settings

# More instances: the stack's dispatch's own environment and binary, another port.
urls="http://127.0.0.1:8084"
last_rate="$(echo $RATES | awk '{print $NF}')"
for i in $(seq 2 "$INSTANCES"); do
    port=$((8084 + (i - 1) * 100))
    service_settings dispatch PORT="$port"
    env -i "${settings[@]}" "$(readlink -f "/proc/$(pid_of dispatch)/exe")" >>"$STATE/logs/dispatch-$port.log" 2>&1 &
    extra+=("$!")
    disown
    urls="$urls,http://127.0.0.1:$port"
    for _ in $(seq 1 150); do curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
    curl -fs "http://127.0.0.1:$port/readyz" >/dev/null || { echo "the dispatch instance on $port did not become ready" >&2; exit 1; }
done
[ "$INSTANCES" -gt 1 ] && echo "$INSTANCES dispatch instances ($urls); the one on 8184 is killed $KILL_AT s into the $last_rate/s run"

printf '%-8s %12s %12s %12s %12s %14s %14s\n' "rate/s" "offered p50" "offered p99" "created/s" "assigned/s" "dispatch CPU" "postgres CPU"
for rate in $RATES; do
    # From the drive's first progress line (after the sign-ups and the couriers' seeding): the CPU counted from there
    # to its end, and with more instances, in the last rate's run, the kill KILL_AT seconds later.
    kill_after=""
    if [ "$INSTANCES" -gt 1 ] && [ "$rate" = "$last_rate" ]; then kill_after="$KILL_AT"; fi
    rm -f "$work/cpu$rate"
    ( until grep -q '^\[ *0s\]' "$work/r$rate.txt" 2>/dev/null; do sleep 0.05; done
      echo "$(cpu_of "$(pid_of dispatch)") $(pg_cpu)" >"$work/cpu$rate"
      if [ -n "$kill_after" ]; then sleep "$kill_after"; kill -9 "${extra[0]}"; fi ) &
    started=$!
    "$STACK" load --dispatch "$urls" --couriers "$COURIERS" --fix-rate "$FIXES" --parcel-rate "$rate" --duration "$DURATION" \
        --out "$work/r$rate" >"$work/r$rate.txt" 2>&1 || { cat "$work/r$rate.txt" >&2; echo "dispatch-load failed at $rate/s" >&2; }
    [ -z "$kill_after" ] || wait "$started"
    d1=$(cpu_of "$(pid_of dispatch)") p1=$(pg_cpu)
    kill "$started" 2>/dev/null || true; wait "$started" 2>/dev/null || true
    read -r d0 p0 <"$work/cpu$rate" 2>/dev/null || { d0=$d1; p0=$p1; }
    python3 - "$work/r$rate.json" "$rate" "$(( (d1 - d0) * 1000 / tick ))" "$(( (p1 - p0) * 1000 / tick ))" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
d, rate = r["dispatchOfferedMs"], sys.argv[2]
n = max(r["parcelsCreated"], 1)
dcpu, pcpu = int(sys.argv[3]) / n, int(sys.argv[4]) / n  # CPU ms in all, per parcel
print(f"{rate:<8} {d['p50']:9.1f} ms {d['p99']:9.1f} ms {r['parcelsPerSecond']:12.1f} {r['assignedPerSecond']:12.1f}"
      f" {dcpu:8.1f} ms/pc {pcpu:8.1f} ms/pc")
bad = [i["name"] for i in r["invariants"] if not i["ok"]]
if bad:
    print("  invariants failed: " + ", ".join(bad))
EOF
done
if [ "$INSTANCES" -gt 1 ]; then
    python3 - "$work/r$last_rate.json" "$KILL_AT" <<'EOF'
import json, sys
r, at = json.load(open(sys.argv[1])), int(sys.argv[2])
def worst(first, last):
    p = [s["latencyMs"]["offered"]["p99"] for s in r["series"] if first <= s["t"] < last and "offered" in s["latencyMs"]]
    return f"{max(p):.0f} ms" if p else "none"
errors = ", ".join(f"{n}x {k}" for k, n in r["errors"].items()) or "none"
print(f"kill -9 of one of {len(r['settings']['dispatch'].split(','))} instances {at} s into the drive; created -> offered p99 per second,"
      f" worst: before {worst(0, at)}, in the 5 s from the kill {worst(at, at + 5)}, after {worst(at + 5, 10**6)};"
      f" failed requests: {errors}; invariants: {'all held' if all(i['ok'] for i in r['invariants']) else 'FAILED'}")
EOF
fi
psql "$PG" -qc "DELETE FROM dispatch.parcels WHERE sender_id = '$SENDER'"
echo "(CPU per parcel: the drive's, the fixes sent meanwhile included (${FIXES}/s), the seeding not); dispatch RSS at the end $(awk '/VmRSS/ {printf "%d MB", $2 / 1024}' "/proc/$(cat "$STATE/dispatch.pid")/status")"
