#!/usr/bin/env bash
# Chat benchmark: each target beside pgbench running the same SQL with the same concurrency, interleaved round by
# round (so drift in the machine hits both alike):
#   1. POST /v1/rooms/{id}/messages into one room (the room's row lock orders them: a busy room, not many quiet ones);
#   2. GET /v1/rooms/{id}/messages, the latest page of 20, in a room of 10,000 messages.
# Prints requests/s, p99 and the ratio to pgbench (medians of RUNS rounds), and CPU seconds per 1,000 requests of
# the service and of PostgreSQL (from /proc).
#   bench/chat.sh              DURATION=10 CONNECTIONS=16 RUNS=3
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DURATION="${DURATION:-10}"; CONNECTIONS="${CONNECTIONS:-16}"; RUNS="${RUNS:-3}"
AUTH="http://127.0.0.1:8081"; API="http://127.0.0.1:8083"
command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }

"$ROOT/deploy/local/stack" up >&2
STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
PG_PORT="$(cat "$STATE/pg.port" 2>/dev/null || echo 5432)" PG_DB=chat
PSQL=(psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$PG_DB" -v ON_ERROR_STOP=1 -qtA)
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
json() { python3 -c "import sys, json; print(json.load(sys.stdin)$1)"; }

echo "==> a room to write to, and a room of 10,000 messages to read" >&2
u="chatbench$(date +%s)"
r="$(curl -fs "$AUTH/v1/auth/signup" -H 'Content-Type: application/json' \
    -d "{\"username\":\"$u\",\"email\":\"$u@example.com\",\"password\":\"benchmark password\",\"fullName\":\"Bench Writer\"}")"
token="$(json '["accessToken"]' <<<"$r")"; user="$(json '["user"]["id"]' <<<"$r")"
write_room="$(curl -fs "$API/v1/rooms" -H 'Content-Type: application/json' -H "Authorization: Bearer $token" -d '{"name":"Bench writes"}' | json '["id"]')"
read_room="$(curl -fs "$API/v1/rooms" -H 'Content-Type: application/json' -H "Authorization: Bearer $token" -d '{"name":"Bench reads"}' | json '["id"]')"
"${PSQL[@]}" <<SQL
WITH n AS (UPDATE chat.rooms SET message_seq = 10000, change_seq = change_seq + 10000 WHERE id = '$read_room' RETURNING id)
INSERT INTO chat.messages (id, room_id, seq, author_id, text)
SELECT gen_random_uuid(), '$read_room', s, '$user', 'History message number ' || s || ' with a few words to search for'
FROM generate_series(1, 10000) s;
ANALYZE chat.messages;
SQL

# The SQL the handlers run, for pgbench: the same statements with the same parameters.
columns="m.id, m.room_id, m.seq, m.author_id, m.text, m.client_id, m.reply_to, array_to_string(m.media_ids, ',') AS media_text, m.created_at, m.edited_at, m.deleted_at, p.full_name AS author_name, p.avatar_media_id AS author_avatar"
room_q() { echo "SELECT r.id, r.kind, r.name, r.topic, r.invite_code, r.parcel_id, r.read_only, r.created_by, r.change_seq, r.message_seq, r.created_at, r.updated_at, mb.role, mb.read_seq FROM chat.rooms r LEFT JOIN chat.members mb ON mb.room_id = r.id AND mb.user_id = '$user' WHERE r.id = '$1'"; }
cat >"$work/post.sql" <<SQL
BEGIN;
$(room_q "$write_room");
UPDATE chat.rooms SET change_seq = change_seq + 1, message_seq = message_seq + 1, updated_at = now() WHERE id = '$write_room' RETURNING change_seq, message_seq \\gset
SELECT gen_random_uuid() AS mid \\gset
INSERT INTO chat.messages (id, room_id, seq, author_id, text, client_id, reply_to, media_ids) VALUES (:mid, '$write_room', :message_seq, '$user', 'A benchmark message', NULL, NULL, '{}');
SELECT $columns FROM chat.messages m LEFT JOIN chat.profiles p ON p.user_id = m.author_id WHERE m.id = :mid;
INSERT INTO chat.changes (room_id, seq, event, body, message_id) VALUES ('$write_room', :change_seq, 'message_created', '{"id":"x","text":"A benchmark message"}', :mid);
INSERT INTO chat.outbox (event_id, topic, key, payload) VALUES (gen_random_uuid(), 'bench.chat.message_created', '$write_room', '{"specversion":"1.0","data":{}}');
COMMIT;
SQL
cat >"$work/history.sql" <<SQL
$(room_q "$read_room");
SELECT $columns FROM chat.messages m LEFT JOIN chat.profiles p ON p.user_id = m.author_id WHERE m.room_id = '$read_room' ORDER BY m.seq DESC LIMIT 21;
SQL
cat >"$work/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $token"
wrk.body = '{"text":"A benchmark message"}'
LUA

source "$ROOT/bench/lib.sh"
bench_topic bench.chat.message_created
echo "==> $CONNECTIONS connections, ${DURATION}s each, $RUNS interleaved rounds ($(nproc) cores)" >&2
for name in post post_pg history history_pg; do : >"$work/$name"; done
for i in $(seq 1 "$RUNS"); do
    wrk_once chat "$API/v1/rooms/$write_room/messages" "$work/post.lua" >>"$work/post"
    pg_once "$work/post.sql" >>"$work/post_pg"
    wrk_once chat "$API/v1/rooms/$read_room/messages" "" "Authorization: Bearer $token" >>"$work/history"
    pg_once "$work/history.sql" >>"$work/history_pg"
    echo "  round $i: post $(tail -1 "$work/post") | pgbench $(tail -1 "$work/post_pg") | history $(tail -1 "$work/history") | pgbench $(tail -1 "$work/history_pg")" >&2
done
"${PSQL[@]}" -c "DELETE FROM chat.outbox WHERE topic = 'bench.chat.message_created'" >/dev/null

echo
echo "chat, $(date -u +%Y-%m-%d), $(nproc) cores, $CONNECTIONS connections, medians of $RUNS interleaved ${DURATION}s rounds"
pair_header 44
pair_rows 44 "POST /v1/rooms/{id}/messages (one busy room)" post "  pgbench, the same SQL" post_pg
pair_rows 44 "GET /v1/rooms/{id}/messages (latest 20)" history "  pgbench, the same SQL" history_pg
