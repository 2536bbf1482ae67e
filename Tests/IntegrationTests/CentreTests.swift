import Foundation
import Models
import XCTest

/// Reception centres: a parcel brought to one instead of picked up, checked in by its staff, carried by the nearest
/// courier from there, left at another centre and handed to its recipient who shows the code and the PIN; the card
/// held at booking and taken at the collection.
final class CentreTests: PaidDispatchTestCase {
    static var always: [[String: Any]] { (1...7).map { ["day": $0, "opens": "00:00", "closes": "24:00"] } }

    func centre(_ name: String, lat: Double, lon: Double, hours: [[String: Any]] = always, dropOffs: Bool = true, collections: Bool = true,
                zone: String = "Europe/Bucharest") throws -> [String: Any] {
        let r = try api.post("/v1/operator/centres", ["name": name, "address": "Strada \(name) 1", "lat": lat, "lon": lon, "timeZone": zone,
                                                      "openingHours": hours, "acceptsDropOffs": dropOffs, "acceptsCollections": collections],
                             token: operatorToken)
        XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
        return r.json
    }

    func staff(_ centre: Any?, _ who: Person) throws {
        XCTAssertEqual(try api.send("PUT", "/v1/operator/centres/\(centre as? String ?? "")/staff/\(who.id)", token: operatorToken).status, 204)
    }

    func testAParcelThroughTwoCentresPaidByCard() throws {
        let east = try centre("Obor", lat: 44.4490, lon: 26.1260, collections: false)
        let west = try centre("Cotroceni", lat: 44.4300, lon: 26.0600, dropOffs: false)
        let anna = try person(), victor = try person()
        try staff(east["id"], anna)
        try staff(west["id"], victor)
        let sender = try person(), recipient = try person(), courier = try courier(lat: 44.4495, lon: 26.1265)

        // The app finds the nearest centres; the quote goes from one to the other.
        let near = try api.get("/v1/centres?lat=44.45&lon=26.127&limit=2", token: sender.token)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(near.first?["id"] as? String, east["id"] as? String, "the nearest first")
        XCTAssertEqual(near.first?["openNow"] as? Bool, true)
        let quote = try api.post("/v1/quotes", ["dropOffCentreId": east["id"]!, "collectionCentreId": west["id"]!, "service": "standard"],
                                 token: sender.token)
        XCTAssertEqual(quote.status, 200)
        XCTAssertGreaterThan(quote["distanceMeters"] as? Int ?? 0, 5000, "from centre to centre")

        let booked = try api.post("/v1/parcels", [
            "dropOffCentreId": east["id"]!, "collectionCentreId": west["id"]!, "recipient": ["name": "Rita", "userId": recipient.id],
            "service": "standard", "paymentMethod": "card", "cardPaymentMethod": "pm_card_visa", "documentPhotoMediaId": try photo(sender)],
                                  token: sender.token)
        XCTAssertEqual(booked.status, 201, String(decoding: booked.body, as: UTF8.self))
        let parcel = booked["id"] as? String ?? ""
        XCTAssertEqual(booked["status"] as? String, "awaiting_drop_off")
        XCTAssertEqual((booked["payment"] as? [String: Any])?["status"] as? String, "authorised", "the card is held at booking")
        XCTAssertEqual((booked["dropOffCentre"] as? [String: Any])?["name"] as? String, "Obor")
        XCTAssertEqual((booked["quote"] as? [String: Any])?["amountMinor"] as? Int, quote["amountMinor"] as? Int)
        XCTAssertNotNil(booked["dropOffFrom"], "the centre is open: it can be brought now")
        let code = try XCTUnwrap(booked["centreCode"] as? String, "the code the sender shows at the centre")
        Thread.sleep(forTimeInterval: 0.5)  // five matching rounds: nobody is offered a parcel not yet brought
        XCTAssertEqual(try api.get("/v1/parcels/\(parcel)", token: sender.token)["status"] as? String, "awaiting_drop_off")

        // Anna takes it in at Obor; Victor, staff elsewhere, cannot.
        let typed = code.lowercased().replacingOccurrences(of: "-", with: " ")
        assertClientError(try api.post("/v1/centres/\(east["id"] as? String ?? "")/check-ins", ["code": typed], token: victor.token), 404,
                          "staff of another centre")
        assertClientError(try api.post("/v1/centres/\(east["id"] as? String ?? "")/check-ins", ["code": "XXXX-XXXX-XXXX"], token: anna.token), 404,
                          "a code nothing holds")
        let checked = try api.post("/v1/centres/\(east["id"] as? String ?? "")/check-ins", ["code": typed], token: anna.token)
        XCTAssertEqual(checked["status"] as? String, "awaiting_courier", String(decoding: checked.body, as: UTF8.self))

        // The nearest courier carries it from Obor to Cotroceni and leaves it there.
        XCTAssertEqual(wait(parcel, as: courier, for: "offered")?["offeredTo"] as? String, courier.id)
        _ = try api.post("/v1/parcels/\(parcel)/accept", token: courier.token)
        _ = try api.post("/v1/parcels/\(parcel)/pickup", token: courier.token)
        let photo = try self.photo(courier)
        assertClientError(try api.post("/v1/parcels/\(parcel)/deliver", ["photoMediaId": photo, "pin": "0000"], token: courier.token), 400,
                          "the PIN is shown at the centre")
        assertClientError(try api.post("/v1/parcels/\(parcel)/deliver", ["photoMediaId": try self.photo(anna), "pin": "0000"], token: anna.token), 404,
                          "someone not its party learns nothing of it")
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/deliver", ["photoMediaId": photo], token: courier.token)["status"] as? String,
                       "ready_for_collection")

        // Rita collects it: the code and her PIN, to Victor.
        let mine = try api.get("/v1/parcels/\(parcel)", token: recipient.token)
        let pin = try XCTUnwrap(mine["deliveryPin"] as? String), ritasCode = try XCTUnwrap(mine["centreCode"] as? String)
        XCTAssertEqual((mine["collectionCentre"] as? [String: Any])?["name"] as? String, "Cotroceni")
        let wrong = pin == "0000" ? "1111" : "0000"
        assertClientError(try api.post("/v1/centres/\(west["id"] as? String ?? "")/collections", ["code": ritasCode, "pin": wrong], token: victor.token),
                          400, "a wrong PIN")
        let collected = try api.post("/v1/centres/\(west["id"] as? String ?? "")/collections", ["code": ritasCode, "pin": pin], token: victor.token)
        XCTAssertEqual(collected["status"] as? String, "received", String(decoding: collected.body, as: UTF8.self))
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) {
            ((try? self.api.get("/v1/parcels/\(parcel)", token: sender.token))?["payment"] as? [String: Any])?["status"] as? String == "captured"
        }, "the card is taken when the parcel is collected")
        let history = try api.get("/v1/parcels/\(parcel)", token: sender.token)["history"] as? [[String: Any]] ?? []
        XCTAssertEqual(history.compactMap { $0["to"] as? String },
                       ["awaiting_drop_off", "awaiting_courier", "offered", "assigned", "picked_up", "ready_for_collection", "received"])
        XCTAssertEqual(history.filter { $0["actor"] as? String == "staff" }.count, 2, "taken in and handed over by staff")
    }

    /// The index finds what a sort of every centre finds: the same centres in the same order, far north (where a
    /// degree of longitude is short) as near the equator, and fewer than asked for when there are fewer.
    func testTheNearestCentresAreTheNearestAnywhere() throws {
        let sender = try person(), db = try database.connect()
        XCTAssertEqual((try api.get("/v1/centres?lat=10&lon=10", token: sender.token)["items"] as? [[String: Any]])?.count, 0, "none yet")
        try db.execute("""
            INSERT INTO dispatch.centres (id, name, address, lat, lon, time_zone, opening_hours, accepts_drop_offs, accepts_collections)
            SELECT gen_random_uuid(), 'C' || i, 'S', lat, lon, 'UTC', '[]', true, true
            FROM generate_series(1, 400) i, LATERAL (SELECT CASE WHEN i % 2 = 0 THEN 69.5 + random() ELSE random() END AS lat,
                                                           20 + random() * 2 AS lon) p
            """)
        for (lat, lon) in [(70.0, 21.0), (69.4, 20.1), (0.5, 21.9), (0.0, 19.0), (35.0, 21.0)] {
            let scan: [String] = try db.rows("""
                SELECT id::text AS id FROM dispatch.centres ORDER BY (lat - $1) ^ 2 + ((lon - $2) * cos(radians($1))) ^ 2, id LIMIT 10
                """, [lat, lon]).map { try $0["id"] }
            let found = try api.get("/v1/centres?lat=\(lat)&lon=\(lon)&limit=10", token: sender.token)["items"] as? [[String: Any]] ?? []
            XCTAssertEqual(found.compactMap { $0["id"] as? String }, scan, "near \(lat), \(lon)")
        }
        XCTAssertEqual((try api.get("/v1/centres?lat=70&lon=21&limit=50", token: sender.token)["items"] as? [[String: Any]])?.count, 50)
    }

    func testOpeningHoursSayWhenAParcelCanBeBroughtBadCentresAreRefusedAndARetriedOneIsMadeOnce() throws {
        // Open tomorrow 09:00 to 10:00 only (UTC): closed now.
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let tomorrow = calendar.date(byAdding: .day, value: 1, to: calendar.startOfDay(for: Date()))!
        let day = (calendar.component(.weekday, from: tomorrow) + 5) % 7 + 1
        let closed = try centre("Vitan", lat: 44.41, lon: 26.13, hours: [["day": day, "opens": "09:00", "closes": "10:00"]], zone: "UTC")
        XCTAssertEqual(closed["openNow"] as? Bool, false)
        let opens = calendar.date(byAdding: .hour, value: 9, to: tomorrow)!
        XCTAssertEqual(closed["nextOpening"] as? String, Timestamp.format(opens))
        let sender = try person()
        let booked = try api.post("/v1/parcels", [
            "dropOffCentreId": closed["id"]!, "dropoff": ["lat": 44.45, "lon": 26.09, "address": "Aviatorilor 10"], "recipient": ["name": "R"],
            "service": "standard", "paymentMethod": "cash", "documentPhotoMediaId": try photo(sender)], token: sender.token)
        XCTAssertEqual(booked.status, 201, String(decoding: booked.body, as: UTF8.self))
        XCTAssertEqual(booked["dropOffFrom"] as? String, Timestamp.format(opens), "when it can be brought")

        let body: [String: Any] = ["name": "X", "address": "Y", "lat": 44.4, "lon": 26.1, "timeZone": "Europe/Bucharest",
                                   "openingHours": Self.always, "acceptsDropOffs": true, "acceptsCollections": false]
        for (change, field) in [(["timeZone": "Mars/Olympus_Mons"], "timeZone"),
                                (["openingHours": [["day": 1, "opens": "18:00", "closes": "09:00"]]], "openingHours[0]"),
                                (["openingHours": [["day": 8, "opens": "09:00", "closes": "18:00"]]], "openingHours[0].day")] {
            let r = try api.post("/v1/operator/centres", body.merging(change) { $1 }, token: operatorToken)
            assertClientError(r, 400, field)
            XCTAssertEqual(r.errorField, field)
        }
        let parcel: [String: Any] = ["pickup": ["lat": 44.4, "lon": 26.1, "address": "A"], "dropOffCentreId": closed["id"]!,
                                     "dropoff": ["lat": 44.45, "lon": 26.09, "address": "B"], "recipient": ["name": "R"],
                                     "service": "standard", "paymentMethod": "cash", "documentPhotoMediaId": try photo(sender)]
        assertClientError(try api.post("/v1/parcels", parcel, token: sender.token), 400, "a pickup and a centre")
        var atCollection = parcel
        atCollection["pickup"] = nil
        atCollection["dropoff"] = nil
        atCollection["collectionCentreId"] = UUID().uuidString
        let unknown = try api.post("/v1/parcels", atCollection, token: sender.token)
        assertClientError(unknown, 400, "no such centre")
        XCTAssertEqual(unknown.errorField, "collectionCentreId")
        assertClientError(try api.send("PUT", "/v1/operator/centres/\(UUID().uuidString)/staff/\(sender.id)", token: operatorToken), 404)
        XCTAssertEqual(try count("parcels"), 1, "nothing half-written")

        // An operator's tool sending a new centre again after a timeout makes one centre.
        let centres = try count("centres")
        let key = ["Idempotency-Key": UUID().uuidString, "Content-Type": "application/json"]
        let bytes = Array(try JSONSerialization.data(withJSONObject: body))  // the same bytes again, as a retry sends them
        let made = try api.send("POST", "/v1/operator/centres", raw: bytes, token: operatorToken, headers: key)
        let again = try api.send("POST", "/v1/operator/centres", raw: bytes, token: operatorToken, headers: key)
        XCTAssertEqual([made.status, again.status], [201, 201], String(decoding: again.body, as: UTF8.self))
        XCTAssertEqual(again["id"] as? String, made["id"] as? String)
        XCTAssertEqual(again.headers["idempotent-replayed"], "true")
        XCTAssertEqual(try count("centres"), centres + 1)
    }
}
