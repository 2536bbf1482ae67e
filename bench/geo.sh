#!/usr/bin/env bash
# The nearest-available-courier query on dispatch's in-memory index, beside Redis GEOSEARCH and PostGIS KNN
# (ORDER BY geog <-> point LIMIT k, GiST index) on the same points, in the same run, with the same threads.
# Prints queries/s (median of RUNS runs) and the index's ratio to each.
#   bench/geo.sh              COURIERS="10000 100000" SECONDS_PER_RUN=3 RUNS=3 THREADS=2 FIX_COURIERS=100000 FIX_SECONDS=15
# Then location fixes: dispatch's operator batches beside Redis GEOADD of the same size, interleaved round by round.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
COURIERS="${COURIERS:-10000 100000}"; SECONDS_PER_RUN="${SECONDS_PER_RUN:-3}"; RUNS="${RUNS:-3}"; THREADS="${THREADS:-2}"
STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
REDIS_PORT="${REDIS_PORT:-6390}"

"$ROOT/deploy/local/stack" up >&2   # PostgreSQL (and the rest) as the stack runs it
PG_PORT="$(cat "$STATE/pg.port" 2>/dev/null || echo 5432)"
PG_MAJOR="$(psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d dispatch -qtAc 'SHOW server_version_num' | cut -c1-2)"
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
dpkg-query -W -f='${Status}' "postgresql-$PG_MAJOR-postgis-3" 2>/dev/null | grep -q "install ok installed" || missing+=("postgresql-$PG_MAJOR-postgis-3")
if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing ${missing[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

echo "==> starting Redis on :$REDIS_PORT (no persistence)" >&2
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --pidfile "$STATE/bench-redis.pid" --logfile "$STATE/logs/bench-redis.log" >/dev/null
trap 'kill "$(cat "$STATE/bench-redis.pid")" 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

(cd "$ROOT" && swift build -c release --product geo-bench >&2)
bin="$(cd "$ROOT" && swift build -c release --show-bin-path)"
for n in $COURIERS; do
    "$bin/geo-bench" --couriers "$n" --seconds "$SECONDS_PER_RUN" --runs "$RUNS" --threads "$THREADS" \
        --redis-port "$REDIS_PORT" --database-url "postgres://postgres@127.0.0.1:$PG_PORT/dispatch"
done

# Location fixes: dispatch's operator batches (1,000 fixes a request, dispatch-load as fast as it can send) beside
# Redis GEOADD of 1,000 members a command, interleaved round by round, FIX_SECONDS each.
FIX_COURIERS="${FIX_COURIERS:-100000}"; FIX_SECONDS="${FIX_SECONDS:-15}"
work="$(mktemp -d)"; trap 'kill "$(cat "$STATE/bench-redis.pid")" 2>/dev/null || true; rm -rf "$work"' EXIT
source "$ROOT/bench/lib.sh"
for r in $(seq 1 "$RUNS"); do
    "$ROOT/deploy/local/stack" load --couriers "$FIX_COURIERS" --fix-rate 1000000 --parcel-rate 1 \
        --duration "$FIX_SECONDS" --quiet --out "$work/fixes" >"$work/fixes.txt" 2>&1 \
        || { cat "$work/fixes.txt" >&2; echo "dispatch-load failed" >&2; exit 1; }
    python3 -c "import json; print(round(json.load(open('$work/fixes.json'))['fixesPerSecond']))" >>"$work/ours"
    "$bin/geo-bench" --geoadd --couriers "$FIX_COURIERS" --seconds "$FIX_SECONDS" --threads 4 --redis-port "$REDIS_PORT" >>"$work/redis"
    echo "  fixes round $r: dispatch $(tail -1 "$work/ours")/s, Redis GEOADD $(tail -1 "$work/redis")/s" >&2
done
ours="$(col ours 1)"; redis="$(col redis 1)"
echo
echo "Location fixes of $FIX_COURIERS couriers, 1,000 a request or command, 4 client threads, median of $RUNS × $FIX_SECONDS s"
printf '%-44s %10.0f %8s\n' "dispatch POST /v1/operator/locations" "$ours" "$(ratio "$ours" "$redis")"
printf '%-44s %10.0f %8s\n' "Redis GEOADD" "$redis" "1.00"
