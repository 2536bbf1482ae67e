import Foundation
import Models
import Postgres
@testable import DispatchCore
import XCTest

/// Dispatch as Mesajem uses it: couriers online, parcels offered to the nearest, the status machine over HTTP.
class DispatchTestCase: ServiceTestCase {
    override var serviceName: String { "dispatch" }
    /// The fleet feed is a consumer group: only the tests that wait for its assignment run it (stopping a member
    /// whose join is pending wedges the group in Tansu). Fixes are folded into positions every second. An operator
    /// approves the couriers (a subclass may set a token of its own).
    override var serviceSettings: [String: String] {
        ["OFFER_TIMEOUT_SECONDS": "4", "DISPATCH_TICK_MS": "100", "FLEET_FEED": "off", "FIX_FOLD_SECONDS": "1",
         "OPERATOR_TOKEN": "vetting-" + String(repeating: "v", count: 32)]
    }

    /// The operator's token the service runs with.
    var operatorCredential: String { serviceSettings["OPERATOR_TOKEN"] ?? "" }

    /// A courier approved by an operator, online at (lat, lon), as of `at` (now by default).
    func courier(lat: Double, lon: Double, capacity: Int = 2, at: Date? = nil) throws -> Person {
        let p = try person()
        XCTAssertEqual(try api.post("/v1/couriers/me", ["vehicle": "bike", "capacity": capacity], token: p.token).status, 201)
        try CourierVetting.approve(api, courier: p.id, token: p.token, operatorToken: operatorCredential)
        XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/status", json: ["online": true], token: p.token).status, 200)
        var fix: [String: Any] = ["lat": lat, "lon": lon]
        fix["at"] = at.map(Timestamp.format)
        XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/location", json: fix, token: p.token)["applied"] as? Bool, true)
        return p
    }

    func photo(_ who: Person) throws -> String {
        let r = try api.send("POST", "/v1/dispatch/media", raw: Images.jpeg, token: who.token, headers: ["Content-Type": "image/jpeg"])
        XCTAssertEqual(r.status, 201)
        return r["id"] as? String ?? ""
    }

    func send(_ sender: Person, to recipient: Person?, from: (Double, Double) = (44.4268, 26.1025),
              service: String = "standard", naming: [String: Any] = [:], paying: String = "cash") throws -> APIResponse {
        var recipientBody: [String: Any] = ["name": "Rita Recipient", "phone": "+40 700 000 000"]
        if let recipient { recipientBody["userId"] = recipient.id }
        recipientBody.merge(naming) { $1 }
        return try api.post("/v1/parcels", [
            "pickup": ["lat": from.0, "lon": from.1, "address": "Piața Universității 1"],
            "dropoff": ["lat": 44.4500, "lon": 26.0900, "address": "Bulevardul Aviatorilor 10"],
            "recipient": recipientBody, "service": service, "paymentMethod": paying,
            "documentPhotoMediaId": try photo(sender)], token: sender.token)
    }


    /// Waits until the parcel, seen by `who`, has `status`; returns it.
    @discardableResult
    func wait(_ parcel: String, as who: Person, for status: String, timeout: TimeInterval = 20) -> [String: Any]? {
        var last: [String: Any]?
        let ok = TestEnvironment.waitUntil(timeout: timeout) {
            last = (try? self.api.get("/v1/parcels/\(parcel)", token: who.token))?.json
            return last?["status"] as? String == status
        }
        return ok ? last : nil
    }
}

final class DispatchFlowTests: DispatchTestCase {
    func testAParcelTravelsFromBookingToConfirmedReceipt() throws {
        let sender = try person(), recipient = try person()
        let near = try courier(lat: 44.4270, lon: 26.1030), far = try courier(lat: 44.4700, lon: 26.1500)
        let probe = try EventProbe(topics: ["parcel.created", "parcel.status"])
        let created = try send(sender, to: recipient)
        XCTAssertEqual(created.status, 201, String(decoding: created.body, as: UTF8.self))
        let id = created["id"] as! String
        XCTAssertGreaterThan((created["quote"] as? [String: Any])?["amountMinor"] as? Int ?? 0, 300)

        let offered = wait(id, as: near, for: "offered")
        XCTAssertEqual(offered?["offeredTo"] as? String, near.id, "the nearest courier is offered it")
        // What the courier needs to decide, and nothing more until they accept: the areas (to about a kilometre),
        // how far the pickup is, the service and the price; no address, recipient, description or document.
        for field in ["recipient", "description", "documentPhotoMediaId", "documentPhotoUrl", "documentPhoto"] {
            XCTAssertNil(offered?[field], "an offer shows no \(field)")
        }
        let area = offered?["pickup"] as? [String: Any]
        XCTAssertEqual(area?["lat"] as? Double, 44.43)
        XCTAssertEqual(area?["lon"] as? Double, 26.1)
        XCTAssertNil(area?["address"])
        XCTAssertNil((offered?["dropoff"] as? [String: Any])?["address"])
        XCTAssertEqual(offered?["service"] as? String, "standard")
        XCTAssertGreaterThan((offered?["quote"] as? [String: Any])?["amountMinor"] as? Int ?? 0, 300)
        XCTAssertEqual(offered?["distanceToPickupMeters"] as? Int, 100, "from the courier's last fix (45 m), up to the next 100 m")
        let listed = try api.get("/v1/parcels?role=courier&status=offered", token: near.token)["items"] as? [[String: Any]]
        XCTAssertEqual(listed?.map { $0["id"] as? String }, [id])
        XCTAssertNil(listed?.first?["documentPhotoUrl"], "nor in their list")
        XCTAssertNil((listed?.first?["pickup"] as? [String: Any])?["address"])
        // The document is not theirs to see yet, by their token either.
        let photoPath = "/v1/dispatch/media/\(created["documentPhotoMediaId"] as? String ?? "")"
        assertClientError(try api.get(photoPath, token: near.token), 404, code: "not_found", "a courier only offered it")
        assertClientError(try api.get(photoPath, token: far.token), 404, code: "not_found", "a courier it is not offered to")
        assertClientError(try api.get(photoPath), 401, "neither a token nor a signature")
        assertClientError(try api.get("/v1/parcels/\(id)", token: far.id == near.id ? sender.token : far.token), 404, "others see nothing")
        assertClientError(try api.post("/v1/parcels/\(id)/accept", token: sender.token), 403, code: "forbidden")
        XCTAssertEqual(try api.post("/v1/parcels/\(id)/accept", token: near.token)["status"] as? String, "assigned")
        // Accepted, the courier sees what to collect: the addresses, the recipient, and the photo by its URL.
        let assigned = try api.get("/v1/parcels/\(id)", token: near.token)
        XCTAssertEqual((assigned["pickup"] as? [String: Any])?["address"] as? String, "Piața Universității 1")
        XCTAssertEqual((assigned["recipient"] as? [String: Any])?["name"] as? String, "Rita Recipient")
        XCTAssertNil(assigned["distanceToPickupMeters"])
        let document = try load(assigned["documentPhotoUrl"])
        XCTAssertEqual(document.status, 200)
        XCTAssertEqual(document.body, Images.stored(Images.jpeg))
        // With its size and placeholder, in the sender's answer and the courier's view, and its small rendition.
        for view in [created.json, assigned.json] {
            let photo = view["documentPhoto"] as? [String: Any]
            XCTAssertEqual(photo?["width"] as? Int, 640)
            XCTAssertEqual(photo?["height"] as? Int, 480)
            XCTAssertEqual((photo?["placeholder"] as? String)?.count, 28)
        }
        let small = try load(((assigned["documentPhoto"] as? [String: Any])?["urls"] as? [String: String])?["small"])
        XCTAssertEqual(small.status, 200)
        XCTAssertEqual(small.headers["content-type"], "image/jpeg")
        XCTAssertEqual(try api.get(photoPath, token: near.token).status, 200, "or with their token")
        assertClientError(try load(tampered(assigned["documentPhotoUrl"])), 403, code: "forbidden", "a tampered signature")
        assertClientError(try api.post("/v1/parcels/\(id)/deliver", ["photoMediaId": try photo(near)], token: near.token), 409,
                          code: "conflict", "not picked up yet")
        XCTAssertEqual(try api.post("/v1/parcels/\(id)/pickup", token: near.token)["status"] as? String, "picked_up")
        assertClientError(try api.post("/v1/parcels/\(id)/cancel", token: sender.token), 409, "too late to cancel")

        _ = try api.send("PUT", "/v1/couriers/me/location", json: ["lat": 44.42682, "lon": 26.10252], token: near.token)
        XCTAssertEqual(try api.get("/v1/parcels/\(id)", token: sender.token)["status"] as? String, "picked_up", "within 50 m")
        _ = try api.send("PUT", "/v1/couriers/me/location", json: ["lat": 44.4300, "lon": 26.1000], token: near.token)
        let moving = try api.get("/v1/parcels/\(id)", token: recipient.token)
        XCTAssertEqual(moving["status"] as? String, "in_transit", "the first fix beyond 50 m")
        XCTAssertEqual((moving["courierPosition"] as? [String: Any])?["lat"] as? Double, 44.43)

        assertClientError(try api.post("/v1/parcels/\(id)/deliver", ["photoMediaId": try photo(sender)], token: near.token), 400,
                          "the photo must be the courier's own")
        XCTAssertEqual(try api.post("/v1/parcels/\(id)/deliver", ["photoMediaId": try photo(near)], token: near.token)["status"] as? String,
                       "delivered")
        assertClientError(try api.post("/v1/parcels/\(id)/confirm", ["photoMediaId": try photo(sender)], token: sender.token), 403)
        let received = try api.post("/v1/parcels/\(id)/confirm", ["photoMediaId": try photo(recipient)], token: recipient.token)
        XCTAssertEqual(received["status"] as? String, "received")
        for field in ["documentPhotoUrl", "deliveryPhotoUrl", "receiptPhotoUrl"] {
            XCTAssertEqual(try load(received[field]).status, 200, field)
        }
        let history = (received["history"] as? [[String: Any]] ?? []).compactMap { $0["to"] as? String }
        XCTAssertEqual(history, ["awaiting_courier", "offered", "assigned", "picked_up", "in_transit", "delivered", "received"])

        let transitions = probe.events(timeout: 20) { $0["type"] as? String == "parcel.status" && $0["subject"] as? String == id }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            probe.drain(0.1)
            return probe.seen.filter { $0["type"] as? String == "parcel.status" && $0["subject"] as? String == id }.count == 6
        })
        let ordered = probe.seen.filter { $0["type"] as? String == "parcel.status" && $0["subject"] as? String == id }
        XCTAssertEqual(ordered.compactMap { $0.data("to") as? String }, Array(history.dropFirst()), "in order, on one key")
        for event in ordered + transitions.prefix(1) {
            XCTAssertEqual(try SchemaValidator.event("parcel.status").validate(event.envelope), [])
        }
        let createdEvent = probe.first(where: "parcel.created", subject: id)
        XCTAssertEqual(try SchemaValidator.event("parcel.created").validate(createdEvent?.envelope ?? [:]), [])
        // The courier's load went back down: they can take the next one.
        XCTAssertEqual(try api.post("/v1/couriers/me", ["vehicle": "bike", "capacity": 2], token: near.token)["activeParcels"] as? Int, 0)
    }

    /// The events of a stream until the server ends it (or `timeout` passes without one).
    func eventsUntilTheEnd(_ stream: SSEReader, timeout: TimeInterval = 10) -> [(event: String, data: String)] {
        var events: [(String, String)] = []
        while let e = stream.next(timeout: timeout) { events.append((e.event, e.data)) }
        return events
    }

    func testAParcelStreamEndsAtAFinalStatusWhenTheCourierLosesTheParcelAndWhenTheSessionIsRevoked() throws {
        let sender = try person(), recipient = try person()
        let c = try courier(lat: 44.4270, lon: 26.1030)
        let id = try send(sender, to: recipient)["id"] as! String
        XCTAssertNotNil(wait(id, as: c, for: "offered"))
        let senderStream = try SSEReader(port: api.port, path: "/v1/parcels/\(id)/events", token: sender.token)
        let courierStream = try SSEReader(port: api.port, path: "/v1/parcels/\(id)/events", token: c.token)
        XCTAssertEqual(senderStream.next()?.event, "snapshot")
        XCTAssertEqual(courierStream.next()?.event, "snapshot")

        XCTAssertEqual(try api.post("/v1/parcels/\(id)/decline", token: c.token).status, 200)
        let courierSaw = eventsUntilTheEnd(courierStream)
        XCTAssertEqual(courierSaw.last?.event, "end", "\(courierSaw)")
        XCTAssertEqual(courierSaw.last?.data, #"{"reason":"access_lost"}"#)
        XCTAssertTrue(courierStream.ended, "a courier who declined no longer follows the parcel")

        XCTAssertEqual(try api.post("/v1/parcels/\(id)/cancel", token: sender.token).status, 200)
        let senderSaw = eventsUntilTheEnd(senderStream)
        XCTAssertEqual(senderSaw.suffix(2).map(\.event), ["status", "end"], "\(senderSaw)")
        XCTAssertEqual(senderSaw.last?.data, #"{"reason":"final_state"}"#)
        XCTAssertTrue(senderStream.ended)
        let late = try SSEReader(port: api.port, path: "/v1/parcels/\(id)/events", token: sender.token)
        XCTAssertEqual(eventsUntilTheEnd(late).map(\.event), ["snapshot", "end"], "a finished parcel's stream ends after its snapshot")

        let other = try send(sender, to: recipient)["id"] as! String
        let watching = try SSEReader(port: api.port, path: "/v1/parcels/\(other)/events", token: recipient.token)
        XCTAssertEqual(watching.next()?.event, "snapshot")
        XCTAssertEqual(try accounts.post("/v1/auth/logout", token: recipient.token).status, 204)
        let recipientSaw = eventsUntilTheEnd(watching).filter { $0.event == "end" }
        XCTAssertEqual(recipientSaw.map(\.data), [#"{"reason":"session_revoked"}"#], "a stream opened with a session ends when it is logged out")
        XCTAssertTrue(watching.ended)
    }

    func testEventStreamsHaveABudgetOfTheirOwn() throws {
        let limited = try startInstance(ownGroups: true, settings: ["HTTP_MAX_STREAMS": "2"])
        defer { limited.stop() }
        let sender = try person()
        let id = try send(sender, to: nil)["id"] as! String
        let open = try (0..<2).map { _ in try SSEReader(port: limited.port, path: "/v1/parcels/\(id)/events", token: sender.token) }
        XCTAssertEqual(open.map(\.status), [200, 200])
        let third = try SSEReader(port: limited.port, path: "/v1/parcels/\(id)/events", token: sender.token)
        XCTAssertEqual(third.status, 503, "a stream over the budget is turned away")
        XCTAssertEqual(try APIClient(port: limited.port).get("/v1/parcels/\(id)", token: sender.token).status, 200,
                       "ordinary requests still pass")
        XCTAssertTrue(limited.log.contains("\"reason\":\"streams\""), "the refusal is logged")
    }

    func testTheSenderWatchesEveryTransitionAndTheCourierMoveLive() throws {
        let sender = try person(), recipient = try person()
        let c = try courier(lat: 44.4270, lon: 26.1030)
        let id = try send(sender, to: recipient)["id"] as! String
        let stream = try SSEReader(port: api.port, path: "/v1/parcels/\(id)/events", token: sender.token)
        XCTAssertEqual(stream.status, 200)
        let snapshot = stream.next()
        XCTAssertEqual(snapshot?.event, "snapshot")
        XCTAssertNotNil(wait(id, as: c, for: "offered"))
        XCTAssertEqual(try api.post("/v1/parcels/\(id)/accept", token: c.token).status, 200)
        assertClientError(try api.post("/v1/parcels/\(id)/accept", token: c.token), 409, code: "conflict", "a second accept by the same courier")
        XCTAssertEqual(try api.post("/v1/parcels/\(id)/pickup", token: c.token).status, 200)
        var statuses: [String] = []
        var positions = 0
        var moved = false
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, !(statuses.last == "in_transit" && positions > 0), let e = stream.next(timeout: 5) {
            let data = (try? JSONSerialization.jsonObject(with: Data(e.data.utf8))) as? [String: Any] ?? [:]
            if e.event == "status", let to = data["to"] as? String { statuses.append(to) }
            if e.event == "position" { positions += 1; XCTAssertEqual(data["lat"] as? Double, 44.43) }
            // The courier moves once the watcher has seen the pickup: the feed learns who carries the parcel from the
            // status events (through the outbox), and a position, which skips the outbox, could otherwise overtake
            // them and find no parcel to go to (positions are ephemeral; the next fix would arrive).
            if !moved && statuses.contains("picked_up") {
                moved = true
                _ = try api.send("PUT", "/v1/couriers/me/location", json: ["lat": 44.4300, "lon": 26.1000], token: c.token)
            }
        }
        // The offer may have been made before the stream opened; everything after it arrives, in order.
        XCTAssertEqual(statuses.drop { $0 == "offered" }, ["assigned", "picked_up", "in_transit"])
        XCTAssertGreaterThan(positions, 0, "the courier's position reaches the watcher")
        assertClientError(try api.get("/v1/parcels/\(id)/events", token: try person().token), 404)
        // The position went out as a `courier.location` event, valid against its schema.
        let location = try EventProbe(topics: ["courier.location"]).first(where: "courier.location", subject: c.id)
        XCTAssertNotNil(location)
        XCTAssertEqual(try SchemaValidator.event("courier.location").validate(location?.envelope ?? [:]), [])
    }

    func testADeclinedOrUnansweredOfferGoesToTheNextNearestCourier() throws {
        let sender = try person()
        let first = try courier(lat: 44.4269, lon: 26.1026), second = try courier(lat: 44.4290, lon: 26.1060),
            third = try courier(lat: 44.4400, lon: 26.1200)
        let id = try send(sender, to: nil)["id"] as! String
        XCTAssertEqual(wait(id, as: first, for: "offered")?["offeredTo"] as? String, first.id)
        XCTAssertEqual(try api.post("/v1/parcels/\(id)/decline", token: first.token)["status"] as? String, "awaiting_courier")
        XCTAssertEqual(wait(id, as: second, for: "offered")?["offeredTo"] as? String, second.id)
        // Nobody answers in time: the offer expires and moves on.
        XCTAssertEqual(wait(id, as: third, for: "offered", timeout: 30)?["offeredTo"] as? String, third.id)
        assertClientError(try api.get("/v1/parcels/\(id)", token: first.token), 404, "a courier who declined is out of it")
        let history = (try api.get("/v1/parcels/\(id)", token: sender.token)["history"] as? [[String: Any]] ?? [])
        XCTAssertEqual(Array(history.compactMap { $0["actor"] as? String }.prefix(6)), ["sender", "system", "courier", "system", "system", "system"],
                       "booked, offered, declined, offered, expired, offered")
    }

    func testABookingIsOfferedAtOnceUnlessAnotherParcelWaitsAheadOfIt() throws {
        let sender = try person()
        // The second courier was 60 km away an hour ago, out of reach (signing up takes longer than an offer lasts here).
        let first = try courier(lat: 44.4269, lon: 26.1026, capacity: 1)
        let second = try courier(lat: 45.0, lon: 26.1, capacity: 1, at: Date().addingTimeInterval(-3600))
        let probe = try EventProbe(topics: ["parcel.created", "parcel.status"])
        // A courier in reach and nothing waiting: the booking's answer is the offer.
        let a = try send(sender, to: nil)
        XCTAssertEqual(a["status"] as? String, "offered", String(decoding: a.body, as: UTF8.self))
        let id = a["id"] as! String
        XCTAssertEqual(try api.get("/v1/parcels/\(id)", token: first.token)["offeredTo"] as? String, first.id, "the courier sees it")
        XCTAssertEqual((a["history"] as? [[String: Any]] ?? []).compactMap { $0["to"] as? String }, ["awaiting_courier", "offered"])
        // The only courier in reach has an offer open (for the next 4 s): the next parcel waits for them.
        let b = try send(sender, to: nil)
        XCTAssertEqual(b["status"] as? String, "awaiting_courier")
        // The second courier comes within reach; a parcel booked now waits behind the one that waited first, which
        // the second courier is offered (whether the matcher got to it before this booking or after).
        XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/location", json: ["lat": 44.4290, "lon": 26.1060], token: second.token)["applied"] as? Bool, true)
        let c = try send(sender, to: nil)
        XCTAssertEqual(c["status"] as? String, "awaiting_courier", "not ahead of the parcel that waited first")
        XCTAssertEqual(wait(b["id"] as! String, as: second, for: "offered")?["offeredTo"] as? String, second.id)
        // The booking's two events: the parcel created, and offered.
        XCTAssertNotNil(probe.first(where: "parcel.created", subject: id))
        XCTAssertEqual(probe.first(where: "parcel.status", subject: id)?.data("to") as? String, "offered", "and the offer's event")
    }

    func testACourierIsNeverOfferedMoreThanTheyCanCarry() throws {
        let sender = try person()
        let only = try courier(lat: 44.4269, lon: 26.1026, capacity: 1)
        let a = try send(sender, to: nil)["id"] as! String
        let b = try send(sender, to: nil)["id"] as! String
        // Accept whichever of the two is offered first (retrying if an offer lapses meanwhile).
        var mine: String?
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) {
            for id in [a, b] where (try? self.api.post("/v1/parcels/\(id)/accept", token: only.token))?.status == 200 { mine = id; return true }
            return false
        })
        let other = mine == a ? b : a
        // The other parcel waits: the courier is full.
        XCTAssertFalse(TestEnvironment.waitUntil(timeout: 2) { (try? self.api.get("/v1/parcels/\(other)", token: only.token))?.status == 200 })
        XCTAssertEqual(try api.get("/v1/parcels/\(other)", token: sender.token)["status"] as? String, "awaiting_courier")
        XCTAssertEqual(try api.post("/v1/parcels/\(other)/cancel", token: sender.token)["status"] as? String, "cancelled")
        assertClientError(try api.post("/v1/parcels/\(other)/cancel", token: sender.token), 409)
    }

    func testQuotesAndBadInput() throws {
        let someone = try person()
        let quote = try api.post("/v1/quotes", ["pickup": ["lat": 44.4268, "lon": 26.1025], "dropoff": ["lat": 44.45, "lon": 26.09],
                                                "service": "express", "insured": true], token: someone.token)
        XCTAssertEqual(quote.status, 200)
        XCTAssertEqual(quote["currency"] as? String, "EUR")
        XCTAssertGreaterThan(quote["etaSeconds"] as? Int ?? 0, 600)
        for bad: [String: Any] in [["lat": 91, "lon": 0], ["lat": 0, "lon": 180.5], ["lat": "NaN", "lon": 0], ["lat": 1e400, "lon": 0],
                                   ["lat": 0], ["lat": 0, "lon": 0, "heading": 400], ["lat": 0, "lon": 0, "at": "2999-01-01T00:00:00Z"]] {
            let r = (try? api.send("PUT", "/v1/couriers/me/location", json: bad, token: someone.token))
            if let r { assertClientError(r, 400, String(describing: bad)) }
        }
        assertClientError(try api.send("PUT", "/v1/couriers/me/location", json: ["lat": 1, "lon": 1], token: someone.token), 404,
                          "not a courier yet")
        let c = try courier(lat: 44.4, lon: 26.1)
        // A flood of fixes, some out of order: the newest wins, the stale ones are ignored.
        let now = Date()
        for i in 0..<100 {
            let at = Timestamp.format(now.addingTimeInterval(Double(i) / 10))
            XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/location", json: ["lat": 44.4 + Double(i) / 10_000, "lon": 26.1, "at": at],
                                        token: c.token).status, 200)
        }
        let stale = try api.send("PUT", "/v1/couriers/me/location", json: ["lat": 10, "lon": 10, "at": Timestamp.format(now.addingTimeInterval(-500))],
                                 token: c.token)
        XCTAssertEqual(stale["applied"] as? Bool, false)
        let me = try api.post("/v1/couriers/me", ["vehicle": "bike", "capacity": 2], token: c.token)
        XCTAssertEqual((me["position"] as? [String: Any])?["lat"] as? Double ?? 0, 44.4099, accuracy: 1e-9)
        for body: [String: Any] in [["vehicle": "rocket", "capacity": 1], ["vehicle": "bike", "capacity": 0], ["vehicle": "bike"]] {
            assertClientError(try api.post("/v1/couriers/me", body, token: c.token), 400)
        }
        let sender = try person()
        var parcel: [String: Any] = ["pickup": ["lat": 44.4, "lon": 26.1, "address": "A"], "dropoff": ["lat": 44.5, "lon": 26.1, "address": "B"],
                                     "recipient": ["name": "R"], "service": "standard", "paymentMethod": "cash",
                                     "documentPhotoMediaId": UUID().uuidString.lowercased()]
        assertClientError(try api.post("/v1/parcels", parcel, token: sender.token), 400, "the photo must be the sender's")
        parcel["documentPhotoMediaId"] = try photo(sender)
        for (key, value) in [("service", "teleport" as Any), ("paymentMethod", "barter"), ("pickup", ["lat": 99, "lon": 0, "address": "x"]),
                             ("recipient", ["name": ""]), ("extra", true)] {
            var bad = parcel; bad[key] = value
            assertClientError(try api.post("/v1/parcels", bad, token: sender.token), 400, key)
        }
        XCTAssertEqual(try count("parcels"), 0, "nothing half-written")
        assertClientError(try api.get("/v1/parcels/\(UUID().uuidString.lowercased())", token: sender.token), 404)
        assertClientError(try api.get("/v1/parcels?role=boss", token: sender.token), 400)
        assertClientError(try api.get("/v1/parcels", token: nil), 401)
    }
}



final class DispatchInputTests: DispatchTestCase {
    /// A courier who "moves 7,000 km in a second" is not where they say: the fix is refused and they stay where they
    /// were, to the matcher and on their parcels; a move a courier can make is taken.
    func testAFixBeyondTheCouriersReachIsRefused() throws {
        let c = try courier(lat: 44.4270, lon: 26.1030)
        let far = try api.send("PUT", "/v1/couriers/me/location", json: ["lat": -33.8688, "lon": 151.2093], token: c.token)
        assertClientError(far, 400, code: "validation_failed", "Sydney a moment after Bucharest")
        XCTAssertEqual(far.errorField, "lat")
        let me = try api.post("/v1/couriers/me", ["vehicle": "bike", "capacity": 2], token: c.token)
        XCTAssertEqual((me["position"] as? [String: Any])?["lat"] as? Double, 44.4270, "still where they were")
        XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/location", json: ["lat": 44.4300, "lon": 26.1000], token: c.token)["applied"] as? Bool,
                       true, "a few hundred metres is taken")
        // Sydney is where they were a day ago, as a backfilled fix claims: older than their last, it is ignored.
        let old = Timestamp.format(Date().addingTimeInterval(-86_400))
        XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/location", json: ["lat": -33.8688, "lon": 151.2093, "at": old],
                                    token: c.token)["applied"] as? Bool, false)
    }

    func testEveryEndpointRefusesBadInputWithAClearClientError() throws {
        let sender = try person()
        let c = try courier(lat: 44.4269, lon: 26.1026)
        let id = try send(sender, to: nil)["id"] as! String
        let before = try count("parcels"), history = try count("parcel_history", "actor <> 'system'")
        let endpoints: [(String, String, String)] = [
            ("POST", "/v1/couriers/me", c.token), ("PUT", "/v1/couriers/me/status", c.token), ("PUT", "/v1/couriers/me/location", c.token),
            ("POST", "/v1/quotes", sender.token), ("POST", "/v1/parcels", sender.token),
            ("POST", "/v1/parcels/\(id)/deliver", c.token), ("POST", "/v1/parcels/\(id)/fail", c.token),
            ("POST", "/v1/parcels/\(id)/confirm", sender.token)]
        let bodies: [[UInt8]] = [[], Array("{".utf8), Array("[]".utf8), Array(#"{"unknown": 1}"#.utf8),
                                 Array(#"{"lat": "x", "lon": [], "online": "yes", "vehicle": 7, "reason": 5, "photoMediaId": 5}"#.utf8),
                                 [0x7B, 0x22, 0xC3, 0x28, 0x22, 0x3A, 0x31, 0x7D]]
        for (method, path, token) in endpoints {
            for body in bodies {
                let r = try api.send(method, path, raw: body, token: token, headers: ["Content-Type": "application/json"])
                assertClientError(r, nil, "\(method) \(path) \(String(decoding: body, as: UTF8.self))")
                XCTAssertNotEqual(r.status, 500)
            }
            assertClientError(try api.send(method, path, raw: [UInt8](repeating: 0x20, count: 2 << 20), token: token,
                                           headers: ["Content-Type": "application/json"]), 413)
            api.http.disconnect()
            assertClientError(try api.send(method, path, json: [:], token: nil), 401, code: "unauthenticated")
        }
        for path in ["/v1/parcels/not-a-uuid", "/v1/parcels/\(UUID().uuidString.lowercased())/events"] {
            assertClientError(try api.get(path, token: sender.token), 404, path)
        }
        assertClientError(try api.post("/v1/operator/couriers", ["couriers": []], token: sender.token), 401, "a user's token is not the operator's")
        XCTAssertEqual(try count("parcels"), before)
        XCTAssertEqual(try count("parcel_history", "actor <> 'system'"), history, "no refused request changed a parcel")
    }

    func testTheOpenAPIDocumentListsEveryRoute() throws {
        let paths = try api.get("/openapi.json")["paths"] as? [String: [String: Any]] ?? [:]
        let documented = Set(paths.flatMap { path, ops in ops.keys.map { "\($0.uppercased()) \(path)" } })
        for op in ["POST /v1/couriers/me", "PUT /v1/couriers/me/status", "PUT /v1/couriers/me/location", "POST /v1/quotes",
                   "POST /v1/parcels", "GET /v1/parcels", "GET /v1/parcels/{id}", "GET /v1/parcels/{id}/events",
                   "POST /v1/parcels/{id}/accept", "POST /v1/parcels/{id}/decline", "POST /v1/parcels/{id}/pickup",
                   "POST /v1/parcels/{id}/deliver", "POST /v1/parcels/{id}/fail", "POST /v1/parcels/{id}/confirm",
                   "POST /v1/parcels/{id}/cancel", "POST /v1/parcel-claims", "POST /v1/dispatch/media", "GET /v1/dispatch/media/{id}",
                   "POST /v1/couriers/me/application", "GET /v1/couriers/me/application",
                   "GET /v1/operator/couriers/applications", "POST /v1/operator/couriers/{userId}/approve"] {
            XCTAssertTrue(documented.contains(op), op)
        }
        let schemes = ((try api.get("/openapi.json")["components"] as? [String: Any])?["securitySchemes"] as? [String: Any]) ?? [:]
        XCTAssertEqual(Set(schemes.keys), ["bearer", "streamTicket", "signedURL", "operator"],
                       "the parcel's event stream also takes a stream ticket, its photos a signed URL, the operator's routes its token")
    }
}

/// Parcels no courier can reach (a district with nobody online) must not delay the others.
final class DispatchStrandedParcelTests: DispatchTestCase {
    /// One matching loop, which reads 100 waiting parcels a round.
    override var serviceSettings: [String: String] { super.serviceSettings.merging(["MATCH_WORKERS": "1"]) { $1 } }

    func testParcelsNoCourierCanReachDelayNoOtherAndAreOfferedOnceACourierCan() throws {
        let sender = try person()
        var stranded: [String] = []
        for _ in 0..<110 {  // older than the next one, and more than a round reads
            let r = try send(sender, to: nil, from: (10.5, 10.5))
            XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
            stranded.append(r["id"] as? String ?? "")
        }
        _ = try courier(lat: 44.4270, lon: 26.1030)
        let started = Date()
        let parcel = try XCTUnwrap(try send(sender, to: nil)["id"] as? String)
        XCTAssertNotNil(wait(parcel, as: sender, for: "offered", timeout: 5),
                        "a parcel in reach of a courier is offered while 110 older ones have no courier in reach")
        print("offered in \(Int(Date().timeIntervalSince(started) * 1000)) ms with 110 stranded parcels waiting")
        // A courier comes within reach of the stranded ones: the oldest is offered to them.
        let arriving = try courier(lat: 10.5005, lon: 10.5005)
        let offered = wait(stranded[0], as: sender, for: "offered", timeout: 10)
        XCTAssertEqual(offered?["offeredTo"] as? String, arriving.id)
    }

    /// A courier's row changed by another instance's transaction that stays open (a slow commit, a long batch)
    /// reaches this instance's index when it commits, although it carries the time it was written at: while the
    /// transaction is open, the refresh's next read starts no later than that transaction began, however long it stays
    /// open (a fixed look-back, as before, missed every change committed later than two seconds).
    func testACourierGoingOnlineInATransactionStillOpenIsFoundOnceItCommits() throws {
        let sender = try person()
        let near = try courier(lat: 44.4270, lon: 26.1030)
        XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/status", json: ["online": false], token: near.token).status, 200)
        let id = try XCTUnwrap(UUID(uuidString: near.id))
        let other = try Connection(url: database.url, applicationName: "dispatch")  // as another instance's pool
        let reader = try Connection(url: database.url, applicationName: "dispatch")  // as the refresh's
        try other.execute("BEGIN")
        let began: Date = try XCTUnwrap(other.first("SELECT now() AS at"))["at"]
        XCTAssertNotNil(try DispatchStorage().setOnline(other, user: id, online: true))
        let whileOpen = try DispatchStorage().couriersChanged(reader, since: began)
        XCTAssertFalse(whileOpen.couriers.contains { $0.id == id }, "not visible before its commit")
        XCTAssertLessThanOrEqual(whileOpen.nextSince, began, "the next read starts no later than the open transaction began")
        try other.execute("COMMIT")
        let next = try DispatchStorage().couriersChanged(reader, since: whileOpen.nextSince)
        XCTAssertEqual(next.couriers.first { $0.id == id }?.available, true, "the next read finds the committed change")
        let parcel = try XCTUnwrap(try send(sender, to: nil)["id"] as? String)  // 30 m from the courier
        XCTAssertEqual(wait(parcel, as: sender, for: "offered", timeout: 5)?["offeredTo"] as? String, near.id)
    }

    /// A fix another instance records is one appended row (no row updated: not the courier's, not their position),
    /// and reaches this instance's index when it commits, by notification: the parcel created where the fix put the
    /// courier is offered to them. This instance then folds it into the courier's position, as it would the fixes
    /// of an instance killed before its fold.
    func testAFixAnotherInstanceRecordsIsOneAppendedRowThatReachesThisInstanceAndIsFolded() throws {
        let sender = try person()
        let far = try courier(lat: 10.6, lon: 10.6)
        let id = try XCTUnwrap(UUID(uuidString: far.id))
        let other = try Connection(url: database.url, applicationName: "dispatch")  // as another instance's pool
        try other.execute("BEGIN")
        let before: Date = try XCTUnwrap(other.first("SELECT updated_at FROM dispatch.couriers WHERE user_id = $1", [id]))["updated_at"]
        let fix = try Fix(courier: id, lat: 44.4270, lon: 26.1030, heading: nil, speedMps: nil, at: nil)
        XCTAssertEqual(try DispatchStorage().recordFixes(other, [fix], known: [false], origin: UUID()).map(\.fix.courier), [id])
        let writes = try XCTUnwrap(other.first("""
            SELECT coalesce(sum(n_tup_ins) FILTER (WHERE relname = 'fix_batches'), 0)::int AS appended,
                coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del) FILTER (WHERE relname <> 'fix_batches'), 0)::int AS others
            FROM pg_stat_xact_user_tables WHERE schemaname = 'dispatch'
            """))
        XCTAssertEqual(try writes["appended", as: Int.self], 1, "the fix is one appended row")
        XCTAssertEqual(try writes["others", as: Int.self], 0, "no other row is written")
        let after: Date = try XCTUnwrap(other.first("SELECT updated_at FROM dispatch.couriers WHERE user_id = $1", [id]))["updated_at"]
        XCTAssertEqual(after, before, "the courier's own row is not written")
        try other.execute("COMMIT")
        let parcel = try XCTUnwrap(try send(sender, to: nil)["id"] as? String)  // 30 m from where the fix put the courier
        XCTAssertEqual(wait(parcel, as: sender, for: "offered", timeout: 5)?["offeredTo"] as? String, far.id)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) {
            (try? other.first("SELECT lat FROM dispatch.courier_positions WHERE user_id = $1", [id])?["lat", as: Double.self]) == 44.4270
        }, "folded into the courier's position")
        // An instance whose index read the courier's row looks only for the parcels they carry (none), and a fix of
        // nobody registered is neither stored nor returned.
        let known = try DispatchStorage().recordFixes(other, [fix], known: [true], origin: UUID())
        XCTAssertEqual(known.map(\.active), [0])
        XCTAssertEqual(known.map(\.available), [nil])
        let nobody = try Fix(courier: UUID(), lat: 44.4270, lon: 26.1030, heading: nil, speedMps: nil, at: nil)
        XCTAssertTrue(try DispatchStorage().recordFixes(other, [nobody], known: [false], origin: UUID()).isEmpty)
        XCTAssertEqual(try other.first("SELECT count(*)::int AS n FROM dispatch.fix_batches WHERE $1 = ANY (couriers)", [nobody.courier])?["n", as: Int.self], 0)
    }

    /// An erasure announced while this instance did not listen (its listener's connection lost) never reaches it:
    /// listening again, it forgets the couriers whose rows are gone, so a parcel only such a courier could reach is
    /// stranded instead of waiting on someone who is no more.
    func testACourierErasedWhileTheInstanceDidNotListenIsForgottenWhenItListensAgain() throws {
        let sender = try person()
        let gone = try XCTUnwrap(UUID(uuidString: try courier(lat: 10.8, lon: 10.8).id))
        let db = try Connection(url: database.url)
        // As an erasure whose announcement this instance missed: the row goes, nothing is announced.
        XCTAssertEqual(try db.execute("DELETE FROM dispatch.couriers WHERE user_id = $1", [gone]), 1)
        let lost = try db.first("""
            SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND query LIKE 'LISTEN dispatch%'
            """)
        XCTAssertEqual(try lost?["n", as: Int.self], 1, "the listener's connection")
        let parcel = try XCTUnwrap(UUID(uuidString: try send(sender, to: nil, from: (10.8, 10.8))["id"] as? String ?? ""))
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) {
            (try? db.first("SELECT stranded_at IS NOT NULL AS s FROM dispatch.parcels WHERE id = $1", [parcel])?["s", as: Bool.self]) == true
        }, "a parcel only an erased courier could reach waits on them")
    }
}

/// Recipients as Mesajem's senders name them: by username (the account sees the parcel at once), or by anything
/// else with a claim code the sender passes on; the PIN the recipient shows at the door proves the handover.
final class DispatchRecipientTests: DispatchTestCase {
    /// A courier who accepted and picked up `parcel`.
    func carrying(_ parcel: String, _ courier: Person) throws {
        XCTAssertNotNil(wait(parcel, as: courier, for: "offered"))
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/accept", token: courier.token)["status"] as? String, "assigned")
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/pickup", token: courier.token)["status"] as? String, "picked_up")
    }

    func testARecipientNamedByUsernameSeesTheParcelAtOnceWithItsPin() throws {
        let sender = try person(), name = "rita" + UUID().uuidString.prefix(8).lowercased(), rita = try person(name)
        // Dispatch learns usernames from auth's events.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { (try? self.count("profiles", "user_id = '\(rita.id)'")) == 1 })
        let created = try send(sender, to: nil, naming: ["username": name.uppercased()])
        XCTAssertEqual(created.status, 201, String(decoding: created.body, as: UTF8.self))
        let id = created["id"] as? String ?? ""
        XCTAssertEqual((created["recipient"] as? [String: Any])?["userId"] as? String, rita.id, "usernames match whatever their case")
        XCTAssertNil(created["claimCode"], "nothing to claim")
        let pin = created["deliveryPin"] as? String ?? ""
        XCTAssertNotNil(pin.range(of: "^[0-9]{4}$", options: .regularExpression), pin)
        let received = try api.get("/v1/parcels?role=recipient", token: rita.token)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(received.first?["id"] as? String, id, "under received at once")
        XCTAssertEqual(received.first?["deliveryPin"] as? String, pin, "the recipient has the PIN to show")

        let courier = try courier(lat: 44.4270, lon: 26.1030)
        try carrying(id, courier)
        let carried = try api.get("/v1/parcels/\(id)", token: courier.token)
        XCTAssertNil(carried["deliveryPin"], "never the courier")
        let card = try api.get("/v1/parcels/\(id)", token: rita.token)["courier"] as? [String: Any]
        XCTAssertEqual(card?["id"] as? String, courier.id)
        XCTAssertEqual(card?["vehicle"] as? String, "bike")
        XCTAssertNotNil(card?["fullName"] as? String, "the courier's card")

        let both = try send(sender, to: rita, naming: ["username": name])
        assertClientError(both, 400, code: "validation_failed", "an id and a username")
        XCTAssertEqual((both.json["error"] as? [String: Any])?["field"] as? String, "recipient.username")
        assertClientError(try send(sender, to: nil, naming: ["username": "rita\n"]), 400, code: "validation_failed", "a username with a newline")
    }

    /// Dispatch hears of a new person from auth's events, a moment after they signed up: a parcel naming them in that
    /// moment is booked with a claim code, and becomes theirs when the event arrives.
    func testARecipientNamedByUsernameAMomentAfterSigningUpSeesTheParcel() throws {
        let sender = try person(), name = "rona" + UUID().uuidString.prefix(8).lowercased(), rona = try person(name)
        let created = try send(sender, to: nil, naming: ["username": name])
        XCTAssertEqual(created.status, 201, String(decoding: created.body, as: UTF8.self))
        let id = created["id"] as? String ?? ""
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            ((try? self.api.get("/v1/parcels?role=recipient", token: rona.token)["items"]) as? [[String: Any]] ?? [])
                .contains { $0["id"] as? String == id }
        }, "the recipient sees the parcel once dispatch heard of them")
        let seen = try api.get("/v1/parcels/\(id)", token: sender.token)
        XCTAssertEqual((seen["recipient"] as? [String: Any])?["userId"] as? String, rona.id, "the sender sees who it is for")
        XCTAssertNil(seen["claimCode"], "nothing left to claim")
        XCTAssertEqual(try count("parcels", "id = '\(id)' AND recipient_user_id = '\(rona.id)'"), 1)
    }

    /// A username nobody had when the parcel was booked names nobody: whoever takes it afterwards is not handed it.
    func testAUsernameTakenAfterTheBookingIsNotHandedTheParcel() throws {
        let sender = try person(), name = "late" + UUID().uuidString.prefix(8).lowercased()
        let created = try send(sender, to: nil, naming: ["username": name])
        let id = created["id"] as? String ?? ""
        XCTAssertNotNil(created["claimCode"] as? String, "nobody has that name: the sender passes the code on")
        // Booked a minute ago, well past the allowance for the services' clocks: this person takes the name after it.
        try database.connect().execute("UPDATE dispatch.parcels SET created_at = created_at - interval '1 minute' WHERE id = $1",
                                       [UUID(uuidString: id)!])
        let late = try person(name)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { (try? self.count("profiles", "user_id = '\(late.id)'")) == 1 })
        XCTAssertEqual((try api.get("/v1/parcels?role=recipient", token: late.token)["items"] as? [[String: Any]])?.count, 0)
        XCTAssertNotNil(try api.get("/v1/parcels/\(id)", token: sender.token)["claimCode"] as? String, "still waiting for its code")
    }

    func testARecipientNamedByAnAddressTheyProvedSeesTheParcelAtOnce() throws {
        let probe = try EventProbe(topics: ["user.email_verification_requested"])
        let sender = try person(), name = "vera" + UUID().uuidString.prefix(8).lowercased(), vera = try person(name)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { (try? self.count("profiles", "user_id = '\(vera.id)'")) == 1 })
        // Not proven yet: a claim code, as for an address anybody could register.
        let before = try send(sender, to: nil, naming: ["email": "\(name)@example.com"])
        XCTAssertNotNil(before["claimCode"] as? String)
        XCTAssertTrue((before["recipient"] as? [String: Any])?["userId"] is NSNull)

        // She proves it with the token her verification mail carries (the notification service delivers it).
        let mail = probe.first { $0["type"] as? String == "user.email_verification_requested" && $0["subject"] as? String == vera.id }
        XCTAssertEqual(try accounts.post("/v1/auth/email-verification", ["token": mail?.data("token") as? String ?? ""]).status, 204)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            (try? self.count("profiles", "user_id = '\(vera.id)' AND email_verified")) == 1
        }, "user.updated tells dispatch the address is proven")
        let after = try send(sender, to: nil, naming: ["email": "\(name.uppercased())@Example.com"])
        XCTAssertEqual(after.status, 201, String(decoding: after.body, as: UTF8.self))
        XCTAssertEqual((after["recipient"] as? [String: Any])?["userId"] as? String, vera.id, "whatever its case")
        XCTAssertNil(after["claimCode"], "nothing to claim")
        let received = (try api.get("/v1/parcels?role=recipient", token: vera.token)["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        XCTAssertEqual(received, [after["id"] as? String ?? ""], "the later parcel at once; the earlier one waits for its code")
        // Naming one's own proven address sends nothing to oneself.
        XCTAssertNotNil(try send(vera, to: nil, naming: ["email": "\(name)@example.com"])["claimCode"] as? String)
    }

    func testAClaimCodeHandsTheParcelToWhoeverTheSenderPassesItTo() throws {
        let sender = try person()
        let probe = try EventProbe(topics: ["parcel.claimed"])
        let created = try send(sender, to: nil, naming: ["email": "later@example.com", "username": "nobody_has_this_one"])
        XCTAssertEqual(created.status, 201, String(decoding: created.body, as: UTF8.self))
        let id = created["id"] as? String ?? ""
        let code = created["claimCode"] as? String ?? ""
        XCTAssertNotNil(code.range(of: "^[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}$", options: .regularExpression), code)
        XCTAssertTrue((created["recipient"] as? [String: Any])?["userId"] is NSNull, "a username nobody has matches nobody")
        XCTAssertEqual((created["recipient"] as? [String: Any])?["email"] as? String, "later@example.com")

        // Registering the e-mail address the sender typed hands nothing over.
        let newcomer = try person()
        XCTAssertEqual((try api.get("/v1/parcels?role=recipient", token: newcomer.token)["items"] as? [Any])?.count, 0)
        assertClientError(try api.get("/v1/parcels/\(id)", token: newcomer.token), 404, code: "not_found")
        assertClientError(try api.post("/v1/parcel-claims", ["code": code], token: sender.token), 409, code: "conflict", "the sender's own")
        assertClientError(try api.post("/v1/parcel-claims", ["code": "AAAA-BBBB-CCCC"], token: newcomer.token), 404, code: "not_found")

        // Typed as people type it: lower case, no dashes, O for 0.
        let typed = code.replacingOccurrences(of: "-", with: "").lowercased().replacingOccurrences(of: "0", with: "o")
        let claimed = try api.post("/v1/parcel-claims", ["code": typed], token: newcomer.token)
        XCTAssertEqual(claimed.status, 200, String(decoding: claimed.body, as: UTF8.self))
        XCTAssertEqual((claimed["recipient"] as? [String: Any])?["userId"] as? String, newcomer.id)
        XCTAssertNotNil(claimed["deliveryPin"] as? String)
        XCTAssertNil(claimed["claimCode"], "the code is the sender's, and spent")
        XCTAssertEqual((try api.get("/v1/parcels?role=recipient", token: newcomer.token)["items"] as? [[String: Any]])?.first?["id"] as? String, id)
        XCTAssertNil(try api.get("/v1/parcels/\(id)", token: sender.token)["claimCode"], "spent")
        let other = try person()
        assertClientError(try api.post("/v1/parcel-claims", ["code": code], token: other.token), 404, code: "not_found", "claimed once")
        // The claimer's app sending the claim again (its answer lost) gets the parcel again, and nothing happens twice.
        let again = try api.post("/v1/parcel-claims", ["code": code], token: newcomer.token)
        XCTAssertEqual(again.status, 200, String(decoding: again.body, as: UTF8.self))
        XCTAssertEqual(again["id"] as? String, id)
        let event = probe.first(where: "parcel.claimed", subject: id)
        XCTAssertEqual(event?.data("recipientUserId") as? String, newcomer.id)
        XCTAssertEqual(try count("outbox", "topic = 'parcel.claimed' AND key = '\(id)'"), 1, "one claim event")
        XCTAssertEqual(try SchemaValidator.event("parcel.claimed").validate(event?.envelope ?? [:]), [])

        // Codes nobody holds are limited per caller: after ten wrong ones (one above), 429.
        for _ in 0..<8 { assertClientError(try api.post("/v1/parcel-claims", ["code": "ZZZZ-ZZZZ-ZZZZ"], token: other.token), 404) }
        assertClientError(try api.post("/v1/parcel-claims", ["code": "not a code"], token: other.token), 404)
        let limited = try api.post("/v1/parcel-claims", ["code": "ZZZZ-ZZZZ-ZZZZ"], token: other.token)
        assertClientError(limited, 429, code: "rate_limited")
        XCTAssertNotNil(limited.headers["retry-after"])
    }

    func testThePinProvesTheHandoverAndWrongOnesAreLimited() throws {
        let sender = try person(), rita = try person()
        let courier = try courier(lat: 44.4270, lon: 26.1030)
        let first = try send(sender, to: rita), second = try send(sender, to: rita)
        let (a, b) = (first["id"] as? String ?? "", second["id"] as? String ?? "")
        let pin = first["deliveryPin"] as? String ?? ""
        try carrying(a, courier)
        let wrong = pin == "0000" ? "0001" : "0000"
        let refused = try api.post("/v1/parcels/\(a)/deliver", ["photoMediaId": try photo(courier), "pin": wrong], token: courier.token)
        assertClientError(refused, 400, code: "validation_failed", "a wrong PIN")
        XCTAssertEqual((refused.json["error"] as? [String: Any])?["field"] as? String, "pin")
        XCTAssertTrue(((refused.json["error"] as? [String: Any])?["message"] as? String ?? "").contains("4 tries left"))
        let handed = try api.post("/v1/parcels/\(a)/deliver", ["photoMediaId": try photo(courier), "pin": pin], token: courier.token)
        XCTAssertEqual(handed["status"] as? String, "received", "the PIN is the recipient's proof: received at once")
        XCTAssertNil(handed["deliveryPin"], "done with")
        XCTAssertEqual(try load(handed["deliveryPhotoUrl"]).status, 200)
        XCTAssertEqual((handed["history"] as? [[String: Any]])?.last?["actor"] as? String, "courier")

        try carrying(b, courier)
        let otherPin = second["deliveryPin"] as? String ?? ""
        let bad = otherPin == "0000" ? "0001" : "0000"
        for left in [4, 3, 2, 1] {
            let r = try api.post("/v1/parcels/\(b)/deliver", ["photoMediaId": try photo(courier), "pin": bad], token: courier.token)
            assertClientError(r, 400, "wrong PIN \(5 - left)")
        }
        assertClientError(try api.post("/v1/parcels/\(b)/deliver", ["photoMediaId": try photo(courier), "pin": bad], token: courier.token),
                          409, code: "conflict", "the fifth wrong PIN locks it")
        assertClientError(try api.post("/v1/parcels/\(b)/deliver", ["photoMediaId": try photo(courier), "pin": otherPin], token: courier.token),
                          409, code: "conflict", "even the right one, now")
        XCTAssertEqual(try count("parcels", "id = '\(b)' AND pin_failures = 5"), 1, "each wrong PIN was counted")
        XCTAssertEqual(try api.post("/v1/parcels/\(b)/deliver", ["photoMediaId": try photo(courier)], token: courier.token)["status"] as? String,
                       "delivered", "without a PIN: delivered, for the recipient to confirm")
        XCTAssertEqual(try api.post("/v1/parcels/\(b)/confirm", ["photoMediaId": try photo(rita)], token: rita.token)["status"] as? String,
                       "received")
    }

    /// A courier's app on a poor network sends a step again when its answer was lost: with the same
    /// `Idempotency-Key` it gets the first answer, where without one the second accept is a conflict.
    func testAStepSentAgainWithItsKeyIsAnsweredAsTheFirstTime() throws {
        let sender = try person(), rita = try person()
        let courier = try courier(lat: 44.4270, lon: 26.1030)
        let parcel = try send(sender, to: rita)
        let id = parcel["id"] as? String ?? "", pin = parcel["deliveryPin"] as? String ?? ""
        XCTAssertNotNil(wait(id, as: courier, for: "offered"))
        func step(_ action: String, _ body: [String: Any]? = nil, key: String) throws -> APIResponse {
            try api.post("/v1/parcels/\(id)/\(action)", body, token: courier.token, headers: ["Idempotency-Key": key])
        }
        let accept = UUID().uuidString
        XCTAssertEqual(try step("accept", key: accept)["status"] as? String, "assigned")
        let again = try step("accept", key: accept)
        XCTAssertEqual(again.status, 200, "the same accept, sent again")
        XCTAssertEqual(again["status"] as? String, "assigned")
        XCTAssertEqual(again.headers["idempotent-replayed"], "true")
        assertClientError(try api.post("/v1/parcels/\(id)/accept", token: courier.token), 409, code: "conflict", "another accept")
        assertClientError(try step("pickup", key: accept), 409, code: "conflict", "the accept's key on another step")
        let pickup = UUID().uuidString
        XCTAssertEqual(try step("pickup", key: pickup)["status"] as? String, "picked_up")
        XCTAssertEqual(try step("pickup", key: pickup).status, 200)

        let photo = try self.photo(courier), wrong = pin == "0000" ? "0001" : "0000", missed = UUID().uuidString
        let refused = try step("deliver", ["photoMediaId": photo, "pin": wrong], key: missed)
        assertClientError(refused, 400, code: "validation_failed", "a wrong PIN")
        assertClientError(try step("deliver", ["photoMediaId": photo, "pin": wrong], key: missed), 400, "a refusal is not kept")
        XCTAssertEqual(try count("parcels", "id = '\(id)' AND pin_failures = 2"), 1, "each wrong PIN was counted, the same key or not")
        let deliver = UUID().uuidString
        XCTAssertEqual(try step("deliver", ["photoMediaId": photo, "pin": pin], key: deliver)["status"] as? String, "received")
        let handedAgain = try step("deliver", ["photoMediaId": photo, "pin": pin], key: deliver)
        XCTAssertEqual(handedAgain.status, 200)
        XCTAssertEqual(handedAgain["status"] as? String, "received")
        XCTAssertEqual(try count("parcel_history", "parcel_id = '\(id)' AND to_status = 'received'"), 1, "handed over once")
    }
}
