#!/usr/bin/env python3
"""A stand-in for Apple's push notification service, the HTTP/2 provider API
(https://developer.apple.com/documentation/usernotifications/sending-notification-requests-to-apns), for the tests and
the local stack.

    apns_standin.py [--local] [--tls <certificate PEM> <its key PEM>] <port> <public key PEM file> <team id> <key id> <bundle ids, comma-separated>

(--local: the local stack's, until SIGTERM; else a test's, until its standard input closes.) It speaks HTTP/2 (the
`h2` package) over TLS, negotiated by ALPN as with Apple, when given a certificate (notify trusts it by
APNS_CA_FILE), and in clear text with prior knowledge (h2c) on the same port, as notify's libcurl does toward an
`http://` APNS_URL. It checks what Apple checks: `POST /3/device/<token>` with `authorization: bearer <JWT>`, the
provider token signed ES256 by the team's key (verified with its public half), `kid` the key id, `iss` the team,
`iat` less than an hour old (older: 403 ExpiredProviderToken; a bad one: 403 InvalidProviderToken); `apns-topic`
among the bundle ids (else 400 TopicDisallowed), `apns-push-type`, `apns-priority` (5 or 10), `apns-expiration`,
`apns-id` (a UUID), `apns-collapse-id` (at most 64 bytes), a JSON payload of at most 4096 bytes (413
PayloadTooLarge) with an `aps` dictionary, and a device token in hexadecimal (400 BadDeviceToken). A token it was
told is gone answers 410 `{"reason": "Unregistered", "timestamp": …}`. Accepted: 200 with `apns-id`.

Beside the API, on the same port in HTTP/1.1 (a connection that does not open with the HTTP/2 preface):
`GET /received` what it took (`notifications`: token, topic, environment, headers, payload, time), what it refused
(`refusals`), how many connections were opened and how many provider tokens were seen (`GET /received/<token>`:
`{"count"}` of one token's only); `POST /_standin/gone
{"token"}` makes a token answer 410 from then on; `POST /_standin/expire` makes the provider tokens seen so far
answer 403 ExpiredProviderToken; `POST /_standin/slow {"seconds"}` delays each answer. A path under `/sandbox`
plays Apple's sandbox host (an APNS_SANDBOX_URL of `<its URL>/sandbox`).
"""
import base64
import json
import re
import socket
import ssl
import sys
import threading
import time
import uuid

import h2.config
import h2.connection
import h2.events
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
lock = threading.Lock()
state = {"notifications": [], "refusals": [], "connections": 0, "providerTokens": set(), "expired": set(), "gone": {}, "slow": 0.0}


def b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def check_token(authorization):
    """None when the provider token is good, else Apple's reason."""
    if not authorization.startswith("bearer "):
        return "MissingProviderToken"
    parts = authorization[len("bearer "):].split(".")
    try:
        header, claims = json.loads(b64url(parts[0])), json.loads(b64url(parts[1]))
        signature = b64url(parts[2])
        if header.get("alg") != "ES256" or header.get("kid") != KEY_ID or claims.get("iss") != TEAM_ID or len(signature) != 64:
            return "InvalidProviderToken"
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
        PUBLIC_KEY.verify(der, (parts[0] + "." + parts[1]).encode(), ec.ECDSA(hashes.SHA256()))
    except (ValueError, IndexError, InvalidSignature, json.JSONDecodeError):
        return "InvalidProviderToken"
    iat = claims.get("iat")
    if not isinstance(iat, int) or iat > time.time() + 60:
        return "InvalidProviderToken"
    with lock:
        if time.time() - iat >= 3600 or authorization in state["expired"]:
            return "ExpiredProviderToken"
        state["providerTokens"].add(authorization)
    return None


def notification(method, path, headers, body):
    """Apple's answer to one request: (status, headers, body)."""
    match = re.fullmatch(r"(/sandbox)?/3/device/([^/]*)", path)
    if method != "POST" or not match:
        return refuse(405 if match else 404, "MethodNotAllowed" if match else "BadPath")
    reason = check_token(headers.get("authorization", ""))
    if reason:
        return refuse(403, reason)
    token = match.group(2)
    if not re.fullmatch(r"[0-9a-fA-F]{64,200}", token):
        return refuse(400, "BadDeviceToken")
    if headers.get("apns-topic") not in TOPICS:
        return refuse(400, "TopicDisallowed" if headers.get("apns-topic") else "MissingTopic")
    if headers.get("apns-push-type") not in ("alert", "background"):
        return refuse(400, "InvalidPushType")
    if headers.get("apns-priority", "10") not in ("5", "10"):
        return refuse(400, "BadPriority")
    if not re.fullmatch(r"\d+", headers.get("apns-expiration", "0")):
        return refuse(400, "BadExpirationDate")
    apns_id = headers.get("apns-id") or str(uuid.uuid4())
    try:
        uuid.UUID(apns_id)
    except ValueError:
        return refuse(400, "BadMessageId")
    if len(headers.get("apns-collapse-id", "").encode()) > 64:
        return refuse(400, "BadCollapseId")
    if len(body) > 4096:
        return refuse(413, "PayloadTooLarge")
    try:
        payload = json.loads(body)
        assert isinstance(payload, dict) and isinstance(payload.get("aps"), dict)
    except (ValueError, AssertionError):
        return refuse(400, "PayloadEmpty" if not body else "BadPayload")
    with lock:
        gone = state["gone"].get(token.lower())
    if gone:
        return refuse(410, "Unregistered", timestamp=gone)
    with lock:
        state["notifications"].append({"token": token.lower(), "topic": headers.get("apns-topic"), "payload": payload,
                                       "environment": "sandbox" if match.group(1) else "production",
                                       "headers": {k: v for k, v in headers.items() if k.startswith("apns-")},
                                       "at": time.time()})
    return 200, {"apns-id": apns_id}, b""


def refuse(status, reason, timestamp=None):
    body = {"reason": reason}
    if timestamp is not None:
        body["timestamp"] = timestamp
    with lock:
        state["refusals"].append({"status": status, "reason": reason})
    return status, {"apns-id": str(uuid.uuid4()), "content-type": "application/json"}, json.dumps(body).encode()


def serve_h2(sock, first):
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    streams = {}
    data = first
    while data:
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                streams[event.stream_id] = (dict(event.headers), bytearray())
            elif isinstance(event, h2.events.DataReceived):
                streams[event.stream_id][1].extend(event.data)
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                headers, body = streams.pop(event.stream_id)
                if state["slow"]:
                    time.sleep(state["slow"])
                status, extra, answer = notification(headers.get(":method"), headers.get(":path", ""), headers, bytes(body))
                conn.send_headers(event.stream_id, [(":status", str(status))] + list(extra.items()) + [("content-length", str(len(answer)))],
                                  end_stream=not answer)
                if answer:
                    conn.send_data(event.stream_id, answer, end_stream=True)
            elif isinstance(event, h2.events.ConnectionTerminated):
                sock.sendall(conn.data_to_send())
                return
        sock.sendall(conn.data_to_send())
        data = sock.recv(65535)


def serve_http1(sock, first):
    data = first
    while b"\r\n\r\n" not in data:
        more = sock.recv(65535)
        if not more:
            return
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path = lines[0].split(" ")[:2]
    length = next((int(l.split(":", 1)[1]) for l in lines[1:] if l.lower().startswith("content-length:")), 0)
    while len(body) < length:
        body += sock.recv(65535)
    status, answer = 200, {}
    with lock:
        if method == "GET" and path.startswith("/received/"):  # how many a token got: a cheap poll for a benchmark
            token = path[len("/received/"):].lower()
            answer = {"count": sum(1 for n in state["notifications"] if n["token"] == token)}
        elif method == "GET" and path == "/received":
            answer = {"notifications": state["notifications"], "refusals": state["refusals"], "connections": state["connections"],
                      "providerTokens": len(state["providerTokens"])}
        elif method == "POST" and path == "/_standin/gone":
            state["gone"][json.loads(body)["token"].lower()] = int(time.time() * 1000)
        elif method == "POST" and path == "/_standin/expire":
            state["expired"] |= state["providerTokens"]
        elif method == "POST" and path == "/_standin/slow":
            state["slow"] = float(json.loads(body)["seconds"])
        else:
            status, answer = 404, {"reason": "BadPath"}
        text = json.dumps(answer).encode()
    sock.sendall(b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % (status, len(text)) + text)


def serve(sock):
    try:
        first = sock.recv(65535, socket.MSG_PEEK)
        if TLS and first[:1] == b"\x16":  # a TLS ClientHello: HTTP/2 negotiated by ALPN, as with Apple
            sock = TLS.wrap_socket(sock, server_side=True)
            if sock.selected_alpn_protocol() != "h2":
                return
            first = sock.recv(65535)
        else:
            first = sock.recv(65535)
        if PREFACE.startswith(first[:len(PREFACE)]) and first:
            with lock:
                state["connections"] += 1
            serve_h2(sock, first)
        else:
            serve_http1(sock, first)
    except (OSError, ValueError, KeyError) as error:
        print("apns stand-in: connection ended:", error, file=sys.stderr)
    finally:
        sock.close()


def main():
    global PUBLIC_KEY, TEAM_ID, KEY_ID, TOPICS, TLS
    local = sys.argv[1] == "--local"
    if local:
        del sys.argv[1]
    TLS = None
    if sys.argv[1] == "--tls":
        TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        TLS.load_cert_chain(sys.argv[2], sys.argv[3])
        TLS.set_alpn_protocols(["h2"])
        del sys.argv[1:4]
    port, key_file, TEAM_ID, KEY_ID, topics = sys.argv[1:6]
    with open(key_file, "rb") as f:
        PUBLIC_KEY = serialization.load_pem_public_key(f.read())
    TOPICS = set(t for t in topics.split(",") if t)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(port)))
    listener.listen(64)

    def accept():
        while True:
            sock, _ = listener.accept()
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=serve, args=(sock,), daemon=True).start()

    if local:
        return accept()
    threading.Thread(target=accept, daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
