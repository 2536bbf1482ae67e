import Foundation
import XCTest

/// A courier goes online only once an operator approved them: what every test with a courier of its own does first.
enum CourierVetting {
    /// Uploads the photos of an identity document and of a vehicle as the courier behind `token`, applies, and has an
    /// operator (`operatorToken`, dispatch's OPERATOR_TOKEN) approve them. Returns the approved application.
    @discardableResult
    static func approve(_ api: APIClient, courier id: String, token: String, operatorToken: String, vehicle: String = "bike",
                        file: StaticString = #filePath, line: UInt = #line) throws -> APIResponse {
        let applied = try apply(api, token: token, vehicle: vehicle, file: file, line: line)
        XCTAssertEqual(applied.status, 201, String(decoding: applied.body, as: UTF8.self), file: file, line: line)
        let approved = try api.post("/v1/operator/couriers/\(id)/approve", ["operator": "Test Operator"], token: operatorToken)
        XCTAssertEqual(approved.status, 200, String(decoding: approved.body, as: UTF8.self), file: file, line: line)
        return approved
    }

    /// The courier's application, with photos uploaded for it (`overrides` replaces members of the body).
    static func apply(_ api: APIClient, token: String, vehicle: String = "bike", overrides: [String: Any] = [:],
                      file: StaticString = #filePath, line: UInt = #line) throws -> APIResponse {
        var body: [String: Any] = [
            "legalName": "Cora Ionescu", "phone": "+40 700 000 001", "vehicle": vehicle, "consent": true,
            "identityPhotoMediaId": try upload(api, token: token, purpose: "identity", file: file, line: line),
            "vehiclePhotoMediaId": try upload(api, token: token, purpose: "vehicle", file: file, line: line),
        ]
        body.merge(overrides) { $1 }
        return try api.post("/v1/couriers/me/application", body, token: token)
    }

    /// A photo uploaded for `purpose` (`identity`, `vehicle`, `parcel`); its id.
    static func upload(_ api: APIClient, token: String, purpose: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let r = try api.send("POST", "/v1/dispatch/media?purpose=\(purpose)", raw: Images.jpeg, token: token,
                             headers: ["Content-Type": "image/jpeg"])
        XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self), file: file, line: line)
        return r["id"] as? String ?? ""
    }
}
