"""The smoke scenario of deploy/containers/check, through the gateway's published port alone (the one origin).

  smoke.py write STATE_FILE   the demo catalogue served, sign-in with Google on; sign up a sender and a courier, a group and a story in it, the courier online and a parcel
                              offered to them; then read user.registered, story.created, parcel.created and
                              parcel.status from the broker with a client outside the containers
  smoke.py read STATE_FILE    after a restart of the whole stack: the sender logs in and reads the story and the
                              parcel's history with its offer (what PostgreSQL's volume kept)
Exits 1 with the reason when something a user would see is wrong.
"""
import json
import sys
import time
import urllib.error
import urllib.request
import uuid

# One origin for every service: the gateway routes each path to the service that serves it.
AUTH = STORIES = DISPATCH = CURATION = "http://127.0.0.1:8080"
# A real 8 × 8 JPEG: uploads are decoded and re-encoded, so bytes that only look like one are refused.
JPEG = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a181616183123251d"
    "283a333d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c656763ffdb004301111212181518"
    "2f1a1a2f63423842636363636363636363636363636363636363636363636363636363636363636363636363636363636363"
    "6363636363636363ffc00011080008000803012200021101031101ffc4001f00000105010101010101000000000000000001"
    "02030405060708090a0bffc400b5100002010303020403050504040000017d01020300041105122131410613516107227114"
    "328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a434445464748494a53545556"
    "5758595a636465666768696a737475767778797a838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5"
    "b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffc4001f010003"
    "0101010101010101010000000000000102030405060708090a0bffc400b51100020102040403040705040400010277000102"
    "031104052131061241510761711322328108144291a1b1c109233352f0156272d10a162434e125f11718191a262728292a35"
    "363738393a434445464748494a535455565758595a636465666768696a737475767778797a82838485868788898a92939495"
    "969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae2e3e4e5e6e7e8e9ea"
    "f2f3f4f5f6f7f8f9faffda000c03010002110311003f00928a28af18f58fffd9"
)
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
    # The courier sees what to collect: the photo loads by its signed URL, through the gateway, without a token.
    with urllib.request.urlopen(offer["documentPhotoUrl"], timeout=30) as response:
        if response.status != 200 or response.read() != JPEG:
            fail(f"the document photo did not load by its URL {offer['documentPhotoUrl']}")
    print(f"smoke: sign-up, group, story, courier online, parcel {parcel['id']} offered to them", flush=True)

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
