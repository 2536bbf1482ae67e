"""The smoke scenario of deploy/containers/check, through the gateway's published port alone (the one origin).

  smoke.py write STATE_FILE   the demo catalogue served, sign-in with Google on; sign up a sender and a courier, a group and a story in it, the courier online and a parcel
                              offered to them; then read user.registered, story.created, parcel.created and
                              parcel.status from the broker with a client outside the containers
  smoke.py read STATE_FILE    after a restart of the whole stack: the sender logs in and reads the story and the
                              parcel's history with its offer (what PostgreSQL's volume kept)
Exits 1 with the reason when something a user would see is wrong.
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid

# One origin for every service: the gateway routes each path to the service that serves it.
AUTH = STORIES = DISPATCH = CURATION = "http://127.0.0.1:8080"
# A real 8 × 8 JPEG (uploads are decoded and re-encoded, so bytes that only look like one are refused).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "local", "document.jpg"), "rb") as f:
    JPEG = f.read()
PASSWORD = "correct horse battery"


def fail(message):
    raise SystemExit(f"smoke: {message}")


def call(method, url, body=None, token=None, raw=None, content_type="application/json", expect=(200, 201)):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", content_type)
    if token:
        request.add_header("Authorization", "Bearer " + token)
    started = time.time()
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read()
    except OSError as error:  # a timeout or a refused connection: say which request, after how long
        fail(f"{method} {url}: no answer ({error}) after {time.time() - started:.1f} s")
    if time.time() - started > 5:
        print(f"smoke: slow: {method} {url} took {time.time() - started:.1f} s", file=sys.stderr, flush=True)
    if status not in expect:
        fail(f"{method} {url} answered {status}: {text[:300]!r}")
    return json.loads(text) if text else None


def signup(prefix):
    name = prefix + uuid.uuid4().hex[:10]
    body = call("POST", AUTH + "/v1/auth/signup", {"username": name, "email": name + "@example.com",
                                                   "password": PASSWORD, "fullName": name})
    return name, body["user"]["id"], body["accessToken"]


def wait_for(what, condition, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    fail(f"{what} did not happen within {timeout} s")


def offered(parcel_id, courier):
    """The parcel as the courier's offer (before the offer the courier may not see it at all)."""
    page = call("GET", DISPATCH + "/v1/parcels?role=courier&status=offered", token=courier)
    return next((p for p in page["items"] if p["id"] == parcel_id), None)


def write(state_file):
    subjects = call("GET", CURATION + "/v1/subjects")
    if not subjects.get("items"):
        fail(f"curation serves no subjects: the catalogue job imported nothing ({subjects})")
    google = call("POST", AUTH + "/v1/auth/google", {"idToken": "not.a.token"}, expect=(401,))
    print(f"smoke: the demo catalogue is served ({len(subjects['items'])} subjects); sign-in with Google is on "
          f"({google['error']['code']} for a bad ID token)", flush=True)
    sender_name, sender_id, sender = signup("smoke")
    _, courier_id, courier = signup("courier")
    group = call("POST", STORIES + "/v1/groups", {"name": "smoke test"}, sender)
    story = call("POST", STORIES + "/v1/stories", {"text": "written in a container", "groupIds": [group["id"]]}, sender)
    call("POST", DISPATCH + "/v1/couriers/me", {"vehicle": "bike", "capacity": 2}, courier)
    # Vetted before anything is offered to them: the courier applies with their documents, the operator approves.
    documents = {purpose: call("POST", DISPATCH + "/v1/dispatch/media?purpose=" + purpose, raw=JPEG, token=courier,
                               content_type="image/jpeg")["id"] for purpose in ("identity", "vehicle")}
    call("POST", DISPATCH + "/v1/couriers/me/application", {
        "legalName": "Smoke Courier", "phone": "+40 700 000 001", "vehicle": "bike", "consent": True,
        "identityPhotoMediaId": documents["identity"], "vehiclePhotoMediaId": documents["vehicle"]}, courier)
    call("POST", DISPATCH + f"/v1/operator/couriers/{courier_id}/approve", {"operator": "smoke"},
         os.environ["DISPATCH_OPERATOR_TOKEN"])
    call("PUT", DISPATCH + "/v1/couriers/me/status", {"online": True}, courier)
    call("PUT", DISPATCH + "/v1/couriers/me/location", {"lat": 44.4268, "lon": 26.1025}, courier)
    media = call("POST", DISPATCH + "/v1/dispatch/media", raw=JPEG, token=sender, content_type="image/jpeg")
    parcel = call("POST", DISPATCH + "/v1/parcels", {
        "pickup": {"lat": 44.4270, "lon": 26.1030, "address": "Piata Universitatii 1"},
        "dropoff": {"lat": 44.4350, "lon": 26.1100, "address": "Strada Polona 2"},
        "recipient": {"name": "R", "phone": "+40 700 000 000"}, "service": "express", "paymentMethod": "cash",
        "documentPhotoMediaId": media["id"]}, sender)
    offer = wait_for("the offer to the courier", lambda: offered(parcel["id"], courier))
    if offer.get("offeredTo") != courier_id:
        fail(f"the parcel was offered to {offer.get('offeredTo')}, not to the only courier online")
    if "documentPhotoUrl" in offer:
        fail("an offer shows the document's photo before the courier accepted")
    # Once they accept, the courier sees what to collect: the photo (the upload re-encoded, a JPEG still) loads by its
    # signed URL, through the gateway, without a token.
    call("POST", f"{DISPATCH}/v1/parcels/{parcel['id']}/accept", token=courier)
    url = call("GET", f"{DISPATCH}/v1/parcels/{parcel['id']}", token=courier).get("documentPhotoUrl", "")
    with urllib.request.urlopen(url, timeout=30) as response:
        if response.status != 200 or response.headers.get("Content-Type") != "image/jpeg" or not response.read().startswith(b"\xff\xd8\xff"):
            fail(f"the document photo did not load by its URL {url}")
    print(f"smoke: sign-up, group, story, courier online, parcel {parcel['id']} offered to them and accepted", flush=True)

    expected = {("user.registered", sender_id), ("user.registered", courier_id), ("story.created", story["id"]),
                ("parcel.created", parcel["id"]), ("parcel.status", parcel["id"])}
    seen = read_events(expected)
    missing = expected - seen
    if missing:
        fail(f"events not on the broker: {sorted(missing)}")
    print(f"smoke: read {len(expected)} expected events from the broker outside the containers", flush=True)
    with open(state_file, "w") as f:
        json.dump({"username": sender_name, "story": story["id"], "parcel": parcel["id"]}, f)


def read_events(expected, timeout=30):
    """Which of the expected (type, subject) pairs are on their topics: read within `timeout` seconds."""
    from confluent_kafka import Consumer  # the stack's venv has it; `read` needs no broker
    consumer = Consumer({"bootstrap.servers": "kafka:9092", "group.id": "smoke-" + uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000})  # Tansu holds a join for half of it
    consumer.subscribe(sorted({topic for topic, _ in expected}))
    seen = set()
    deadline = time.time() + timeout
    try:
        while time.time() < deadline and seen != expected:
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            event = json.loads(message.value())
            if message.key().decode() != event["subject"]:
                fail(f"{event['type']}: key {message.key()!r} is not the subject {event['subject']}")
            if (event["type"], event["subject"]) in expected:
                seen.add((event["type"], event["subject"]))
    finally:
        consumer.close()
    return seen


def read(state_file):
    with open(state_file) as f:
        state = json.load(f)
    login = call("POST", AUTH + "/v1/auth/login", {"username": state["username"], "password": PASSWORD})
    token = login["accessToken"]
    story = call("GET", f"{STORIES}/v1/stories/{state['story']}", token=token)
    if story.get("text") != "written in a container":
        fail(f"the story came back as {story}")
    parcel = call("GET", f"{DISPATCH}/v1/parcels/{state['parcel']}", token=token)
    history = [step.get("to") for step in parcel.get("history", [])]
    if "offered" not in history:
        fail(f"the parcel's history lost its offer: {history}")
    print(f"smoke: after the restart the sender logs in, reads the story, and the parcel's history ({', '.join(history)})",
          flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "read"):
        raise SystemExit(__doc__)
    (write if sys.argv[1] == "write" else read)(sys.argv[2])
