#!/usr/bin/env python3
"""A stand-in for Firebase Cloud Messaging's HTTP v1 API and Google's OAuth 2.0 token endpoint, for the tests and
the local stack (https://firebase.google.com/docs/cloud-messaging/send/v1-api, RFC 7523).

    fcm_standin.py <port> <public key PEM file> <client email> <project id>
    fcm_standin.py --local <port> ...        (the local stack's: until SIGTERM; a test's: until stdin closes)

`POST /token` takes `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>` as Google does: the
assertion signed RS256 by the service account's key (verified with its public half), `iss` the account's e-mail,
`scope` with `https://www.googleapis.com/auth/firebase.messaging`, `aud` this endpoint, `exp` at most an hour past
`iat`; it answers `{"access_token", "expires_in": 3599, "token_type": "Bearer"}` (else 400 `invalid_grant`).
`POST /v1/projects/<project>/messages:send` takes `{"message": {"token", "android", "data", …}}` with a token it
issued (else 401 UNAUTHENTICATED), checks `android.priority` (normal, high), `android.ttl` ("<seconds>s") and that
`data` holds strings (else 400 INVALID_ARGUMENT); a registration token it was told is gone answers 404 NOT_FOUND
with the FcmError `UNREGISTERED`. Accepted: `{"name": "projects/<project>/messages/<id>"}`.

Beside the API: `GET /received` what it took (`messages`), what it refused (`refusals`), how many tokens it
issued (`exchanges`); `POST /_standin/gone {"token"}` makes a registration token unregistered.
"""
import base64
import json
import re
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
lock = threading.Lock()
state = {"messages": [], "refusals": [], "exchanges": 0, "issued": set(), "gone": set()}


def b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def fcm_error(status, code, message, error_code=None):
    error = {"code": status, "message": message, "status": code}
    if error_code:
        error["details"] = [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": error_code}]
    with lock:
        state["refusals"].append({"status": status, "reason": error_code or code, "message": message})
    return status, {"error": error}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        text = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def do_GET(self):
        if self.path != "/received":
            return self.answer(404, {})
        with lock:
            self.answer(200, {"messages": state["messages"], "refusals": state["refusals"], "exchanges": state["exchanges"]})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/_standin/gone":
            with lock:
                state["gone"].add(json.loads(body)["token"])
            return self.answer(200, {})
        if self.path == "/token":
            return self.answer(*self.exchange(dict(parse_qsl(body.decode()))))
        if self.path == "/v1/projects/%s/messages:send" % PROJECT:
            return self.answer(*self.send_message(body))
        self.answer(*fcm_error(404, "NOT_FOUND", "Requested entity was not found."))

    def exchange(self, form):
        def refuse(why):
            with lock:
                state["refusals"].append({"status": 400, "reason": "invalid_grant", "message": why})
            return 400, {"error": "invalid_grant", "error_description": why}
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return refuse("grant_type is not jwt-bearer")
        try:
            parts = form["assertion"].split(".")
            header, claims = json.loads(b64url(parts[0])), json.loads(b64url(parts[1]))
            if header.get("alg") != "RS256":
                return refuse("not RS256")
            PUBLIC_KEY.verify(b64url(parts[2]), (parts[0] + "." + parts[1]).encode(), padding.PKCS1v15(), hashes.SHA256())
        except (KeyError, ValueError, IndexError, InvalidSignature):
            return refuse("Invalid JWT Signature.")
        now = time.time()
        if claims.get("iss") != EMAIL:
            return refuse("iss is not the service account")
        if SCOPE not in str(claims.get("scope", "")).split():
            return refuse("scope lacks firebase.messaging")
        if claims.get("aud") != "http://127.0.0.1:%d/token" % PORT:
            return refuse("aud is not this token endpoint")
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int) or not isinstance(exp, int) or exp - iat > 3600 or exp < now or iat > now + 60:
            return refuse("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
        token = "ya29.standin-" + secrets.token_urlsafe(24)
        with lock:
            state["issued"].add(token)
            state["exchanges"] += 1
        return 200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}

    def send_message(self, body):
        authorization = self.headers.get("Authorization", "")
        with lock:
            known = authorization.startswith("Bearer ") and authorization[7:] in state["issued"]
        if not known:
            return fcm_error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
        try:
            message = json.loads(body)["message"]
            token = message["token"]
            android = message.get("android", {})
            assert isinstance(token, str) and token
            assert android.get("priority", "normal") in ("normal", "high")
            assert re.fullmatch(r"\d+(\.\d{1,9})?s", android.get("ttl", "0s"))
            assert all(isinstance(v, str) for v in message.get("data", {}).values())
        except (KeyError, ValueError, TypeError, AssertionError):
            return fcm_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        with lock:
            if token in state["gone"]:
                gone = True
            else:
                gone = False
                name = "projects/%s/messages/%d" % (PROJECT, len(state["messages"]) + 1)
                state["messages"].append({"message": message, "at": time.time()})
        if gone:
            return fcm_error(404, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED")
        return 200, {"name": name}


def main():
    global PUBLIC_KEY, EMAIL, PROJECT, PORT
    local = sys.argv[1] == "--local"
    if local:
        del sys.argv[1]
    port, key_file, EMAIL, PROJECT = sys.argv[1:5]
    PORT = int(port)
    with open(key_file, "rb") as f:
        PUBLIC_KEY = serialization.load_pem_public_key(f.read())
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    server.daemon_threads = True
    if local:
        return server.serve_forever()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
