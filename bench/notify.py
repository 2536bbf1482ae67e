"""notify's deliveries per second beside a plain client's, interleaved round by round (run by bench/notify.sh).

Each round:
  1. push: MESSAGES reminder.due events for one person with one registered device; deliveries/s from the first
     event published to the last message the local push service (deploy/local/push_endpoint.py: VAPID checked,
     payload decrypted) accepted; beside it, pywebpush sending as many messages to the same kind of endpoint from
     SENDERS threads (notify's PUSH_SENDERS), each signing (VAPID) and encrypting (aes128gcm) its own;
  2. APNs: MESSAGES reminder.due events for one person with one iPhone registered; deliveries/s from the first event
     published to the last notification the stack's APNs stand-in (deploy/local/apns_standin.py: HTTP/2 over TLS,
     the provider token's ES256 signature checked) accepted; beside it, a plain HTTP/2 client (the `h2` package)
     sending as many requests from SENDERS threads, each over a TLS connection of its own kept open, one request in
     flight at a time, with a provider token signed once (cryptography), as notify's sender loops do;
  3. mail: MESSAGES user.password_reset_requested events, one person each; deliveries/s from the first published to
     the last message stored by the stack's mail sink (aiosmtpd); beside it, Python's smtplib sending as many
     multipart messages of the same size from SENDERS threads, a connection each, to the same sink.
Prints the medians of RUNS rounds and notify's ratio to the plain client (above 1: notify is faster).
"""
import base64
import http.client
import json
import os
import smtplib
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from email.message import EmailMessage

import h2.config
import h2.connection
import h2.events
from confluent_kafka import Producer
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from pywebpush import webpush

BROKERS = os.environ["KAFKA_BROKERS"]
MESSAGES = int(os.environ.get("MESSAGES", "500"))
RUNS = int(os.environ.get("RUNS", "3"))
SENDERS = int(os.environ.get("SENDERS", "4"))
STATE = os.environ["STATE"]
ROOT = os.environ["ROOT"]
PUSH_PORT = int(os.environ.get("PUSH_PORT", "8097"))
MAIL_PORT = int(os.environ.get("MAIL_PORT", "2525"))
APNS_PORT = int(os.environ.get("APNS_PORT", "12112"))
NATIVE = os.path.join(STATE, "native-push")  # the stand-ins' keys and certificate, as deploy/local/stack made them
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


def apns_received(device):
    return call(("127.0.0.1", APNS_PORT), "GET", "/received/" + device)[1]["count"]


def apns_notify(user, token):
    device = os.urandom(32).hex()
    status, body = call(NOTIFY, "POST", "/v1/push/devices", {"platform": "apns", "token": device, "app": "tapestry"}, token)
    assert status == 201, body
    start = time.time()
    publish("reminder.due", [(user, {"userId": user, "groupId": str(uuid.uuid4()), "reason": "no_story_in_period",
                                     "periodStart": now(-3600), "periodEnd": now(7200)}) for _ in range(MESSAGES)])
    end = wait_for(MESSAGES, lambda: apns_received(device))
    call(NOTIFY, "DELETE", "/v1/push/devices/" + body["id"], token=token)  # the next round's device is the only one
    return MESSAGES / (end - start)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def provider_token():
    """The ES256 JWT APNs takes, signed by the stack's key (its team and key ids), once per run as notify signs it."""
    with open(os.path.join(NATIVE, "apns-key.pem"), "rb") as f:
        key = serialization.load_pem_private_key(f.read(), None)
    signing_input = b64url(json.dumps({"alg": "ES256", "kid": "LOCALKEY01"}).encode()) + "." + \
        b64url(json.dumps({"iss": "LOCALTEAM1", "iat": int(time.time())}).encode())
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


class HTTP2Client:
    """One TLS connection to the APNs stand-in, HTTP/2 by ALPN, kept open; one request at a time."""

    def __init__(self):
        context = ssl.create_default_context(cafile=os.path.join(NATIVE, "tls.pem"))
        context.set_alpn_protocols(["h2"])
        self.sock = context.wrap_socket(socket.create_connection(("127.0.0.1", APNS_PORT)), server_hostname="127.0.0.1")
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())

    def post(self, path, headers, body):
        stream = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream, [(":method", "POST"), (":scheme", "https"), (":authority", f"127.0.0.1:{APNS_PORT}"),
                                        (":path", path)] + headers)
        self.conn.send_data(stream, body, end_stream=True)
        self.sock.sendall(self.conn.data_to_send())
        status = None
        while True:
            data = self.sock.recv(65535)
            if not data:
                raise SystemExit("the APNs stand-in closed the connection")
            for event in self.conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream:
                    status = int(dict(event.headers)[":status"])
                elif isinstance(event, h2.events.DataReceived):
                    self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream:
                    self.sock.sendall(self.conn.data_to_send())
                    return status
            self.sock.sendall(self.conn.data_to_send())

    def close(self):
        self.sock.close()


def apns_plain():
    device = os.urandom(32).hex()
    token = provider_token()
    share = [MESSAGES // SENDERS + (1 if i < MESSAGES % SENDERS else 0) for i in range(SENDERS)]
    clients = [HTTP2Client() for _ in share]  # connected before the clock starts, as notify's are

    def send(client, n):
        for _ in range(n):
            group = str(uuid.uuid4())
            payload = {"aps": {"alert": {"title": "Your group is waiting for your story", "title-loc-key": "reminder.title",
                                         "body": "You have not posted this period yet: share a moment before the newsletter is put together.",
                                         "loc-key": "reminder.body", "loc-args": []}, "sound": "default", "thread-id": group},
                       "kind": "reminder", "url": "/groups/" + group, "data": {"groupId": group, "periodEnd": now(7200)}}
            headers = [("authorization", "bearer " + token), ("apns-topic", "com.example.tapestry"), ("apns-push-type", "alert"),
                       ("apns-priority", "5"), ("apns-expiration", str(int(time.time()) + 7200)), ("apns-id", str(uuid.uuid4())),
                       ("apns-collapse-id", "reminder" + group.replace("-", "")[:24]), ("content-type", "application/json")]
            status = client.post("/3/device/" + device, headers, json.dumps(payload, separators=(",", ":")).encode())
            assert status == 200, status

    start = time.time()
    threads = [threading.Thread(target=send, args=(c, n)) for c, n in zip(clients, share)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    end = wait_for(MESSAGES, lambda: apns_received(device))
    for c in clients:
        c.close()
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
        rounds = {"push notify": [], "push pywebpush": [], "apns notify": [], "apns h2": [], "mail notify": [], "mail smtplib": []}
        for r in range(RUNS):
            rounds["push notify"].append(push_notify(user, token, key))
            rounds["push pywebpush"].append(push_plain(vapid_key))
            rounds["apns notify"].append(apns_notify(user, token))
            rounds["apns h2"].append(apns_plain())
            rounds["mail notify"].append(mail_notify())
            rounds["mail smtplib"].append(mail_plain())
            say(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.0f}/s" for k, v in rounds.items()))
    finally:
        server.stdin.close()
        server.wait()
    m = {k: statistics.median(v) for k, v in rounds.items()}
    print(f"notify, {MESSAGES} deliveries a round, median of {RUNS} rounds, {SENDERS} senders each side, {datetime.now():%Y-%m-%d}:")
    print(f"  push  notify {m['push notify']:8.0f}/s   pywebpush {m['push pywebpush']:8.0f}/s   ratio {m['push notify'] / m['push pywebpush']:.2f}")
    print(f"  apns  notify {m['apns notify']:8.0f}/s   h2        {m['apns h2']:8.0f}/s   ratio {m['apns notify'] / m['apns h2']:.2f}")
    print(f"  mail  notify {m['mail notify']:8.0f}/s   smtplib   {m['mail smtplib']:8.0f}/s   ratio {m['mail notify'] / m['mail smtplib']:.2f}")


if __name__ == "__main__":
    main()
