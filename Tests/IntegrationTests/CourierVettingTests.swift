import Foundation
import Postgres
@testable import DispatchCore
import XCTest

/// Couriers are vetted before they are offered anything (issue 66): an application with documents, an operator's
/// decision recorded with their name, and an offer that shows what a courier needs to decide and nothing more until
/// they accept.
final class CourierVettingTests: DispatchTestCase {
    /// A courier registered near the pickup, not yet approved.
    func applicant(lat: Double = 44.4270, lon: Double = 26.1030) throws -> Person {
        let p = try person()
        XCTAssertEqual(try api.post("/v1/couriers/me", ["vehicle": "bike", "capacity": 2], token: p.token).status, 201)
        XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/location", json: ["lat": lat, "lon": lon], token: p.token)["applied"] as? Bool, true)
        return p
    }

    func decide(_ courier: Person, _ action: String, reason: String? = nil, by name: String = "Oana Operator") throws -> APIResponse {
        var body: [String: Any] = ["operator": name]
        body["reason"] = reason
        return try api.post("/v1/operator/couriers/\(courier.id)/\(action)", body, token: operatorCredential)
    }

    func goOnline(_ courier: Person) throws -> APIResponse {
        try api.send("PUT", "/v1/couriers/me/status", json: ["online": true], token: courier.token)
    }

    /// Whether matching looked at the parcel and found nobody to offer it to (a stranded parcel).
    func isStranded(_ parcel: String) throws -> Bool {
        try database.connect().first("SELECT stranded_at IS NOT NULL AS s FROM dispatch.parcels WHERE id = \(UUID(uuidString: parcel)!)")?["s"] ?? false
    }

    func testACourierIsOfferedNothingUntilApprovedAndSeesTheAddressesOnlyOnceTheyAccept() throws {
        let sender = try person(), cora = try applicant()
        XCTAssertEqual(try api.post("/v1/couriers/me", ["vehicle": "bike", "capacity": 2], token: cora.token)["vetting"] as? String, "unvetted")
        assertClientError(try goOnline(cora), 403, code: "forbidden", "registered is not approved")
        assertClientError(try api.get("/v1/couriers/me/application", token: cora.token), 404, "nothing applied for yet")
        let applied = try CourierVetting.apply(api, token: cora.token)
        XCTAssertEqual(applied.status, 201, String(decoding: applied.body, as: UTF8.self))
        XCTAssertEqual(applied["status"] as? String, "pending")
        XCTAssertEqual(applied["legalName"] as? String, "Cora Ionescu")
        let online = try goOnline(cora)
        assertClientError(online, 403, code: "forbidden", "pending")
        XCTAssertTrue(online.errorMessage?.contains("reviewed") == true, online.errorMessage ?? "")
        // Offered nothing: a parcel booked where they stand finds nobody to offer it to.
        let parcel = try XCTUnwrap(try send(sender, to: nil, service: "express")["id"] as? String)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) { (try? self.isStranded(parcel)) == true }, "matching found nobody")
        XCTAssertEqual(try api.get("/v1/parcels/\(parcel)", token: sender.token)["status"] as? String, "awaiting_courier")
        assertClientError(try api.get("/v1/parcels/\(parcel)", token: cora.token), 404, "nothing of it reaches the applicant")
        let queue = try api.get("/v1/operator/couriers/applications", token: operatorCredential)["items"] as? [[String: Any]]
        XCTAssertEqual(queue?.map { $0["courierId"] as? String }, [cora.id], "the operators' queue")
        XCTAssertEqual(queue?.first?["identityPhotoKept"] as? Bool, true)
        XCTAssertEqual(try load(queue?.first?["vehiclePhotoUrl"]).status, 200, "the operators see the vehicle")
        XCTAssertNil(queue?.first?["identityPhotoUrl"], "the identity document has a route of its own")

        // Approved, they go online and are offered it: the areas, how far, the service and what they earn.
        let approved = try decide(cora, "approve")
        XCTAssertEqual(approved["status"] as? String, "approved")
        let history = approved["history"] as? [[String: Any]]
        XCTAssertEqual(history?.map { $0["decision"] as? String }, ["applied", "approved"])
        XCTAssertEqual(history?.last?["operator"] as? String, "Oana Operator")
        XCTAssertNotNil(history?.last?["at"] as? String)
        XCTAssertEqual(try goOnline(cora)["online"] as? Bool, true)
        let offered = try XCTUnwrap(wait(parcel, as: cora, for: "offered"), "offered once approved")
        XCTAssertEqual(offered["offeredTo"] as? String, cora.id)
        for field in ["recipient", "description", "documentPhotoMediaId", "documentPhotoUrl", "documentPhoto"] {
            XCTAssertNil(offered[field], "an offer shows no \(field)")
        }
        XCTAssertNil((offered["pickup"] as? [String: Any])?["address"])
        XCTAssertNil((offered["dropoff"] as? [String: Any])?["address"])
        XCTAssertEqual((offered["pickup"] as? [String: Any])?["lat"] as? Double, 44.43, "an area, to about a kilometre")
        XCTAssertEqual(offered["service"] as? String, "express")
        XCTAssertNotNil(offered["distanceToPickupMeters"] as? Int)
        let price = try XCTUnwrap((offered["quote"] as? [String: Any])?["amountMinor"] as? Int)
        XCTAssertEqual(offered["courierEarningsMinor"] as? Int, price * 75 / 100, "their share of the price")
        let listed = (try api.get("/v1/parcels?role=courier", token: cora.token)["items"] as? [[String: Any]])?.first
        XCTAssertNil((listed?["pickup"] as? [String: Any])?["address"], "nor in their list")
        XCTAssertEqual(listed?["courierEarningsMinor"] as? Int, price * 75 / 100)
        let document = "/v1/dispatch/media/\(try api.get("/v1/parcels/\(parcel)", token: sender.token)["documentPhotoMediaId"] as? String ?? "")"
        assertClientError(try api.get(document, token: cora.token), 404, code: "not_found", "the document is not theirs before they accept")

        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/accept", token: cora.token)["status"] as? String, "assigned")
        let assigned = try api.get("/v1/parcels/\(parcel)", token: cora.token)
        XCTAssertEqual((assigned["pickup"] as? [String: Any])?["address"] as? String, "Piața Universității 1")
        XCTAssertEqual((assigned["dropoff"] as? [String: Any])?["address"] as? String, "Bulevardul Aviatorilor 10")
        XCTAssertEqual((assigned["recipient"] as? [String: Any])?["name"] as? String, "Rita Recipient")
        XCTAssertEqual(try load(assigned["documentPhotoUrl"]).status, 200, "the document, once accepted")
        XCTAssertEqual(try api.get(document, token: cora.token).status, 200)
    }

    func testARejectionSaysWhyAndTheApplicantMayApplyAgain() throws {
        let dan = try applicant()
        XCTAssertEqual(try CourierVetting.apply(api, token: dan.token).status, 201)
        assertClientError(try decide(dan, "reject"), 400, code: "validation_failed", "a rejection needs a reason")
        assertClientError(try decide(dan, "reject", reason: ""), 400, code: "validation_failed", "an empty reason is none")
        let rejected = try decide(dan, "reject", reason: "The document photo is blurred.")
        XCTAssertEqual(rejected["status"] as? String, "rejected")
        let mine = try api.get("/v1/couriers/me/application", token: dan.token)
        XCTAssertEqual(mine["status"] as? String, "rejected")
        XCTAssertEqual(mine["reason"] as? String, "The document photo is blurred.", "the applicant reads why")
        XCTAssertNil(mine["history"], "the operators' names stay theirs")
        XCTAssertNil(mine["identityPhotoKept"])
        assertClientError(try goOnline(dan), 403, code: "forbidden")
        assertClientError(try decide(dan, "approve"), 409, code: "conflict", "only a pending application is approved")
        assertClientError(try decide(dan, "suspend", reason: "x"), 409, code: "conflict", "only an approved courier is suspended")
        let again = try CourierVetting.apply(api, token: dan.token)
        XCTAssertEqual(again["status"] as? String, "pending", "applying again")
        XCTAssertNil(again["reason"])
        XCTAssertEqual(try decide(dan, "approve")["status"] as? String, "approved")
        assertClientError(try CourierVetting.apply(api, token: dan.token), 409, code: "conflict", "approved already")
        XCTAssertEqual(try count("courier_vetting_history", "user_id = '\(dan.id)'"), 4, "applied, rejected, applied, approved")
    }

    func testASuspensionTakesTheCourierOfflineAndOffersThemNothingUntilReinstated() throws {
        let sender = try person()
        let eva = try courier(lat: 44.4270, lon: 26.1030)
        let parcel = try XCTUnwrap(try send(sender, to: nil)["id"] as? String)
        XCTAssertNotNil(wait(parcel, as: eva, for: "offered"))
        assertClientError(try decide(eva, "suspend"), 400, code: "validation_failed", "a suspension needs a reason")
        let suspended = try decide(eva, "suspend", reason: "Reported by three senders.")
        XCTAssertEqual(suspended["status"] as? String, "suspended")
        let me = try api.post("/v1/couriers/me", ["vehicle": "bike", "capacity": 2], token: eva.token)
        XCTAssertEqual(me["online"] as? Bool, false, "offline at once")
        XCTAssertEqual(me["vetting"] as? String, "suspended")
        XCTAssertEqual(try api.get("/v1/parcels/\(parcel)", token: sender.token)["status"] as? String, "awaiting_courier",
                       "the offer open to them lapsed")
        assertClientError(try api.post("/v1/parcels/\(parcel)/accept", token: eva.token), 404, "no longer theirs to accept")
        let refused = try goOnline(eva)
        assertClientError(refused, 403, code: "forbidden")
        XCTAssertTrue(refused.errorMessage?.contains("suspended") == true, refused.errorMessage ?? "")
        XCTAssertEqual(try api.get("/v1/couriers/me/application", token: eva.token)["reason"] as? String, "Reported by three senders.")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) { (try? self.isStranded(parcel)) == true }, "offered to nobody")
        XCTAssertEqual(try decide(eva, "reinstate")["status"] as? String, "approved")
        XCTAssertEqual(try goOnline(eva)["online"] as? Bool, true)
        // (The lapsed offer counts as theirs declined, as an expired one does: the next parcel is theirs to take.)
        let next = try XCTUnwrap(try send(sender, to: nil)["id"] as? String)
        XCTAssertNotNil(wait(next, as: eva, for: "offered"), "offered parcels again once reinstated")
    }

    func testASuspensionWithdrawsWhatTheCourierHasNotPickedUpAndOffersItToAnother() throws {
        let sender = try person()
        let eva = try courier(lat: 44.4270, lon: 26.1030)
        let parcel = try XCTUnwrap(try send(sender, to: nil)["id"] as? String)
        XCTAssertNotNil(wait(parcel, as: eva, for: "offered"))
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/accept", token: eva.token)["status"] as? String, "assigned")
        XCTAssertNotNil(try api.get("/v1/parcels/\(parcel)", token: eva.token)["pickup"].flatMap { ($0 as? [String: Any])?["address"] },
                        "assigned: she sees the address")
        let ben = try courier(lat: 44.4300, lon: 26.1000)  // online only now: the offer was hers

        XCTAssertEqual(try decide(eva, "suspend", reason: "Identity document forged.")["status"] as? String, "suspended")
        assertClientError(try api.get("/v1/parcels/\(parcel)", token: eva.token), 404, "no longer hers to see")
        assertClientError(try api.post("/v1/parcels/\(parcel)/pickup", token: eva.token), 404)
        XCTAssertEqual(try api.post("/v1/couriers/me", ["vehicle": "bike", "capacity": 2], token: eva.token)["activeParcels"] as? Int, 0)
        let history = (try api.get("/v1/parcels/\(parcel)", token: sender.token)["history"] as? [[String: Any]] ?? []).compactMap { $0["to"] as? String }
        XCTAssertTrue(zip(history, history.dropFirst()).contains { $0 == ("assigned", "awaiting_courier") }, "withdrawn: \(history)")
        XCTAssertNotNil(wait(parcel, as: ben, for: "offered"), "offered to another courier")
        XCTAssertEqual(try api.post("/v1/parcels/\(parcel)/accept", token: ben.token)["status"] as? String, "assigned")
        XCTAssertEqual(try decide(eva, "reinstate")["status"] as? String, "approved")
        assertClientError(try api.get("/v1/parcels/\(parcel)", token: eva.token), 404, "reinstated, she does not get it back")
    }

    func testAnApprovedCourierWhoChangesVehicleIsVettedAgain() throws {
        let eva = try courier(lat: 44.4270, lon: 26.1030)
        let car = try api.post("/v1/couriers/me", ["vehicle": "car", "capacity": 2], token: eva.token)
        XCTAssertEqual(car.status, 201)
        XCTAssertEqual(car["vetting"] as? String, "unvetted", "the operators approved a bike, not this car")
        XCTAssertEqual(car["online"] as? Bool, false, "offline at once")
        assertClientError(try goOnline(eva), 403, code: "forbidden")
        XCTAssertEqual(try CourierVetting.apply(api, token: eva.token, vehicle: "car").status, 201)
        let photos: Int = try database.connect().first("SELECT count(*)::int AS n FROM dispatch.media WHERE purpose IN ('identity', 'vehicle')")!["n"]
        XCTAssertEqual(photos, 2, "the first application's photos went with it")
        assertClientError(try api.post("/v1/couriers/me", ["vehicle": "scooter", "capacity": 2], token: eva.token), 409,
                          "not while the car is under review")
        XCTAssertEqual(try decide(eva, "approve")["status"] as? String, "approved")
        XCTAssertEqual(try goOnline(eva)["online"] as? Bool, true)
        XCTAssertEqual(try api.post("/v1/couriers/me", ["vehicle": "car", "capacity": 3], token: eva.token)["vetting"] as? String,
                       "approved", "the same vehicle with more room stays approved")
    }

    func testOnlyOperatorsReadAnIdentityPhotoAndItGoesAfterItsRetention() throws {
        let fay = try applicant(), other = try person()
        let upload = try api.send("POST", "/v1/dispatch/media?purpose=identity", raw: Images.jpeg, token: fay.token,
                                  headers: ["Content-Type": "image/jpeg"])
        let identity = try XCTUnwrap(upload["id"] as? String)
        let applied = try CourierVetting.apply(api, token: fay.token, overrides: ["identityPhotoMediaId": identity])
        XCTAssertEqual(applied.status, 201)
        let path = "/v1/dispatch/media/\(identity)"
        assertClientError(try api.get(path, token: fay.token), 404, code: "not_found", "not even to the applicant")
        assertClientError(try api.get(path, token: other.token), 404, code: "not_found", "nor anyone else")
        assertClientError(try load(upload["url"]), 404, code: "not_found", "nor by the URL its upload answered with")
        let operatorPath = "/v1/operator/couriers/\(fay.id)/identity-photo"
        let photo = try api.get(operatorPath, token: operatorCredential)
        XCTAssertEqual(photo.status, 200)
        XCTAssertEqual(photo.body, Images.stored(Images.jpeg))
        XCTAssertEqual(photo.headers["cache-control"], "no-store")
        assertClientError(try api.get(operatorPath, token: fay.token), 401, "a user's token is not the operator's")
        assertClientError(try api.get("/v1/operator/couriers/\(other.id)/identity-photo", token: operatorCredential), 404)
        // Kept for COURIER_DOCUMENTS_RETENTION_DAYS after the decision, then erased by the job (its statement here).
        XCTAssertEqual(try decide(fay, "approve")["status"] as? String, "approved")
        let c = try database.connect()
        XCTAssertEqual(try DispatchStorage().eraseIdentityPhotos(c, decidedBefore: Date().addingTimeInterval(-86_400)), 0, "not due yet")
        XCTAssertEqual(try DispatchStorage().eraseIdentityPhotos(c, decidedBefore: Date().addingTimeInterval(60)), 1)
        assertClientError(try api.get(operatorPath, token: operatorCredential), 404, "erased")
        XCTAssertEqual(try count("media", "id = '\(identity)'"), 0)
        let after = try api.get("/v1/operator/couriers/\(fay.id)/application", token: operatorCredential)
        XCTAssertEqual(after["identityPhotoKept"] as? Bool, false)
        XCTAssertNotNil(after["documentsErasedAt"] as? String)
    }

    func testAnImplausibleFixIsRefusedAndNotApplied() throws {
        let gil = try courier(lat: 44.4270, lon: 26.1030)
        let far = try api.send("PUT", "/v1/couriers/me/location", json: ["lat": 40.7128, "lon": -74.0060], token: gil.token)
        assertClientError(far, 400, code: "validation_failed", "New York a moment after Bucharest")
        let me = try api.post("/v1/couriers/me", ["vehicle": "bike", "capacity": 2], token: gil.token)
        XCTAssertEqual((me["position"] as? [String: Any])?["lat"] as? Double, 44.4270, "not applied")
        // An instance that never heard of an offline courier's fixes bounds a fix by the stored one.
        XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/status", json: ["online": false], token: gil.token).status, 200)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) {
            (try? self.count("courier_positions", "user_id = '\(gil.id)' AND lat IS NOT NULL")) == 1
        }, "the fix folded")
        let other = try startInstance(ownGroups: true)
        defer { other.stop() }
        let elsewhere = APIClient(port: other.port)
        assertClientError(try elsewhere.send("PUT", "/v1/couriers/me/location", json: ["lat": 40.7128, "lon": -74.0060], token: gil.token),
                          400, code: "validation_failed", "the other instance knows where they were from their row")
        XCTAssertEqual(try elsewhere.send("PUT", "/v1/couriers/me/location", json: ["lat": 44.4280, "lon": 26.1040], token: gil.token)["applied"]
                       as? Bool, true, "a short move is taken")
    }

    func testEveryVettingRouteRefusesBadInputWithAClearClientError() throws {
        let hal = try applicant(), ida = try person()
        let identity = try CourierVetting.upload(api, token: hal.token, purpose: "identity")
        let vehicle = try CourierVetting.upload(api, token: hal.token, purpose: "vehicle")
        let parcelPhoto = try CourierVetting.upload(api, token: hal.token, purpose: "parcel")
        let idasIdentity = try CourierVetting.upload(api, token: ida.token, purpose: "identity")
        let good: [String: Any] = ["legalName": "Hal Popescu", "phone": "+40 700 000 002", "vehicle": "car", "consent": true,
                                   "identityPhotoMediaId": identity, "vehiclePhotoMediaId": vehicle]
        func without(_ key: String) -> [String: Any] { good.filter { $0.key != key } }
        func with(_ key: String, _ value: Any) -> [String: Any] { good.merging([key: value]) { $1 } }
        let cases: [([String: Any], String, String)] = [
            (without("consent"), "consent", "missing consent"), (with("consent", false), "consent", "consent refused"),
            (with("identityPhotoMediaId", UUID().uuidString), "identityPhotoMediaId", "an unknown image"),
            (with("identityPhotoMediaId", idasIdentity), "identityPhotoMediaId", "another user's image"),
            (with("identityPhotoMediaId", parcelPhoto), "identityPhotoMediaId", "an image uploaded for a parcel"),
            (with("vehiclePhotoMediaId", identity), "vehiclePhotoMediaId", "the identity photo as the vehicle's"),
            (with("identityPhotoMediaId", "not-a-uuid"), "identityPhotoMediaId", "not an id"),
            (with("legalName", String(repeating: "n", count: 201)), "legalName", "an overlong name"),
            (with("legalName", "Hal\u{7}"), "legalName", "a control character"),
            (with("phone", "call me"), "phone", "not a phone number"), (with("phone", String(repeating: "1", count: 40)), "phone", "overlong"),
            (with("vehicle", "rocket"), "vehicle", "not a vehicle"), (without("legalName"), "legalName", "no name"),
        ]
        for (body, field, why) in cases {
            let r = try api.post("/v1/couriers/me/application", body, token: hal.token)
            assertClientError(r, 400, code: "validation_failed", why)
            XCTAssertEqual(r.errorField, field, why)
        }
        XCTAssertEqual(try count("courier_applications"), 0, "no refused application was kept")
        assertClientError(try api.send("POST", "/v1/couriers/me/application", raw: Array("{".utf8), token: hal.token,
                                       headers: ["Content-Type": "application/json"]), 400, code: "invalid_json")
        assertClientError(try api.post("/v1/couriers/me/application", good), 401, code: "unauthenticated")
        XCTAssertEqual(try api.post("/v1/couriers/me/application", good, token: hal.token).status, 201)

        // The operator's routes.
        let op = operatorCredential
        for (path, why) in [("/v1/operator/couriers/\(UUID().uuidString)/approve", "nobody by that id"),
                            ("/v1/operator/couriers/not-a-uuid/approve", "not an id")] {
            assertClientError(try api.post(path, ["operator": "Oana"], token: op), 404, why)
        }
        for (body, field) in [([:], "operator"), (["operator": String(repeating: "o", count: 101)], "operator"),
                              (["operator": "Oana", "reason": String(repeating: "r", count: 501)], "reason"),
                              (["operator": "Oana", "reason": 5], "reason")] as [([String: Any], String)] {
            let r = try api.post("/v1/operator/couriers/\(hal.id)/reject", body, token: op)
            assertClientError(r, 400, code: "validation_failed", "\(body)")
            XCTAssertEqual(r.errorField, field)
        }
        assertClientError(try api.post("/v1/operator/couriers/\(hal.id)/approve", ["operator": "Oana"], token: hal.token), 401,
                          "a courier approving themself")
        assertClientError(try api.get("/v1/operator/couriers/applications?status=maybe", token: op), 400, code: "validation_failed")
        assertClientError(try api.get("/v1/operator/couriers/applications?limit=1000", token: op), 400, code: "validation_failed")
        XCTAssertEqual(try api.post("/v1/operator/couriers/\(hal.id)/approve", ["operator": "Oana"], token: op).status, 200)
        assertClientError(try api.post("/v1/operator/couriers/\(hal.id)/approve", ["operator": "Oana"], token: op), 409, code: "conflict",
                          "approved twice")
        assertClientError(try api.post("/v1/operator/couriers/\(hal.id)/reinstate", ["operator": "Oana"], token: op), 409, code: "conflict",
                          "not suspended")
        let approved = try api.get("/v1/operator/couriers/applications?status=approved", token: op)["items"] as? [[String: Any]]
        XCTAssertEqual(approved?.map { $0["courierId"] as? String }, [hal.id])
    }

    /// A courier the operator seeds (a fleet's, a load test's) is approved: the operator made them.
    func testASeededCourierIsApproved() throws {
        let id = UUID().uuidString.lowercased()
        XCTAssertEqual(try api.post("/v1/operator/couriers", ["couriers": [["id": id, "vehicle": "bike", "capacity": 1, "lat": 44.427, "lon": 26.103]]],
                                    token: operatorCredential).status, 200)
        let seeded = try api.get("/v1/operator/couriers/\(id)/application", token: operatorCredential)
        XCTAssertEqual(seeded["status"] as? String, "approved")
        XCTAssertEqual((seeded["history"] as? [[String: Any]])?.count, 0, "approved without an application")
    }
}

/// Without OPERATOR_TOKEN the operator routes do not exist: 404, and absent from the OpenAPI document.
final class DispatchWithoutOperatorTests: DispatchTestCase {
    override var serviceSettings: [String: String] { super.serviceSettings.filter { $0.key != "OPERATOR_TOKEN" } }

    func testTheOperatorRoutesDoNotExistWithoutAToken() throws {
        let sender = try person()
        assertClientError(try api.post("/v1/operator/couriers", ["couriers": []], token: sender.token), 404)
        assertClientError(try api.get("/v1/operator/offers", token: "anything"), 404)
        assertClientError(try api.post("/v1/operator/couriers/\(sender.id)/approve", ["operator": "x"], token: "anything"), 404)
        let paths = try api.get("/openapi.json")["paths"] as? [String: Any] ?? [:]
        XCTAssertEqual(paths.keys.filter { $0.contains("/v1/operator/") }, [])
        let schemes = ((try api.get("/openapi.json")["components"] as? [String: Any])?["securitySchemes"] as? [String: Any]) ?? [:]
        XCTAssertEqual(Set(schemes.keys), ["bearer", "streamTicket", "signedURL"])
    }
}

extension APIResponse {
    var errorMessage: String? { (json["error"] as? [String: Any])?["message"] as? String }
}
