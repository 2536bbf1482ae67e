#!/usr/bin/env bash
# What a freshly started stack costs doing nothing: the CPU of the broker, PostgreSQL and every service over MEASURE
# seconds, SETTLE seconds after start (once the consumers have joined their groups). Then how long a message waits
# for a consumer whose broker holds an empty fetch 100 ms (the feeds people watch) and 500 ms (the consumer groups,
# the revocations), 40 messages each at random gaps: the price of the longer hold, which is nothing with Kafka (it
# answers when data arrives) and a later answer with Tansu.
#   bench/idle.sh                SETTLE=30 MEASURE=30
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SETTLE="${SETTLE:-30}"; MEASURE="${MEASURE:-30}"
"$ROOT/deploy/local/stack" down >&2
"$ROOT/deploy/local/stack" up >&2
STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
source "$ROOT/bench/lib.sh"
NAMES=(tansu auth stories chat dispatch curation notify)
snapshot() { for n in "${NAMES[@]}"; do printf '%s ' "$(cpu_of "$(pid_of "$n")")"; done; pg_cpu; }
sleep "$SETTLE"
read -ra before <<<"$(snapshot)"
sleep "$MEASURE"
read -ra after <<<"$(snapshot)"
echo
echo "idle stack, $(date -u +%Y-%m-%d), $(nproc) cores: % of one core over ${MEASURE} s, ${SETTLE} s after start"
# row NAME TICKS: the ticks as a percentage of one core over MEASURE seconds
row() { printf '%-10s %6.1f\n' "$1" "$(awk -v u="$2" -v s="$MEASURE" -v t="$tick" 'BEGIN {print u * 100 / t / s}')"; }
total=0
for k in "${!before[@]}"; do
    used=$(( after[k] - before[k] )); total=$((total + used))
    row "${NAMES[$k]:-postgres}" "$used"
done
row total "$total"

LD_LIBRARY_PATH= "$ROOT/.local/venv/bin/python" - "127.0.0.1:${STACK_KAFKA_PORT:-9092}" <<'PY'
import os, random, sys, time
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
broker = sys.argv[1]
topic = f"bench.idle.{os.getpid()}"
admin = AdminClient({"bootstrap.servers": broker})
admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
producer = Producer({"bootstrap.servers": broker, "linger.ms": 0})
print("a message's wait for a consumer with nothing else to read (ms):")
try:
    for wait in (100, 500):
        consumer = Consumer({"bootstrap.servers": broker, "group.id": f"bench-idle-{os.getpid()}-{wait}",
                             "fetch.wait.max.ms": wait, "auto.offset.reset": "latest",
                             "session.timeout.ms": 6000, "heartbeat.interval.ms": 2000})
        consumer.subscribe([topic])
        while not consumer.assignment():
            consumer.poll(0.1)
        for _ in range(20):
            consumer.poll(0.05)  # past the assignment's first fetches
        waits = []
        for i in range(40):
            time.sleep(random.uniform(0.05, 0.3))
            sent = time.time(); tag = f"{wait}-{i}".encode()
            producer.produce(topic, value=tag); producer.flush()
            while True:
                m = consumer.poll(5)
                if m is None:
                    sys.exit(f"message {i} did not arrive in 5 s")
                if not m.error() and m.value() == tag:
                    waits.append((time.time() - sent) * 1000); break
        consumer.close()
        waits.sort()
        print(f"  fetch held {wait} ms: p50 {waits[20]:.1f}  p95 {waits[37]:.1f}  max {waits[-1]:.1f}")
finally:
    admin.delete_topics([topic])[topic].result()
PY
"$ROOT/deploy/local/stack" down >&2
