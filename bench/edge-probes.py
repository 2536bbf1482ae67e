#!/usr/bin/env python3
"""The edge issue's three resource probes against a running local stack, with the figures its closing note gives:

  1. CR/LF: 16 connections to curation each sending "\\r\\n" as fast as it takes them, for 10 s
  2. slow uploads: 40 connections to stories' POST /v1/media declaring 10 MiB and sending all but the last byte,
     first without a token, then with a valid one
  3. a lock: chat.rooms locked for 25 s from another session while /healthz is probed every 50 ms and 40 clients
     list their rooms

It prints each service's resident memory before and during, and the latencies and answers. Bounded: loopback only,
every loop ends by itself.  Usage: bench/edge-probes.py  (after deploy/local/stack up)
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

STATE = os.environ.get("STACK_STATE_DIR") or subprocess.run(
    ["bash", "-c", 'echo /tmp/backend-stack-$(printf %s "$(cd "$(dirname "$0")/.." && pwd)" | md5sum | cut -c1-8)', sys.argv[0]],
    capture_output=True, text=True).stdout.strip()
PORTS = {"auth": 8081, "stories": 8082, "chat": 8083, "curation": 8085}
PG_PORT = open(os.path.join(STATE, "pg.port")).read().strip() if os.path.exists(os.path.join(STATE, "pg.port")) else "5432"


def rss_mb(service):
    pid = open(os.path.join(STATE, f"{service}.pid")).read().strip()
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def call(port, method, path, body=None, token=None):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, {}
    except Exception:
        return 0, {}


def token():
    name = "probe" + os.urandom(4).hex()
    _, body = call(PORTS["auth"], "POST", "/v1/auth/signup", {"username": name, "email": name + "@example.com",
                                                               "password": "correct horse battery", "fullName": "Probe"})
    return body["accessToken"]


def status_of(sock, wait):
    sock.settimeout(wait)
    try:
        data = sock.recv(4096)
        return data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/1.1 ") else ("closed" if not data else "?")
    except socket.timeout:
        return "no answer"
    except OSError:
        return "reset"


def crlf():
    before = rss_mb("curation")
    peak, answers = before, []

    def flood():
        s = socket.create_connection(("127.0.0.1", PORTS["curation"]))
        s.settimeout(1)
        sent, end = 0, time.time() + 10
        try:
            while time.time() < end:
                sent += s.send(b"\r\n" * 8192)
        except OSError:
            pass
        answers.append(status_of(s, 2) + f" after {sent >> 10} KiB")
        s.close()
    threads = [threading.Thread(target=flood) for _ in range(16)]
    [t.start() for t in threads]
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss_mb("curation"))
        time.sleep(0.2)
    print(f"CR/LF x16: curation {before:.0f} MB -> peak {peak:.0f} MB; answers: {sorted(set(answers))[:4]}")


def uploads(with_token):
    auth = f"Authorization: Bearer {token()}\r\n" if with_token else ""
    before = rss_mb("stories")
    sockets, answers = [], []
    head = (f"POST /v1/media HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\nContent-Length: {10 << 20}\r\n{auth}\r\n").encode()
    chunk = b"\xff" * (1 << 20)
    for _ in range(40):
        s = socket.create_connection(("127.0.0.1", PORTS["stories"]))
        s.settimeout(0.5)
        try:
            s.sendall(head)
            for i in range(10):
                s.sendall(chunk if i < 9 else chunk[:-1])
        except OSError:
            pass
        sockets.append(s)
    time.sleep(1)
    during = rss_mb("stories")
    for s in sockets:
        answers.append(status_of(s, 0.2))
        s.close()
    counts = {a: answers.count(a) for a in set(answers)}
    print(f"40 uploads of 10 MiB less a byte, {'with' if with_token else 'without'} a token: stories {before:.0f} MB -> "
          f"{during:.0f} MB; answers {counts}")


def lock():
    tok = token()
    call(PORTS["chat"], "POST", "/v1/rooms", {"name": "probe"}, tok)
    locker = subprocess.Popen(["psql", "-h", "127.0.0.1", "-p", PG_PORT, "-U", "postgres", "-q", "chat", "-c",
                               "BEGIN; LOCK TABLE chat.rooms IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(25); COMMIT;"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    outcomes, health = [], []

    def lister():
        end = time.time() + 20
        while time.time() < end:
            t0 = time.time()
            status, _ = call(PORTS["chat"], "GET", "/v1/rooms", token=tok)
            outcomes.append((status, time.time() - t0))
    threads = [threading.Thread(target=lister) for _ in range(40)]
    [t.start() for t in threads]
    end = time.time() + 20
    while time.time() < end:
        t0 = time.time()
        status, _ = call(PORTS["chat"], "GET", "/healthz")
        health.append((status, time.time() - t0))
        time.sleep(0.05)
    [t.join() for t in threads]
    locker.wait()
    h = sorted(d for _, d in health)
    o = sorted(d for _, d in outcomes)
    statuses = {s: [x for x, _ in outcomes].count(s) for s in set(x for x, _ in outcomes)}
    print(f"chat.rooms locked 25 s: /healthz {len(h)} probes, all 200: {all(s == 200 for s, _ in health)}, "
          f"p50 {h[len(h) // 2] * 1000:.1f} ms, max {h[-1] * 1000:.1f} ms; GET /v1/rooms x{len(o)}: {statuses}, "
          f"slowest {o[-1]:.2f} s")


if __name__ == "__main__":
    print(time.strftime("%Y-%m-%d"), "edge probes against the local stack")
    crlf()
    uploads(with_token=False)
    uploads(with_token=True)
    lock()
