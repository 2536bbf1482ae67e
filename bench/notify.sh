#!/usr/bin/env bash
# notify's deliveries per second, Web Push, APNs and mail, beside a plain client's on the same machine (pywebpush, an
# HTTP/2 client of the h2 package, Python's smtplib), interleaved round by round (bench/notify.py): push to the local
# push service stand-in (VAPID checked, payloads decrypted), APNs to the stack's APNs stand-in (HTTP/2 over TLS, the
# provider token checked), mail to the stack's mail sink.
#   bench/notify.sh              MESSAGES=500 RUNS=3 SENDERS=4
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/deploy/local/stack" up >&2
STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
export ROOT STATE KAFKA_BROKERS="127.0.0.1:${STACK_KAFKA_PORT:-9092}" MAIL_PORT="${STACK_MAIL_PORT:-2525}" APNS_PORT="${STACK_APNS_PORT:-12112}"
LD_LIBRARY_PATH= exec "$ROOT/.local/venv/bin/python" "$ROOT/bench/notify.py"
