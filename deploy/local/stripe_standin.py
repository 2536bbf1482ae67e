#!/usr/bin/env python3
"""A stand-in for Stripe's PaymentIntents API (https://docs.stripe.com/api/payment_intents), for the tests.

    stripe_standin.py [--webhook <url> <whsec_...>] <port> <secret key>            (a test's: until its standard input closes)
    stripe_standin.py --local [--webhook <url> <whsec_...>] <port> <secret key>    (the local stack's: until SIGTERM)

It answers as Stripe does for the parts dispatch uses: form-encoded POSTs with the secret key as a bearer token;
`POST /v1/customers`, `POST /v1/payment_intents` (manual capture, confirmed at once; `customer` with
`setup_future_usage=off_session` saves the card to the customer, and `off_session=true` charges a saved card
again, refused for a card not saved to that customer, as Stripe refuses it), `.../{id}/capture`,
`.../{id}/cancel`, `POST /v1/refunds` (part or all of a succeeded intent, at most what is left of it; the refund
`succeeded` at once); errors as
`{"error": {"type", "code", "decline_code", "message"}}`. Idempotency keys as Stripe keeps them: a key seen again
with the same parameters gets the first answer back (and acts no more); with other parameters, a 400.
Stripe's test payment methods decide the outcome: `pm_card_visa` (and any other) is authorised,
`pm_card_chargeDeclined` and `pm_card_chargeDeclinedInsufficientFunds` are declined (402),
`pm_card_authenticationRequired` (Stripe's 4000 0027 6000 3184, 3-D Secure on every payment) needs its holder:
`requires_action` with `next_action` (`use_stripe_sdk`) and the intent's `client_secret`, and off-session (a
plan's renewal) a 402 `authentication_required`. `GET /v1/payment_intents/{id}` answers where an intent stands.

Webhooks, as Stripe sends them: with `--webhook <url> <secret>` (or `POST /_standin/webhook {"url", "secret"}`),
every change of an intent is POSTed to the url as an event (`payment_intent.amount_capturable_updated`,
`.requires_action`, `.payment_failed`, `.succeeded`, `.canceled`) signed with the secret (`Stripe-Signature:
t=<unix time>,v1=<hex HMAC-SHA256 of "t.body">`), a moment after the answer, retried a few times when refused.

For the tests, beside the API: `POST /_standin/slow {"seconds", "times"}` makes the next `times` calls act and only
then wait `seconds` (a provider that acted but whose answer came too late); `POST /_standin/authenticate
{"client_secret", "outcome": "succeed" | "fail"}` is the card's holder completing (or failing) 3-D Secure in the
app, as Stripe's SDK does; `GET /_standin/intents` lists what it did (each intent, each refund, how often each call
acted, and the webhooks sent with the status each got). It stops when its standard input closes.
"""
import hashlib
import hmac
import json
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.error import HTTPError, URLError
from urllib.parse import parse_qsl
from urllib.request import Request, urlopen

KEY = sys.argv[-1]
lock = threading.Lock()
intents = {}       # id -> intent
customers = {}     # id -> customer
saved = {}         # payment method -> the customer it was saved to
idempotent = {}    # key -> (params, status, body)
refunds = {}       # id -> refund
actions = []       # (call, intent id), in order
slow = {"seconds": 0.0, "times": 0}
webhook = {"url": None, "secret": None}
webhooks = []      # (event type, intent id, HTTP status or 0), in order
AUTHENTICATE = "pm_card_authenticationRequired"


def send_webhook(kind, intent):
    """Sends event `kind` about `intent` (as it is now) to the webhook url, signed, a moment later (the answer first)."""
    url, secret = webhook["url"], webhook["secret"]
    if not url or not secret:
        return
    event = {"id": "evt_" + secrets.token_hex(12), "object": "event", "type": kind, "created": int(time.time()),
             "data": {"object": json.loads(json.dumps(intent))}, "livemode": False, "api_version": "2024-06-20",
             "pending_webhooks": 1}
    body = json.dumps(event).encode()

    def deliver():
        time.sleep(0.05)
        status = 0
        for pause in (0.5, 1, 2, 0):
            t = str(int(time.time()))
            signature = hmac.new(secret.encode(), (t + ".").encode() + body, hashlib.sha256).hexdigest()
            request = Request(url, data=body, method="POST", headers={
                "Content-Type": "application/json; charset=utf-8", "Stripe-Signature": "t=%s,v1=%s" % (t, signature)})
            try:
                with urlopen(request, timeout=10) as r:
                    status = r.status
            except HTTPError as e:
                status = e.code
            except (URLError, OSError):
                status = 0
            if 200 <= status < 300 or 400 <= status < 500:
                break  # taken, or refused for good
            time.sleep(pause)
        with lock:
            webhooks.append((kind, intent["id"], status))

    threading.Thread(target=deliver, daemon=True).start()

DECLINES = {
    "pm_card_chargeDeclined": ("card_declined", "generic_decline", "Your card was declined."),
    "pm_card_chargeDeclinedInsufficientFunds": ("card_declined", "insufficient_funds", "Your card has insufficient funds."),
}


def error(status, kind, message, code=None, decline=None, intent=None):
    e = {"type": kind, "message": message}
    if code: e["code"] = code
    if decline: e["decline_code"] = decline
    if intent: e["payment_intent"] = intent
    return status, {"error": e}


def create(params):
    try:
        amount = int(params.get("amount", ""))
    except ValueError:
        return error(400, "invalid_request_error", "Invalid integer: amount", code="parameter_invalid_integer")
    if amount < 1 or not params.get("currency"):
        return error(400, "invalid_request_error", "Missing required param: amount or currency.", code="parameter_missing")
    method = params.get("payment_method", "")
    if not method.startswith("pm_"):
        return error(400, "invalid_request_error", "No such PaymentMethod: '%s'" % method, code="resource_missing")
    customer = params.get("customer")
    if customer is not None and customer not in customers:
        return error(400, "invalid_request_error", "No such customer: '%s'" % customer, code="resource_missing")
    if params.get("off_session") == "true" and (customer is None or saved.get(method) != customer):
        return error(400, "invalid_request_error", "The provided PaymentMethod was previously used with a PaymentIntent without "
                     "Customer attachment, or was detached from a Customer. It may not be used again.",
                     code="payment_method_unexpected_state")
    metadata = {k[9:-1]: v for k, v in params.items() if k.startswith("metadata[")}
    pid = "pi_" + secrets.token_hex(12)
    intent = {"id": pid, "object": "payment_intent", "amount": amount, "amount_capturable": amount,
              "client_secret": pid + "_secret_" + secrets.token_hex(12), "next_action": None, "last_payment_error": None,
              "cancellation_reason": None,
              "customer": customer, "setup_future_usage": params.get("setup_future_usage"),
              "amount_received": 0, "currency": params["currency"], "capture_method": params.get("capture_method", "automatic"),
              "payment_method": method, "metadata": metadata, "status": "requires_capture", "created": int(time.time())}
    intents[intent["id"]] = intent
    actions.append(("authorise", intent["id"]))
    if method in DECLINES:
        code, decline, message = DECLINES[method]
        intent.update(status="requires_payment_method", amount_capturable=0,
                      last_payment_error={"type": "card_error", "code": code, "decline_code": decline, "message": message})
        send_webhook("payment_intent.payment_failed", intent)
        return error(402, "card_error", message, code=code, decline=decline, intent=intent)
    if method == AUTHENTICATE and params.get("off_session") == "true":
        # Its holder is not there to authenticate: Stripe refuses, and the merchant brings them back on-session.
        message = "This payment requires authentication; bring the customer back on-session."
        intent.update(status="requires_payment_method", amount_capturable=0, last_payment_error={
            "type": "card_error", "code": "authentication_required", "decline_code": "authentication_required", "message": message})
        send_webhook("payment_intent.payment_failed", intent)
        return error(402, "card_error", message, code="authentication_required", decline="authentication_required", intent=intent)
    if method == AUTHENTICATE:
        intent.update(status="requires_action", amount_capturable=0, next_action={
            "type": "use_stripe_sdk", "use_stripe_sdk": {"type": "three_d_secure_redirect", "stripe_js": "", "source": "src_standin"}})
        send_webhook("payment_intent.requires_action", intent)
        return 200, intent
    if customer and params.get("setup_future_usage") == "off_session":
        saved[method] = customer
    send_webhook("payment_intent.amount_capturable_updated", intent)
    return 200, intent


def authenticate(params):
    """The card's holder completes (or fails) 3-D Secure in the app, by the intent's client secret."""
    secret, outcome = params.get("client_secret"), params.get("outcome", "succeed")
    intent = next((i for i in intents.values() if i["client_secret"] == secret), None)
    if intent is None or outcome not in ("succeed", "fail"):
        return error(404, "invalid_request_error", "No such payment_intent client secret.", code="resource_missing")
    # (a renewal refused for want of its holder is confirmed by them back in the app, as one waiting for them)
    back = intent["status"] == "requires_payment_method" and (intent.get("last_payment_error") or {}).get("code") == "authentication_required"
    if intent["status"] != "requires_action" and not back:
        return error(400, "invalid_request_error", "This PaymentIntent's status is %s." % intent["status"],
                     code="payment_intent_unexpected_state", intent=intent)
    if outcome == "succeed":
        intent.update(status="requires_capture", amount_capturable=intent["amount"], next_action=None)
        if intent.get("customer") and intent.get("setup_future_usage") == "off_session":
            saved[intent["payment_method"]] = intent["customer"]
        actions.append(("authenticate", intent["id"]))
        send_webhook("payment_intent.amount_capturable_updated", intent)
    else:
        intent.update(status="requires_payment_method", next_action=None, last_payment_error={
            "type": "card_error", "code": "payment_intent_authentication_failure",
            "message": "We are unable to authenticate your payment method. Please choose a different payment method and try again."})
        actions.append(("authentication_failed", intent["id"]))
        send_webhook("payment_intent.payment_failed", intent)
    return 200, intent


def create_customer(params):
    customer = {"id": "cus_" + secrets.token_hex(7), "object": "customer", "created": int(time.time()),
                "metadata": {k[9:-1]: v for k, v in params.items() if k.startswith("metadata[")}}
    customers[customer["id"]] = customer
    return 200, customer


def change(intent_id, call, params):
    intent = intents.get(intent_id)
    if intent is None:
        return error(404, "invalid_request_error", "No such payment_intent: '%s'" % intent_id, code="resource_missing")
    wanted = {"capture": "requires_capture", "cancel": None}[call]
    if call == "capture" and intent["status"] != wanted or call == "cancel" and intent["status"] in ("succeeded", "canceled"):
        return error(400, "invalid_request_error", "This PaymentIntent's status is %s." % intent["status"],
                     code="payment_intent_unexpected_state", intent=intent)
    if call == "capture":
        intent.update(status="succeeded", amount_received=intent["amount"], amount_capturable=0)
        send_webhook("payment_intent.succeeded", intent)
    else:
        was = intent["status"]
        intent.update(status="canceled", amount_capturable=0, next_action=None,
                      cancellation_reason=params.get("cancellation_reason") or ("abandoned" if was == "requires_action" else None))
        send_webhook("payment_intent.canceled", intent)
    actions.append((call, intent_id))
    return 200, intent


def refund(params):
    intent = intents.get(params.get("payment_intent", ""))
    if intent is None:
        return error(400, "invalid_request_error", "No such payment_intent: '%s'" % params.get("payment_intent", ""),
                     code="resource_missing")
    if intent["status"] != "succeeded":
        return error(400, "invalid_request_error", "This PaymentIntent does not have a successful charge to refund.",
                     code="charge_not_refundable")
    left = intent["amount_received"] - intent.get("amount_refunded", 0)
    try:
        amount = int(params.get("amount", left))
    except ValueError:
        return error(400, "invalid_request_error", "Invalid integer: amount", code="parameter_invalid_integer")
    if left <= 0:
        return error(400, "invalid_request_error", "Charge has already been refunded.", code="charge_already_refunded")
    if amount < 1 or amount > left:
        return error(400, "invalid_request_error", "Refund amount is greater than unrefunded amount on charge.", code="amount_too_large")
    if params.get("reason") not in (None, "duplicate", "fraudulent", "requested_by_customer"):
        return error(400, "invalid_request_error", "Invalid reason.", code="parameter_invalid_string")
    intent["amount_refunded"] = intent.get("amount_refunded", 0) + amount
    r = {"id": "re_" + secrets.token_hex(12), "object": "refund", "amount": amount, "currency": intent["currency"],
         "payment_intent": intent["id"], "reason": params.get("reason"), "status": "succeeded", "created": int(time.time()),
         "metadata": {k[9:-1]: v for k, v in params.items() if k.startswith("metadata[")}}
    refunds[r["id"]] = r
    actions.append(("refund", intent["id"]))
    return 200, r


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/_standin/intents":
            with lock:
                return self.answer(200, {"intents": list(intents.values()), "actions": [list(a) for a in actions],
                                         "webhooks": [list(w) for w in webhooks],
                                         "refunds": list(refunds.values())})
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) == 3 and parts[:2] == ["v1", "payment_intents"]:
            if self.headers.get("Authorization") != "Bearer " + KEY:
                return self.answer(*error(401, "invalid_request_error", "Invalid API Key provided."))
            with lock:
                intent = intents.get(parts[2])
                if intent is None:
                    return self.answer(*error(404, "invalid_request_error", "No such payment_intent: '%s'" % parts[2],
                                              code="resource_missing"))
                return self.answer(200, json.loads(json.dumps(intent)))
        self.answer(404, {"error": {"type": "invalid_request_error", "message": "Unrecognized request URL."}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode()
        if self.path == "/_standin/slow":
            with lock:
                slow.update(json.loads(raw or "{}"))
            return self.answer(200, slow)
        if self.path == "/_standin/webhook":
            with lock:
                webhook.update(json.loads(raw or "{}"))
            return self.answer(200, {"url": webhook["url"]})
        if self.path == "/_standin/authenticate":
            with lock:
                return self.answer(*authenticate(json.loads(raw or "{}")))
        if self.headers.get("Authorization") != "Bearer " + KEY:
            return self.answer(*error(401, "invalid_request_error", "Invalid API Key provided."))
        params = dict(parse_qsl(raw, keep_blank_values=True))
        key = self.headers.get("Idempotency-Key")
        parts = self.path.strip("/").split("/")
        with lock:
            if key and key in idempotent:
                seen, status, body = idempotent[key]
                if seen != (self.path, params):
                    status, body = error(400, "idempotency_error",
                                         "Keys for idempotent requests can only be used with the same parameters they were first used with.")
            else:
                if parts == ["v1", "payment_intents"]:
                    status, body = create(params)
                elif parts == ["v1", "refunds"]:
                    status, body = refund(params)
                elif parts == ["v1", "customers"]:
                    status, body = create_customer(params)
                elif len(parts) == 4 and parts[:2] == ["v1", "payment_intents"] and parts[3] in ("capture", "cancel"):
                    status, body = change(parts[2], parts[3], params)
                else:
                    status, body = error(404, "invalid_request_error", "Unrecognized request URL.")
                if key:
                    idempotent[key] = ((self.path, params), status, json.loads(json.dumps(body)))
            delay = 0.0
            if slow["times"] > 0:
                slow["times"] -= 1
                delay = float(slow["seconds"])
        if delay:
            time.sleep(delay)  # it acted; the answer comes too late
        self.answer(status, body)


def main():
    local = sys.argv[1] == "--local"
    if local:
        del sys.argv[1]
    if sys.argv[1] == "--webhook":
        webhook.update(url=sys.argv[2], secret=sys.argv[3])
        del sys.argv[1:4]
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    if local:
        return server.serve_forever()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
