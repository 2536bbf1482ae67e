#!/usr/bin/env bash
# The apps' mix against the local stack for MINUTES (an hour by default), a line a minute: each service's resident
# memory, p99 and 5xx answers that minute (from its own /metrics), the broker's and PostgreSQL's memory, and what the
# mix's clients saw fail; at the end, what grew from the second minute to the last. Flat is the goal.
# The mix: dispatch-load (PARCELS a second, COURIERS online, 20 of them accepting and delivering, FIXES fixes a second)
# beside bench/soak.py (STORIES stories a second with a comment every other one, CHAT messages a second, READS reads
# a second of chat's latest page, a group's stories and newsletter, a topic's videos and recommendations).
#   bench/soak.sh              MINUTES=60 PARCELS=5 COURIERS=500 FIXES=100 STORIES=5 CHAT=10 READS=50
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MINUTES="${MINUTES:-60}" PARCELS="${PARCELS:-5}" COURIERS="${COURIERS:-500}" FIXES="${FIXES:-100}"
STORIES="${STORIES:-5}" CHAT="${CHAT:-10}" READS="${READS:-50}"
STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
work="$(mktemp -d)"; trap 'kill "${load:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

"$ROOT/deploy/local/stack" up >&2
echo "==> $MINUTES minutes: $PARCELS parcels, $STORIES stories, $CHAT chat messages and $READS reads a second ($(date -u +%FT%TZ))" >&2
"$ROOT/deploy/local/stack" load --couriers "$COURIERS" --acting-couriers 20 --deliver --fix-rate "$FIXES" \
    --parcel-rate "$PARCELS" --duration "$((MINUTES * 60 + 30))" --quiet --out "$work/dispatch" >"$work/dispatch.txt" 2>&1 &
load=$!
sleep 20  # its couriers seeded and online
python3 "$ROOT/bench/soak.py" "$STATE" "$MINUTES" "$STORIES" "$CHAT" "$READS"
wait "$load" || echo "dispatch-load failed:" >&2
echo "==> dispatch-load's report:" >&2
grep -E "parcels|p99|errors|failed" "$work/dispatch.txt" | head -20 >&2 || true
