#!/usr/bin/env bash
# The nearest reception centres to a point (`GET /v1/centres`): dispatch's query (on a GiST index of their places)
# and the sort of the whole table it replaced, timed by pgbench beside a primary-key lookup of one centre on the same
# table, interleaved round by round, at each size. Prints queries/s and p99 (median of RUNS rounds) and each one's
# ratio to the lookup.
#   bench/centres.sh            CENTRES="100 1000 10000" RUNS=3 DURATION=5 CONNECTIONS=4
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
CENTRES="${CENTRES:-100 1000 10000}" RUNS="${RUNS:-3}" DURATION="${DURATION:-5}" CONNECTIONS="${CONNECTIONS:-4}"
work="$(mktemp -d)"
trap 'psql "$PG" -qc "DROP SCHEMA IF EXISTS bench_centres CASCADE" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$ROOT/deploy/local/stack" up >/dev/null
PG_PORT="$(cat "$STATE/pg.port")"
PG_DB=dispatch PG="postgres://postgres@127.0.0.1:$PG_PORT/dispatch"
source "$ROOT/bench/lib.sh"

# The query as Services/dispatch/Core/Storage/Storage.swift sends it (on its GiST index), and the sort of the
# whole table it replaced, around Bucharest.
cat >"$work/nearest.sql" <<'SQL'
\set lat random(444000, 445000)
\set lon random(260000, 261000)
WITH first AS (SELECT lat, lon FROM bench_centres.centres ORDER BY point(lon, lat) <-> point(:lon / 10000.0, :lat / 10000.0) LIMIT 10),
    bound AS (SELECT max(sqrt((lat - :lat / 10000.0) ^ 2 + ((lon - :lon / 10000.0) * cos(radians(:lat / 10000.0))) ^ 2))
                     / greatest(cos(radians(:lat / 10000.0)), 0.001) * 1.000001 + 1e-9 AS r FROM first)
SELECT c.* FROM bench_centres.centres c, bound WHERE point(c.lon, c.lat) <@ circle(point(:lon / 10000.0, :lat / 10000.0), bound.r)
ORDER BY (c.lat - :lat / 10000.0) ^ 2 + ((c.lon - :lon / 10000.0) * cos(radians(:lat / 10000.0))) ^ 2, c.id LIMIT 10;
SQL
cat >"$work/scan.sql" <<'SQL'
\set lat random(444000, 445000)
\set lon random(260000, 261000)
SELECT * FROM bench_centres.centres ORDER BY (lat - :lat / 10000.0) ^ 2 + ((lon - :lon / 10000.0) * cos(radians(:lat / 10000.0))) ^ 2, id LIMIT 10;
SQL
cat >"$work/lookup.sql" <<'SQL'
\set n random(1, 100)
SELECT * FROM bench_centres.centres WHERE id = (SELECT id FROM bench_centres.ids WHERE n = :n);
SQL

echo
echo "Nearest 10 centres (dispatch's query, and a sort of the table) beside a primary-key lookup, $CONNECTIONS connections, median of $RUNS × $DURATION s, $(date -u +%F)"
printf "%-34s %10s %9s %8s\n" "target" "per second" "p99 ms" "ratio"
for size in $CENTRES; do
    psql "$PG" -q >/dev/null 2>&1 <<SQL
DROP SCHEMA IF EXISTS bench_centres CASCADE;
CREATE SCHEMA bench_centres;
CREATE TABLE bench_centres.centres (LIKE dispatch.centres INCLUDING ALL);
INSERT INTO bench_centres.centres (id, name, address, lat, lon, time_zone, opening_hours, accepts_drop_offs, accepts_collections)
SELECT gen_random_uuid(), 'Centre ' || i, 'Strada ' || i, 44.3 + random() * 0.3, 25.9 + random() * 0.4, 'Europe/Bucharest',
    '[{"day":1,"opens":"08:00","closes":"20:00"}]', true, true FROM generate_series(1, $size) i;
CREATE TABLE bench_centres.ids AS SELECT row_number() OVER () AS n, id FROM bench_centres.centres;
CREATE UNIQUE INDEX ON bench_centres.ids (n);
ANALYZE bench_centres.centres; ANALYZE bench_centres.ids;
SQL
    : >"$work/nearest-$size"; : >"$work/scan-$size"; : >"$work/lookup-$size"
    for _ in $(seq 1 "$RUNS"); do
        pg_once "$work/nearest.sql" >>"$work/nearest-$size"
        pg_once "$work/scan.sql" >>"$work/scan-$size"
        sed -i "s/^\\\\set n random(1, .*)/\\\\set n random(1, $size)/" "$work/lookup.sql"
        pg_once "$work/lookup.sql" >>"$work/lookup-$size"
    done
    printf "%-34s %10.0f %9.2f %8s\n" "nearest 10 of $size centres" "$(col "nearest-$size" 1)" "$(col "nearest-$size" 2)" \
        "$(paired "nearest-$size" "lookup-$size")"
    printf "%-34s %10.0f %9.2f %8s\n" "  the table sorted instead" "$(col "scan-$size" 1)" "$(col "scan-$size" 2)" \
        "$(paired "scan-$size" "lookup-$size")"
    printf "%-34s %10.0f %9.2f %8s\n" "one centre by id, of $size" "$(col "lookup-$size" 1)" "$(col "lookup-$size" 2)" "1.00"
done
