"""What one consumer costs the local broker (Tansu, memory storage) as a topic fills (run by bench/broker.sh).

Each case starts a Tansu broker of its own on a free port, fills it, then sends 100 messages a second for DURATION s to
a topic read by one consumer at its end (librdkafka's defaults but `fetch.wait.max.ms` 100, the chat rooms' feed's),
and prints the broker's CPU over that time and the messages' latency from produce to consume (the first second left
out: a producer's first message waits for its producer id). The cases: an empty topic; an empty topic beside another
holding FILL single-message batches; the read topic itself holding FILL single-message batches, on 3 and on 12
partitions; holding FILL messages in batches of 1,000; and the third case with a consumer that asks the broker to
hold a fetch until it has 2,000 bytes, at most 20 ms.

Then the chat fan-out's shape without the stack: three consumers reading 200 messages a second, on an empty topic and
on one holding FANOUT_FILL single-message batches (what a 60 s run of bench/chat-fanout.sh leaves), with fetches held
100 ms (the feeds') and 20 ms. Each row also prints how many fetches a consumer sent a second.

`broker.py alone BROKERS TOPIC RATE CONSUMERS BROKER_PID` measures, on a running broker (the stack's, right after a
benchmark), the broker alone on the shape that benchmark gave it: a new topic with TOPIC's partitions, filled with
as many single-message batches as TOPIC holds messages (its end offsets' sum: the most batches those could be), read
by CONSUMERS consumers at its end while RATE messages a second are produced; one line, then the topic is deleted.
"""
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

FILL = int(os.environ.get("FILL", "20000"))
DURATION = int(os.environ.get("DURATION", "6"))
RATE = 100
FANOUT_RATE = 200  # bench/chat-fanout.sh's messages a second
FANOUT_FILL = int(os.environ.get("FANOUT_FILL", "12000"))  # what its 60 s leave in the topic
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def fill(brokers, topic, n, batch):
    p = Producer({"bootstrap.servers": brokers, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 0 if batch == 1 else 50, "batch.num.messages": batch})
    for _ in range(n):
        while True:
            try:
                p.produce(topic, key=uuid.uuid4().hex, value=b"x" * 400)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(120)


def measure(brokers, pid, consumer, consumers=1, rate=RATE, topic="read"):
    fetches = [0] * consumers  # each consumer's fetch requests so far, from librdkafka's statistics

    def counted(i):
        def cb(stats):
            fetches[i] = sum(b.get("req", {}).get("Fetch", 0) for b in json.loads(stats)["brokers"].values())
        return cb

    cs = []
    for i in range(consumers):
        c = Consumer({"bootstrap.servers": brokers, "group.id": uuid.uuid4().hex, "fetch.wait.max.ms": 100,
                      "enable.auto.commit": False, "statistics.interval.ms": 500, "stats_cb": counted(i), **consumer})
        partitions = c.list_topics(topic, timeout=10).topics[topic].partitions
        c.assign([TopicPartition(topic, q, c.get_watermark_offsets(TopicPartition(topic, q), timeout=10)[1])
                  for q in partitions])
        cs.append(c)
    for _ in range(20):
        for c in cs:
            c.poll(0.1 / consumers)
    total, latencies = rate * (DURATION + 1), [[] for _ in cs]

    def read(c, latencies):
        deadline = time.time() + DURATION + 20
        while len(latencies) < total and time.time() < deadline:
            m = c.poll(0.1)
            # Tansu's end offset is short by a batch: the consumer may start in the fill's last one.
            if m is not None and not m.error() and not m.value().startswith(b"x"):
                sent, i = m.value().decode().split()
                latencies.append((int(i), (time.time() - float(sent)) * 1000))

    readers = [threading.Thread(target=read, args=(c, l)) for c, l in zip(cs, latencies)]
    for r in readers:
        r.start()
    p = Producer({"bootstrap.servers": brokers, "enable.idempotence": True, "acks": "all", "linger.ms": 0})
    start = time.time()
    for i in range(total):
        while time.time() < start + i / rate:
            time.sleep(0.0005)
        if i == rate:
            used, measured, fetched = cpu(pid), time.time(), sum(fetches)
        p.produce(topic, key=uuid.uuid4().hex, value=f"{time.time()!r} {i}".encode())
        p.poll(0)
    used, elapsed, fetched = cpu(pid) - used, time.time() - measured, sum(fetches) - fetched
    p.flush(10)
    for r in readers:
        r.join()
    for c in cs:
        c.close()
    kept = sorted(ms for each in latencies for i, ms in each if i >= rate)
    if len(kept) < consumers * (total - rate):
        return f"received {len(kept)} of {consumers * (total - rate)}"
    return f"broker {100 * used / elapsed:3.0f}% of a core   fetches/s a consumer {fetched / elapsed / consumers:4.0f}   " \
           f"latency p50 {kept[len(kept) // 2]:5.1f}  p99 {kept[int(len(kept) * 0.99)]:6.1f} ms"


def case(label, partitions, filled=None, batch=1, consumer={}, consumers=1, rate=RATE, count=FILL):
    port = free_port()
    brokers = f"127.0.0.1:{port}"
    broker = subprocess.Popen([os.environ["TANSU_BIN"], "broker", "--storage-engine", "memory://tansu/",
                               "--listener-url", f"tcp://{brokers}", "--advertised-listener-url", f"tcp://{brokers}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        admin = AdminClient({"bootstrap.servers": brokers})
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                time.sleep(0.1)
        for f in admin.create_topics([NewTopic("read", partitions, 1), NewTopic("other", 3, 1)]).values():
            f.result()
        if filled:
            fill(brokers, filled, count, batch)
        print(f"{label:64s} {measure(brokers, broker.pid, consumer, consumers, rate)}", flush=True)
    finally:
        broker.terminate()
        broker.wait()


def alone(brokers, like, rate, consumers, pid):
    """The broker alone on `like`'s shape, on the running broker at `brokers` (see the module's text)."""
    admin = AdminClient({"bootstrap.servers": brokers})
    probe = Consumer({"bootstrap.servers": brokers, "group.id": uuid.uuid4().hex})
    partitions = probe.list_topics(like, timeout=10).topics[like].partitions
    held = sum(probe.get_watermark_offsets(TopicPartition(like, q), timeout=10)[1] for q in partitions)
    probe.close()
    topic = f"bench.alone.{uuid.uuid4().hex[:8]}"
    for f in admin.create_topics([NewTopic(topic, len(partitions), 1)]).values():
        f.result()
    try:
        fill(brokers, topic, held, 1)
        result = measure(brokers, pid, {}, consumers, rate, topic)
    finally:
        for f in admin.delete_topics([topic]).values():
            f.result()
    print(f"broker alone: {consumers} consumer(s) at {rate}/s on a topic holding {held:,} single-message batches "
          f"({len(partitions)} partitions), as {like} holds messages: {result}", flush=True)
    p99 = re.search(r"p99 +([0-9.]+) ms", result)
    return float(p99.group(1)) if p99 else None


def main():
    print(f"one consumer at {RATE} messages/s for {DURATION} s, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC",
          flush=True)
    case("empty topic, 3 partitions", 3)
    case(f"empty topic, 3 partitions; another holds {FILL:,} batches", 3, "other")
    case(f"topic holding {FILL:,} single-message batches, 3 partitions", 3, "read")
    case(f"topic holding {FILL:,} single-message batches, 12 partitions", 12, "read")
    case(f"topic holding {FILL:,} messages in batches of 1,000, 3 partitions", 3, "read", 1000)
    case("the third, the consumer asking for 2,000 bytes within 20 ms", 3, "read",
         consumer={"fetch.min.bytes": 2000, "fetch.wait.max.ms": 20})
    print(f"three consumers (the chat fan-out's two feeds and notify) at {FANOUT_RATE} messages/s, 3 partitions", flush=True)
    for hold in (100, 20):
        case(f"empty topic, fetches held {hold} ms", 3, consumer={"fetch.wait.max.ms": hold}, consumers=3,
             rate=FANOUT_RATE)
        case(f"topic holding {FANOUT_FILL:,} single-message batches, fetches held {hold} ms", 3, "read",
             consumer={"fetch.wait.max.ms": hold}, consumers=3, rate=FANOUT_RATE, count=FANOUT_FILL)


if __name__ == "__main__":
    if sys.argv[1:2] == ["alone"]:
        brokers, like, rate, consumers, pid = sys.argv[2:7]
        alone(brokers, like, int(rate), int(consumers), int(pid))
    else:
        main()
