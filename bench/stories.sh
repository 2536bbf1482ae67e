#!/usr/bin/env bash
# Stories benchmark, each beside pgbench running the same SQL with the same concurrency in the same run:
#   1. GET /v1/groups/{id}/newsletter for a group of 20 members with a week of stories, in a database of
#      STORIES (default 1,000,000) stories;
#   2. POST /v1/stories (the story, its group row, its outbox event, in one transaction).
# Each round runs the service, then pgbench with the same SQL and concurrency, so both see the same machine, then the
# same two requests through the stack's gateway (as clients reach them); prints requests/s, p99, the ratio to pgbench
# (the gateway's: to direct) and the CPU per 1,000 requests (service, PostgreSQL; medians of RUNS rounds).
#   bench/stories.sh              DURATION=10 CONNECTIONS=16 RUNS=3 STORIES=1000000
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DURATION="${DURATION:-10}"; CONNECTIONS="${CONNECTIONS:-16}"; RUNS="${RUNS:-3}"; STORIES="${STORIES:-1000000}"
AUTH="http://127.0.0.1:8081"; API="http://127.0.0.1:8082"; GATEWAY="http://127.0.0.1:${STACK_GATEWAY_PORT:-8080}"
command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }

"$ROOT/deploy/local/stack" up >&2
STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
PG_PORT="$(cat "$STATE/pg.port" 2>/dev/null || echo 5432)" PG_DB=stories
PSQL=(psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$PG_DB" -v ON_ERROR_STOP=1 -qtA)
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
json() { python3 -c "import sys, json; print(json.load(sys.stdin)$1)"; }

echo "==> 20 people, one group, a week of stories" >&2
run_id="$(date +%s)"
tokens=(); ids=()
for i in $(seq 1 20); do
    u="nl${run_id}_$i"
    r="$(curl -fs "$AUTH/v1/auth/signup" -H 'Content-Type: application/json' \
        -d "{\"username\":\"$u\",\"email\":\"$u@example.com\",\"password\":\"benchmark password\",\"fullName\":\"Member $i\"}")"
    tokens+=("$(json '["accessToken"]' <<<"$r")"); ids+=("$(json '["user"]["id"]' <<<"$r")")
done
group="$(curl -fs "$API/v1/groups" -H 'Content-Type: application/json' -H "Authorization: Bearer ${tokens[0]}" -d '{"name":"Bench family"}')"
gid="$(json '["id"]' <<<"$group")"; code="$(json '["inviteCode"]' <<<"$group")"
# Stories are created in a group of their own, so the newsletter read stays the same size run after run.
wgid="$(curl -fs "$API/v1/groups" -H 'Content-Type: application/json' -H "Authorization: Bearer ${tokens[1]}" -d '{"name":"Bench writes"}' | json '["id"]')"
for i in $(seq 1 19); do
    curl -fs -o /dev/null "$API/v1/groups/join" -H 'Content-Type: application/json' -H "Authorization: Bearer ${tokens[$i]}" \
        -d "{\"inviteCode\":\"$code\"}"
done
# Two stories a day per member over the last week, placed in the current period by time.
"${PSQL[@]}" <<SQL
WITH m AS (SELECT user_id FROM stories.memberships WHERE group_id = '$gid'),
s AS (INSERT INTO stories.stories (id, author_id, text, created_at, updated_at)
      SELECT gen_random_uuid(), m.user_id, 'A day in the life, part ' || n, now() - (n || ' hours')::interval, now()
      FROM m, generate_series(1, 14) AS n RETURNING id, created_at)
INSERT INTO stories.story_groups (story_id, group_id, created_at) SELECT id, '$gid', created_at FROM s;
SQL

have="$("${PSQL[@]}" -c "SELECT count(*) FROM stories.stories")"
if [ "$have" -lt "$STORIES" ]; then
    missing=$((STORIES - have))
    echo "==> adding $missing stories in 10,000 other groups (once per database)" >&2
    "${PSQL[@]}" <<SQL
INSERT INTO stories.groups (id, kind, name, invite_code, created_by)
SELECT gen_random_uuid(), 'group', 'filler ' || g, upper(substr(md5(random()::text), 1, 12)), gen_random_uuid()
FROM generate_series(1, 10000) g ON CONFLICT DO NOTHING;
CREATE TEMP TABLE filler AS SELECT id, row_number() OVER () AS n FROM stories.groups WHERE name LIKE 'filler %';
WITH s AS (INSERT INTO stories.stories (id, author_id, text, created_at, updated_at)
           SELECT gen_random_uuid(), gen_random_uuid(), 'filler story ' || i, now() - (i % 5000 || ' hours')::interval, now()
           FROM generate_series(1, $missing) i RETURNING id, created_at, text)
INSERT INTO stories.story_groups (story_id, group_id, created_at)
SELECT s.id, f.id, s.created_at FROM s JOIN filler f ON f.n = 1 + (hashtext(s.id::text) & 2147483647) % 10000;
ANALYZE;
SQL
fi
echo "==> $("${PSQL[@]}" -c "SELECT count(*) FROM stories.stories") stories in the database" >&2

# The SQL the newsletter handler runs, for pgbench (same statements, same parameters).
now_range="$("${PSQL[@]}" -c "SELECT now() - interval '7 days'")"
cat >"$work/newsletter.sql" <<SQL
SELECT g.id, g.kind, g.name, g.image_media_id, g.invite_code, g.created_by, g.newsletter_frequency, g.newsletter_weekday, g.newsletter_hour, g.newsletter_time_zone, g.created_at, g.updated_at, m.role, m.newsletter FROM stories.groups g LEFT JOIN stories.memberships m ON m.group_id = g.id AND m.user_id = '${ids[0]}' WHERE g.id = '$gid';
SELECT coalesce(sum(version), 0)::int8 AS v FROM stories.group_versions WHERE group_id = '$gid';
SELECT s.id, s.author_id, s.text, s.background_color, s.created_at, s.updated_at, (EXTRACT(EPOCH FROM s.created_at) * 1000000)::int8 AS created_us, (SELECT count(*) FROM stories.comments WHERE story_id = s.id) AS comment_count FROM stories.story_groups sg JOIN stories.stories s ON s.id = sg.story_id WHERE sg.group_id = '$gid' AND sg.created_at >= '$now_range' AND sg.created_at < now() + interval '7 days' ORDER BY sg.created_at, sg.story_id LIMIT 10000;
SELECT story_id, media_id FROM stories.story_media WHERE story_id = ANY(ARRAY(SELECT story_id FROM stories.story_groups WHERE group_id = '$gid')) ORDER BY story_id, position;
SELECT m.user_id, m.role, m.joined_at, p.full_name, p.avatar_media_id FROM stories.memberships m LEFT JOIN stories.profiles p ON p.user_id = m.user_id WHERE m.group_id = '$gid' ORDER BY m.joined_at, m.user_id;
SELECT user_id, full_name, avatar_media_id FROM stories.profiles WHERE user_id = ANY('{}'::uuid[]);
SQL
cat >"$work/create.sql" <<SQL
BEGIN;
SELECT gen_random_uuid() AS sid \\gset
SELECT group_id FROM stories.memberships WHERE group_id = ANY('{$wgid}'::uuid[]) AND user_id = '${ids[1]}';
INSERT INTO stories.stories (id, author_id, text, background_color) VALUES (:sid, '${ids[1]}', 'A benchmark story', '#AABBCC') RETURNING id, author_id, text, background_color, created_at, updated_at, (EXTRACT(EPOCH FROM created_at) * 1000000)::int8 AS created_us, 0 AS comment_count;
INSERT INTO stories.story_groups (story_id, group_id, created_at) SELECT :sid, g, now() FROM unnest('{$wgid}'::uuid[]) AS g;
DELETE FROM stories.story_media WHERE story_id = :sid;
INSERT INTO stories.story_media (story_id, position, media_id) SELECT :sid, ordinality, m FROM unnest('{}'::uuid[]) WITH ORDINALITY AS t(m, ordinality);
INSERT INTO stories.outbox (event_id, topic, key, payload) VALUES (gen_random_uuid(), 'bench.story.created', :sid, '{"specversion":"1.0","data":{}}');
COMMIT;
SQL
cat >"$work/create.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer ${tokens[1]}"
wrk.body = '{"text":"A benchmark story","groupIds":["$wgid"],"backgroundColor":"#AABBCC"}'
LUA

source "$ROOT/bench/lib.sh"
bench_topic bench.story.created

echo "==> $CONNECTIONS connections, ${DURATION}s each, $RUNS interleaved rounds ($(nproc) cores)" >&2
for name in nl nl_pg cr cr_pg gw_nl gw_cr; do : >"$work/$name"; done
for i in $(seq 1 "$RUNS"); do
    wrk_once stories "$API/v1/groups/$gid/newsletter" "" "Authorization: Bearer ${tokens[0]}" >>"$work/nl"
    pg_once "$work/newsletter.sql" >>"$work/nl_pg"
    wrk_once stories "$API/v1/stories" "$work/create.lua" >>"$work/cr"
    pg_once "$work/create.sql" >>"$work/cr_pg"
    wrk_once stories "$GATEWAY/v1/groups/$gid/newsletter" "" "Authorization: Bearer ${tokens[0]}" >>"$work/gw_nl"
    wrk_once stories "$GATEWAY/v1/stories" "$work/create.lua" >>"$work/gw_cr"
    echo "  round $i: newsletter $(tail -1 "$work/nl") | pgbench $(tail -1 "$work/nl_pg") | create $(tail -1 "$work/cr") | pgbench $(tail -1 "$work/cr_pg") | gateway newsletter $(tail -1 "$work/gw_nl") | gateway create $(tail -1 "$work/gw_cr")" >&2
done
"${PSQL[@]}" -c "DELETE FROM stories.outbox WHERE topic = 'bench.story.created'" >/dev/null

echo
echo "stories, $(date -u +%Y-%m-%d), $(nproc) cores, $CONNECTIONS connections, medians of $RUNS interleaved ${DURATION}s rounds"
pair_header 40
pair_rows 40 "GET newsletter (20 members, a week)" nl "  pgbench, the same SQL" nl_pg
pair_rows 40 "POST /v1/stories (with outbox)" cr "  pgbench, the same SQL" cr_pg
# Through the gateway, beside the same request direct (its ratio is to direct).
for pair in "gateway GET newsletter:gw_nl:nl" "gateway POST /v1/stories:gw_cr:cr"; do
    IFS=: read -r label gw direct <<<"$pair"
    printf "%-40s %10.0f %9.2f %8s %20s\n" "$label" "$(col "$gw" 1)" "$(col "$gw" 2)" "$(paired "$gw" "$direct")" \
        "$(col "$gw" 3), $(col "$gw" 4)"
done
