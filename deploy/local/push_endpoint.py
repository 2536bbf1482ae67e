"""A Web Push service stand-in on 127.0.0.1: makes subscriptions as a browser would (a P-256 key pair and an auth
secret of its own), and for each message posted to one, checks what a real push service checks (the VAPID JWT of
RFC 8292, signed by the key the subscription was made for, for this origin, not expired; TTL and aes128gcm) and
decrypts the payload with the subscription's private key (RFC 8291, with http_ece) as the browser would.

    push_endpoint.py PORT     prints "ready" once it listens; stops when its standard input closes

    POST /subscriptions            {"applicationServerKey": k, "answer": 201, "retryAfter": s, "delay": s}
                                   -> the PushSubscription JSON a browser gives ({endpoint, expirationTime, keys})
    PATCH /subscriptions/ID        change how its endpoint answers ({"answer", "retryAfter", "delay"})
    POST /push/ID                  a message (201, or the answer set; 400/401/403 for one a push service refuses)
    GET /messages/ID               what reached the subscription, decrypted, the oldest first
    GET /stats                     {"received": n, "refused": n, "reasons": [...]}
"""
import base64
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64d(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64e(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


lock = threading.Lock()
subscriptions = {}  # id -> {"key", "auth", "applicationServerKey", "answer", "retryAfter", "delay", "messages"}
stats = {"received": 0, "refused": 0, "reasons": []}


class Refused(Exception):
    def __init__(self, status, reason):
        super().__init__(reason)
        self.status = status


def check_vapid(header, origin, expected_key):
    """The sender's public key, when the Authorization header is a valid VAPID one for `origin`."""
    if not header.startswith("vapid "):
        raise Refused(401, "no VAPID authorization")
    fields = dict(part.strip().split("=", 1) for part in header[len("vapid "):].split(","))
    token, key = fields.get("t", ""), fields.get("k", "")
    if expected_key and key != expected_key:
        raise Refused(403, "signed by another key than the subscription's applicationServerKey")
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b64d(key))
    head, claims, signature = token.split(".")
    if json.loads(b64d(head)) != {"typ": "JWT", "alg": "ES256"}:
        raise Refused(401, "the JWT header is not ES256")
    raw = b64d(signature)
    if len(raw) != 64:
        raise Refused(401, "the signature is not 64 bytes")
    try:
        public.verify(encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")),
                      f"{head}.{claims}".encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise Refused(401, "the VAPID signature does not verify")
    body = json.loads(b64d(claims))
    now = time.time()
    if body.get("aud") != origin:
        raise Refused(401, f"aud {body.get('aud')!r} is not {origin!r}")
    if not (now < body.get("exp", 0) <= now + 86400 + 60):
        raise Refused(401, "exp is not within the next 24 hours")
    if not str(body.get("sub", "")).startswith(("mailto:", "https:")):
        raise Refused(401, "sub is not a mailto: or https: contact")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body=None, headers=()):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def do_GET(self):
        parts = self.path.strip("/").split("/")
        with lock:
            if parts == ["stats"]:
                return self.answer(200, stats)
            if len(parts) == 2 and parts[0] == "messages" and parts[1] in subscriptions:
                return self.answer(200, subscriptions[parts[1]]["messages"])
        self.answer(404, {"error": "no such thing"})

    def do_PATCH(self):
        parts = self.path.strip("/").split("/")
        change = json.loads(self.body() or b"{}")
        with lock:
            if len(parts) == 2 and parts[0] == "subscriptions" and parts[1] in subscriptions:
                subscriptions[parts[1]].update({k: change[k] for k in ("answer", "retryAfter", "delay") if k in change})
                return self.answer(204)
        self.answer(404, {"error": "no such subscription"})

    def do_POST(self):
        parts = self.path.strip("/").split("/")
        body = self.body()
        if parts == ["subscriptions"]:
            options = json.loads(body or b"{}")
            key = ec.generate_private_key(ec.SECP256R1())
            auth = os.urandom(16)
            ident = b64e(os.urandom(12))
            with lock:
                subscriptions[ident] = {"key": key, "auth": auth, "applicationServerKey": options.get("applicationServerKey"),
                                        "answer": options.get("answer", 201), "retryAfter": options.get("retryAfter"),
                                        "delay": options.get("delay", 0), "messages": []}
            point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
            return self.answer(201, {"endpoint": f"http://127.0.0.1:{self.server.server_port}/push/{ident}", "expirationTime": None,
                                     "keys": {"p256dh": b64e(point), "auth": b64e(auth)}})
        if len(parts) == 2 and parts[0] == "push":
            with lock:
                sub = subscriptions.get(parts[1])
            if sub is None:
                return self.answer(404, {"error": "no such subscription"})
            if sub["delay"]:
                time.sleep(sub["delay"])
            if sub["answer"] != 201:
                headers = [("Retry-After", str(sub["retryAfter"]))] if sub["retryAfter"] is not None else []
                return self.answer(sub["answer"], {"error": "as set"}, headers)
            try:
                if self.headers.get("Content-Encoding") != "aes128gcm":
                    raise Refused(400, "Content-Encoding is not aes128gcm")
                ttl = self.headers.get("TTL")
                if ttl is None or not ttl.isdigit():
                    raise Refused(400, "no TTL")
                urgency = self.headers.get("Urgency", "normal")
                if urgency not in ("very-low", "low", "normal", "high"):
                    raise Refused(400, "Urgency is not one of RFC 8030's")
                if len(body) > 4096:
                    raise Refused(413, "over 4096 bytes")
                check_vapid(self.headers.get("Authorization", ""), f"http://127.0.0.1:{self.server.server_port}",
                            sub["applicationServerKey"])
                plain = http_ece.decrypt(body, private_key=sub["key"], auth_secret=sub["auth"], version="aes128gcm")
            except Refused as refused:
                with lock:
                    stats["refused"] += 1
                    stats["reasons"].append(str(refused))
                return self.answer(refused.status, {"error": str(refused)})
            except Exception as error:  # a payload that does not decrypt
                with lock:
                    stats["refused"] += 1
                    stats["reasons"].append(f"undecryptable: {error!r}")
                return self.answer(400, {"error": "the payload does not decrypt"})
            try:
                payload = json.loads(plain)
            except ValueError:
                payload = plain.decode(errors="replace")
            with lock:
                stats["received"] += 1
                sub["messages"].append({"payload": payload, "ttl": int(ttl), "urgency": urgency, "topic": self.headers.get("Topic"),
                                        "receivedAt": time.time()})
            return self.answer(201, None, [("Location", f"/messages/{parts[1]}")])
        self.answer(404, {"error": "no such thing"})


def main():
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
