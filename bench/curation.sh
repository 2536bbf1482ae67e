#!/usr/bin/env bash
# Curation benchmark: recommendations beside PostgreSQL full-text search over the same corpus with the same query
# words (ts_rank over the GIN index, within the same topic, top 10), interleaved round by round, same concurrency.
# Prints requests/s, p99, the ratio, and the index's build time and the service's memory.
#   bench/curation.sh                      the shipped catalogue (deploy/local/stack up imports it)
#   SYNTHETIC=1000000 bench/curation.sh    a synthetic catalogue of that many videos (2,000 topics), in a database of
#                                          its own, served by a curation instance of its own on :8095
#   DURATION=10 CONNECTIONS=16 RUNS=3
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DURATION="${DURATION:-10}"; CONNECTIONS="${CONNECTIONS:-16}"; RUNS="${RUNS:-3}"; SYNTHETIC="${SYNTHETIC:-0}"
command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
"$ROOT/deploy/local/stack" up >&2
STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
PG_PORT="$(cat "$STATE/pg.port" 2>/dev/null || echo 5432)"
work="$(mktemp -d)"; instance=""
trap '[ -n "$instance" ] && kill -TERM "$instance" 2>/dev/null; rm -rf "$work"' EXIT
DB=curation; API="http://127.0.0.1:8085"; PID="$(cat "$STATE/curation.pid")"
source "$ROOT/bench/lib.sh"  # service_settings, and what wrk_once and pg_once below are made of

if [ "$SYNTHETIC" -gt 0 ]; then
    DB=curation_bench; API="http://127.0.0.1:8095"
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" postgres
    bin="$(cd "$ROOT" && swift build -c release --show-bin-path)"
    export LD_LIBRARY_PATH="$ROOT/.local/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # The stack's curation's own settings (broker, keys) but this database, port and consumer groups.
    service_settings curation DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/$DB" PORT=8095 KAFKA_GROUP_PREFIX=bench-
    env -i "${settings[@]}" "$bin/curation" migrate >/dev/null
    echo "==> $SYNTHETIC synthetic videos in 2,000 topics, their words drawn from the shipped catalogue's" >&2
    python3 - "$ROOT/deploy/demo/curation/videos.jsonl" >"$work/words.txt" <<'PY'
import json, re, sys
words = set()
for line in open(sys.argv[1]):
    v = json.loads(line)
    words.update(w for w in re.split(r"[^a-z]+", (v["title"] + " " + v["description"]).lower()) if len(w) > 2)
print("\n".join(sorted(words)))
PY
    started=$(date +%s)
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$DB" -v ON_ERROR_STOP=1 -q <<SQL
INSERT INTO curation.subjects (id, name, position) VALUES ('00000000-0000-7000-8000-000000000001', 'Synthetic', 1);
INSERT INTO curation.topics (id, subject_id, name, position)
SELECT ('00000000-0000-7000-8001-' || lpad(to_hex(t), 12, '0'))::uuid, '00000000-0000-7000-8000-000000000001', 'Topic ' || t, t
FROM generate_series(1, 2000) t;
DROP INDEX curation.videos_search;
SQL
    # Rows made by Python and loaded with COPY: far faster than per-row SQL subqueries.
    python3 - "$work/words.txt" "$SYNTHETIC" >"$work/videos.tsv" <<'PY'
import random, sys, uuid
words = open(sys.argv[1]).read().split()
n = int(sys.argv[2]); rnd = random.Random(7)
out = sys.stdout
for g in range(1, n + 1):
    t = 1 + g % 2000
    title = " ".join(rnd.choices(words, k=5 + g % 4)); desc = " ".join(rnd.choices(words, k=12))
    out.write(f"{uuid.UUID(int=rnd.getrandbits(128), version=4)}\t{g:011d}\t00000000-0000-7000-8001-{t:012x}\t{g // 2000 + 1}\tPart {g % 20}\tSynthetic > Topic {t}\t{title}\t{desc}\t\tSynthetic\tf\t300\n")
PY
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$DB" -v ON_ERROR_STOP=1 -q <<SQL
\\copy curation.videos (id, youtube_id, topic_id, position, subtopic, path, title, description, parent_description, channel, partner_content, duration_seconds) FROM '$work/videos.tsv'
CREATE INDEX videos_search ON curation.videos USING gin (search);
ANALYZE;
SQL
    echo "==> generated in $(( $(date +%s) - started )) s; starting curation on :8095 to build its index" >&2
    started_ms=$(date +%s%3N)
    env -i "${settings[@]}" "$bin/curation" >"$work/curation.log" 2>&1 &
    instance=$!; PID=$instance
    for _ in $(seq 1 1800); do curl -fs "$API/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
    curl -fs "$API/readyz" >/dev/null || { tail -n 20 "$work/curation.log" >&2; exit 1; }
    build_s=$(awk -v a="$started_ms" -v b="$(date +%s%3N)" 'BEGIN {printf "%.1f", (b - a) / 1000}')
else
    build_s="-"
fi
PSQL=(psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$DB" -v ON_ERROR_STOP=1 -qtA)
videos="$("${PSQL[@]}" -c "SELECT count(*) FROM curation.videos")"
rss_mb=$(( $(awk '/VmRSS/ {print $2}' "/proc/$PID/status") / 1024 ))

# The same query words for PostgreSQL: each video's title words, any of them, within its topic.
"${PSQL[@]}" <<SQL
DROP TABLE IF EXISTS bench_queries;
CREATE TABLE bench_queries AS
SELECT row_number() OVER () AS i, id, topic_id,
       to_tsquery('english', array_to_string(array(SELECT w FROM regexp_split_to_table(lower(title), '[^a-z]+') w WHERE length(w) > 2), ' | ')) AS q
FROM (SELECT id, topic_id, title FROM curation.videos ORDER BY random() LIMIT 1000) v;
DELETE FROM bench_queries WHERE q::text = '';
SQL
n="$("${PSQL[@]}" -c "SELECT count(*) FROM bench_queries")"
"${PSQL[@]}" -c "SELECT id FROM bench_queries" >"$work/ids.txt"
{ echo "ids = {"; sed 's/.*/"&",/' "$work/ids.txt"; echo "}"
  echo 'request = function() return wrk.format("GET", "/v1/videos/" .. ids[math.random(#ids)] .. "/recommendations?limit=10") end'; } >"$work/recs.lua"
cat >"$work/fts.sql" <<SQL
\\set i random(1, $n)
SELECT v.id FROM curation.videos v, bench_queries b WHERE b.i = :i AND v.topic_id = b.topic_id AND v.search @@ b.q ORDER BY ts_rank(v.search, b.q) DESC LIMIT 10;
SQL

wrk_once() {
    local out; out="$(wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$work/recs.lua" "$API")"
    wrk_result "$out"
}
pg_once() {
    local out; rm -f "$work"/pgbench_log.*
    out="$(cd "$work" && pgbench -h 127.0.0.1 -p "$PG_PORT" -U postgres -n -M prepared -c "$CONNECTIONS" -j 2 -T "$DURATION" -l -f "$work/fts.sql" "$DB" 2>&1)"
    pgbench_result "$out"
}
echo "==> $CONNECTIONS connections, ${DURATION}s each, $RUNS interleaved rounds ($(nproc) cores), $videos videos" >&2
: >"$work/recs"; : >"$work/fts"
for i in $(seq 1 "$RUNS"); do
    wrk_once >>"$work/recs"; pg_once >>"$work/fts"
    echo "  round $i: recommendations $(tail -1 "$work/recs") | PostgreSQL full-text $(tail -1 "$work/fts")" >&2
done
echo
echo "curation, $(date -u +%Y-%m-%d), $(nproc) cores, $videos videos, $CONNECTIONS connections, medians of $RUNS interleaved ${DURATION}s rounds"
printf '%-58s %10s %9s %8s\n' "target" "per second" "p99 ms" "ratio"
printf '%-58s %10.0f %9.2f %8s\n' "GET /v1/videos/{id}/recommendations (top 10, in the topic)" "$(col recs 1)" "$(col recs 2)" \
    "$(paired recs fts)"
printf '%-58s %10.0f %9.2f %8s\n' "  PostgreSQL ts_rank over GIN, same words, same topic" "$(col fts 1)" "$(col fts 2)" "1.00"
echo "index build ${build_s} s (service start to ready), service memory ${rss_mb} MB"
