"""notify's deliveries per second beside a plain client's, interleaved round by round (run by bench/notify.sh).

Each round:
  1. push: MESSAGES reminder.due events for one person with one registered device; deliveries/s from the first
     event published to the last message the local push service (deploy/local/push_endpoint.py: VAPID checked,
     payload decrypted) accepted; beside it, pywebpush sending as many messages to the same kind of endpoint from
     SENDERS threads (notify's PUSH_SENDERS), each signing (VAPID) and encrypting (aes128gcm) its own;
  2. mail: MESSAGES user.password_reset_requested events, one person each; deliveries/s from the first published to
     the last message stored by the stack's mail sink (aiosmtpd); beside it, Python's smtplib sending as many
     multipart messages of the same size from SENDERS threads, a connection each, to the same sink.
Prints the medians of RUNS rounds and notify's ratio to the plain client (above 1: notify is faster).
"""
import base64
import http.client
import json
import os
import smtplib
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from email.message import EmailMessage

from confluent_kafka import Producer
from pywebpush import webpush

BROKERS = os.environ["KAFKA_BROKERS"]
MESSAGES = int(os.environ.get("MESSAGES", "500"))
RUNS = int(os.environ.get("RUNS", "3"))
SENDERS = int(os.environ.get("SENDERS", "4"))
STATE = os.environ["STATE"]
ROOT = os.environ["ROOT"]
PUSH_PORT = int(os.environ.get("PUSH_PORT", "8097"))
MAIL_PORT = int(os.environ.get("MAIL_PORT", "2525"))
AUTH, NOTIFY = ("127.0.0.1", 8081), ("127.0.0.1", 8086)
MAILDIR = os.path.join(STATE, "mail", "new")


def say(*a):
    print(*a, file=sys.stderr, flush=True)


def call(where, method, path, body=None, token=None):
    c = http.client.HTTPConnection(*where, timeout=10)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    c.request(method, path, json.dumps(body) if body is not None else None, headers)
    r = c.getresponse()
    data = r.read()
    return r.status, (json.loads(data) if data and r.getheader("Content-Type", "").startswith("application/json") else data)


def now(delta=0):
    return (datetime.now(timezone.utc) + timedelta(seconds=delta)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def publish(topic, events):
    """Publishes (key, data) pairs as CloudEvents, as their producer would."""
    p = Producer({"bootstrap.servers": BROKERS, "linger.ms": 5})
    for key, data in events:
        event = {"specversion": "1.0", "id": str(uuid.uuid4()), "source": "bench", "type": topic, "time": now(), "subject": key,
                 "datacontenttype": "application/json", "dataschema": "urn:backend:schema:events:" + topic, "data": data}
        p.produce(topic, json.dumps(event).encode(), key=key.encode(), headers=[("ce_type", topic.encode())])
    p.flush(30)


def stand_in():
    """The local push service, on PUSH_PORT."""
    process = subprocess.Popen([sys.executable, os.path.join(ROOT, "deploy/local/push_endpoint.py"), str(PUSH_PORT)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdout.readline().startswith(b"ready"), "the push endpoint did not start"
    return process


def received(subscription):
    ident = subscription["endpoint"].rsplit("/", 1)[1]
    return len(call(("127.0.0.1", PUSH_PORT), "GET", "/messages/" + ident)[1])


def wait_for(count, read, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if read() >= count:
            return time.time()
        time.sleep(0.01)
    raise SystemExit(f"only {read()} of {count} arrived in {timeout} s")


def push_notify(user, token, key):
    sub = call(("127.0.0.1", PUSH_PORT), "POST", "/subscriptions", {"applicationServerKey": key})[1]
    status, _ = call(NOTIFY, "POST", "/v1/push/subscriptions", sub, token)
    assert status == 201, status
    start = time.time()
    publish("reminder.due", [(user, {"userId": user, "groupId": str(uuid.uuid4()), "reason": "no_story_in_period",
                                     "periodStart": now(-3600), "periodEnd": now(7200)}) for _ in range(MESSAGES)])
    end = wait_for(MESSAGES, lambda: received(sub))
    # The next round's device is the only one: each reminder would reach every device the person has.
    subscriptions = call(NOTIFY, "GET", "/v1/push/subscriptions", token=token)[1]["items"]
    for s in subscriptions:
        call(NOTIFY, "DELETE", "/v1/push/subscriptions/" + s["id"], token=token)
    return MESSAGES / (end - start)


def push_plain(vapid_key):
    sub = call(("127.0.0.1", PUSH_PORT), "POST", "/subscriptions", {})[1]
    payload = json.dumps({"kind": "reminder", "title": "Your group is waiting for your story",
                          "body": "You have not posted this period yet: share a moment before the newsletter is put together.",
                          "url": "/groups/" + str(uuid.uuid4()), "data": {"groupId": str(uuid.uuid4()), "periodEnd": now(7200)}})
    share = [MESSAGES // SENDERS + (1 if i < MESSAGES % SENDERS else 0) for i in range(SENDERS)]

    def send(n):
        for _ in range(n):
            webpush(sub, payload, vapid_private_key=vapid_key, vapid_claims={"sub": "mailto:bench@example.com"}, ttl=7200)

    start = time.time()
    threads = [threading.Thread(target=send, args=(n,)) for n in share]
    [t.start() for t in threads]
    [t.join() for t in threads]
    end = wait_for(MESSAGES, lambda: received(sub))
    return MESSAGES / (end - start)


def stored():
    return len(os.listdir(MAILDIR)) if os.path.isdir(MAILDIR) else 0


def mail_notify():
    before = stored()
    start = time.time()
    publish("user.password_reset_requested", [
        (u, {"userId": u, "email": f"bench-{u[:8]}@example.com", "token": base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("="),
             "expiresAt": now(1800)}) for u in (str(uuid.uuid4()) for _ in range(MESSAGES))])
    end = wait_for(before + MESSAGES, stored)
    return MESSAGES / (end - start)


def mail_plain():
    before = stored()
    share = [MESSAGES // SENDERS + (1 if i < MESSAGES % SENDERS else 0) for i in range(SENDERS)]
    text = ("Someone asked to reset the password of your account. To choose a new one, open:\n\n"
            "http://127.0.0.1:8080/reset-password?token=" + "x" * 43 + "\n\nIt works once, for 30 minutes.")

    def send(n):
        with smtplib.SMTP("127.0.0.1", MAIL_PORT) as s:
            for _ in range(n):
                m = EmailMessage()
                m["From"], m["To"], m["Subject"] = "no-reply@localhost.localdomain", f"bench-{uuid.uuid4().hex[:8]}@example.com", "Reset your password"
                m["Message-ID"] = f"<{uuid.uuid4()}@localhost.localdomain>"
                m.set_content(text)
                m.add_alternative(f"<!DOCTYPE html><html><body><p>{text}</p></body></html>", subtype="html")
                s.send_message(m)

    start = time.time()
    threads = [threading.Thread(target=send, args=(n,)) for n in share]
    [t.start() for t in threads]
    [t.join() for t in threads]
    end = wait_for(before + MESSAGES, stored)
    return MESSAGES / (end - start)


def main():
    with open(os.path.join(STATE, "vapid-private-key")) as f:
        vapid_key = f.read().strip()  # the raw scalar in base64url, which pywebpush (py_vapid) takes as it is
    name = "bench" + uuid.uuid4().hex[:8]
    status, session = call(AUTH, "POST", "/v1/auth/signup", {"username": name, "email": f"{name}@example.com",
                                                               "password": "benchmark password", "fullName": "Notify Bench"})
    assert status == 201, session
    user, token = session["user"]["id"], session["accessToken"]
    key = call(NOTIFY, "GET", "/v1/push/key", token=token)[1]["publicKey"]
    server = stand_in()
    try:
        rounds = {"push notify": [], "push pywebpush": [], "mail notify": [], "mail smtplib": []}
        for r in range(RUNS):
            rounds["push notify"].append(push_notify(user, token, key))
            rounds["push pywebpush"].append(push_plain(vapid_key))
            rounds["mail notify"].append(mail_notify())
            rounds["mail smtplib"].append(mail_plain())
            say(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.0f}/s" for k, v in rounds.items()))
    finally:
        server.stdin.close()
        server.wait()
    m = {k: statistics.median(v) for k, v in rounds.items()}
    print(f"notify, {MESSAGES} deliveries a round, median of {RUNS} rounds, {SENDERS} senders each side, {datetime.now():%Y-%m-%d}:")
    print(f"  push  notify {m['push notify']:8.0f}/s   pywebpush {m['push pywebpush']:8.0f}/s   ratio {m['push notify'] / m['push pywebpush']:.2f}")
    print(f"  mail  notify {m['mail notify']:8.0f}/s   smtplib   {m['mail smtplib']:8.0f}/s   ratio {m['mail notify'] / m['mail smtplib']:.2f}")


if __name__ == "__main__":
    main()
