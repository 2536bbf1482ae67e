#!/usr/bin/env python3
"""A stand-in for Stripe's PaymentIntents API (https://docs.stripe.com/api/payment_intents), for the tests.

    stripe_standin.py <port> <secret key>            (a test's: until its standard input closes)
    stripe_standin.py --local <port> <secret key>    (the local stack's: until SIGTERM)

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
`pm_card_authenticationRequired` needs its holder (`requires_action`).

For the tests, beside the API: `POST /_standin/slow {"seconds", "times"}` makes the next `times` calls act and only
then wait `seconds` (a provider that acted but whose answer came too late); `GET /_standin/intents` lists what it
did (each intent, each refund, and how often each call acted). It stops when its standard input closes.
"""
import json
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

KEY = sys.argv[-1]
lock = threading.Lock()
intents = {}       # id -> intent
customers = {}     # id -> customer
saved = {}         # payment method -> the customer it was saved to
idempotent = {}    # key -> (params, status, body)
refunds = {}       # id -> refund
actions = []       # (call, intent id), in order
slow = {"seconds": 0.0, "times": 0}

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
    intent = {"id": "pi_" + secrets.token_hex(12), "object": "payment_intent", "amount": amount, "amount_capturable": amount,
              "customer": customer, "setup_future_usage": params.get("setup_future_usage"),
              "amount_received": 0, "currency": params["currency"], "capture_method": params.get("capture_method", "automatic"),
              "payment_method": method, "metadata": metadata, "status": "requires_capture", "created": int(time.time())}
    intents[intent["id"]] = intent
    actions.append(("authorise", intent["id"]))
    if method in DECLINES:
        code, decline, message = DECLINES[method]
        intent.update(status="requires_payment_method", amount_capturable=0,
                      last_payment_error={"code": code, "decline_code": decline, "message": message})
        return error(402, "card_error", message, code=code, decline=decline, intent=intent)
    if method == "pm_card_authenticationRequired":
        intent.update(status="requires_action", amount_capturable=0)
    elif customer and params.get("setup_future_usage") == "off_session":
        saved[method] = customer
    return 200, intent


def create_customer(params):
    customer = {"id": "cus_" + secrets.token_hex(7), "object": "customer", "created": int(time.time()),
                "metadata": {k[9:-1]: v for k, v in params.items() if k.startswith("metadata[")}}
    customers[customer["id"]] = customer
    return 200, customer


def change(intent_id, call):
    intent = intents.get(intent_id)
    if intent is None:
        return error(404, "invalid_request_error", "No such payment_intent: '%s'" % intent_id, code="resource_missing")
    wanted = {"capture": "requires_capture", "cancel": None}[call]
    if call == "capture" and intent["status"] != wanted or call == "cancel" and intent["status"] in ("succeeded", "canceled"):
        return error(400, "invalid_request_error", "This PaymentIntent's status is %s." % intent["status"],
                     code="payment_intent_unexpected_state", intent=intent)
    if call == "capture":
        intent.update(status="succeeded", amount_received=intent["amount"], amount_capturable=0)
    else:
        intent.update(status="canceled", amount_capturable=0)
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
                                         "refunds": list(refunds.values())})
        self.answer(404, {"error": {"type": "invalid_request_error", "message": "Unrecognized request URL."}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode()
        if self.path == "/_standin/slow":
            with lock:
                slow.update(json.loads(raw or "{}"))
            return self.answer(200, slow)
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
                    status, body = change(parts[2], parts[3])
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
