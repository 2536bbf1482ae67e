#!/usr/bin/env bash
# Chat fan-out: a second chat instance beside the stack's (same database and broker), then chat-fanout spreading
# its streams and posts over both: 1,000 SSE streams on 10 rooms, 200 messages/s for 60 s by default. Prints the
# delivery latency (post accepted → received on each stream) p50/p99/max, deliveries per second, and per stream what
# was lost, duplicated or out of order; exits 1 if any was. Then the broker alone on the same shape, on the same
# broker right after (bench/broker.py alone), and the fan-out's p99 against it.
#   bench/chat-fanout.sh [chat-fanout options, e.g. --seconds 30 --rate 100]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/deploy/local/stack" up >&2
STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
(cd "$ROOT" && swift build -c release --product chat-fanout >&2)
bin="$(cd "$ROOT" && swift build -c release --show-bin-path)"
export LD_LIBRARY_PATH="$ROOT/.local/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# The stack's chat's own settings, another port.
echo "==> a second chat instance on :8093" >&2
source "$ROOT/bench/lib.sh"  # service_settings
service_settings chat PORT=8093 HTTP_MAX_CONNECTIONS_PER_CLIENT=8192 LOG_LEVEL=warn
env -i "${settings[@]}" "$bin/chat" >>"$STATE/logs/chat-2.log" 2>&1 &
second=$!
trap 'kill -TERM $second 2>/dev/null; wait $second 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do curl -fs http://127.0.0.1:8093/readyz >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs http://127.0.0.1:8093/readyz >/dev/null || { tail -n 20 "$STATE/logs/chat-2.log" >&2; exit 1; }

rc=0
"$bin/chat-fanout" --chat http://127.0.0.1:8083,http://127.0.0.1:8093 "$@" | tee "$STATE/chat-fanout.txt" || rc=$?

# The broker alone on the same shape, on the same broker right after: three consumers (the two chat feeds and notify)
# at the run's rate, on a topic holding as many batches as chat.message_created now holds messages.
rate=200; args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[i]}" != "--rate" ] || rate="${args[i + 1]}"; done
alone="$(LD_LIBRARY_PATH= "$ROOT/.local/venv/bin/python" "$ROOT/bench/broker.py" alone "127.0.0.1:${STACK_KAFKA_PORT:-9092}" \
    chat.message_created "$rate" 3 "$(cat "$STATE/tansu.pid")")"
echo "$alone"
ours="$(sed -n 's/.*latency ms *p50 [0-9.]*, p99 \([0-9.]*\),.*/\1/p' "$STATE/chat-fanout.txt" | head -n 1)"
theirs="$(sed -n 's/.* p99 *\([0-9.]*\) ms$/\1/p' <<<"$alone")"
[ -z "$ours" ] || [ -z "$theirs" ] || awk -v a="$ours" -v b="$theirs" \
    'BEGIN {printf "fan-out p99 %.1f ms against the broker alone %.1f ms on the same shape: %.2f (goal: at most 1.10)\n", a, b, a / b}'
exit $rc
