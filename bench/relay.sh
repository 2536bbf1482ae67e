#!/usr/bin/env bash
# Outbox relay benchmark beside a raw confluent-kafka producer, interleaved round by round (bench/relay.py):
#   1. a backlog of EVENTS events drained by stories' relay, events/s and CPU per 1,000 events, beside the raw
#      producer sending the same messages (idempotent, acks=all, the ce_type header), and without the header apart;
#   2. story.created from commit to a consumer while POST /v1/stories runs at RATE a second, beside the raw producer
#      to the same consumer at the same rate.
#   bench/relay.sh              EVENTS=50000 RUNS=3 RATE=800 LAG_SECONDS=10
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
AUTH="http://127.0.0.1:8081"; API="http://127.0.0.1:8082"

"$ROOT/deploy/local/stack" up >&2
STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
export STATE PG_PORT="$(cat "$STATE/pg.port" 2>/dev/null || echo 5432)" KAFKA_BROKERS="127.0.0.1:${STACK_KAFKA_PORT:-9092}"
json() { python3 -c "import sys, json; print(json.load(sys.stdin)$1)"; }

u="relay$(date +%s)"
r="$(curl -fs "$AUTH/v1/auth/signup" -H 'Content-Type: application/json' \
    -d "{\"username\":\"$u\",\"email\":\"$u@example.com\",\"password\":\"benchmark password\",\"fullName\":\"Relay Bench\"}")"
TOKEN="$(json '["accessToken"]' <<<"$r")"
GROUP="$(curl -fs "$API/v1/groups" -H 'Content-Type: application/json' -H "Authorization: Bearer $TOKEN" -d '{"name":"Relay bench"}' | json '["id"]')"
export TOKEN GROUP
LD_LIBRARY_PATH= exec "$ROOT/.local/venv/bin/python" "$ROOT/bench/relay.py"
