import Foundation
import Geo
import HTTP
import Postgres
import Web

/// Reception centres: the nearest for the apps, check-ins and collections for their staff, and the operator's
/// management of centres and staff. Anyone but a centre's staff gets 404 for its staff routes.
extension DispatchHandlers {
    /// `GET /v1/centres?lat=&lon=&limit=`: the nearest centres, each with whether it is open now and when it opens.
    func nearestCentres(_ request: Request, _ caller: Caller) throws -> Response {
        guard let lat = request.query["lat"].flatMap(Double.init), (-90...90).contains(lat) else {
            throw HTTPError.validation("lat must be a latitude.", field: "lat")
        }
        guard let lon = request.query["lon"].flatMap(Double.init), (-180...180).contains(lon) else {
            throw HTTPError.validation("lon must be a longitude.", field: "lon")
        }
        let limit = try Page(request, maxLimit: 50, defaultLimit: 10).limit
        let centres = try pool.withConnection { try storage.nearestCentres($0, to: GeoPoint(lat: lat, lon: lon), limit: limit) }
        return .json(ItemList(centres.map { CentreView($0) }))
    }

    /// `POST /v1/centres/{id}/check-ins`: staff take in the parcel whose code its sender shows.
    func checkIn(_ request: Request, _ caller: Caller, _ body: CheckInBody) throws -> Response {
        let centre = try Validate.pathID(request)
        let checkedIn = Opened()
        let response = try idempotency.run(request, caller: caller.userId.lowercased) { c in
            try requireStaff(c, centre, caller)
            let parcel = try centres.checkIn(c, centre: centre, code: body.code, by: caller.userId)
            checkedIn.id = parcel.id
            return .json(try view(c, parcel, for: caller.userId))
        }
        if let parcel = checkedIn.id { matcher.wake(for: parcel) }  // it waits for a courier now (not when answered again)
        return response
    }

    /// `POST /v1/centres/{id}/collections`: staff hand a parcel to its recipient, who shows its code and the PIN.
    func collect(_ request: Request, _ caller: Caller, _ body: CollectBody) throws -> Response {
        let centre = try Validate.pathID(request)
        let response = try idempotency.attempt(request, caller: caller.userId.lowercased) { c -> Result<Response, ParcelError> in
            try requireStaff(c, centre, caller)
            switch try centres.collect(c, centre: centre, code: body.code, pin: body.pin, by: caller.userId, cashCollected: body.cashCollectedMinor) {
            case .success(let parcel): return .success(.json(try view(c, parcel, for: caller.userId)))
            case .failure(let refusal): return .failure(refusal)  // the wrong PIN is counted: commit, then refuse
            }
        }
        return try response.get()
    }

    private func requireStaff(_ c: Connection, _ centre: UUID, _ caller: Caller) throws {
        guard try storage.isStaff(c, centre: centre, user: caller.userId) else { throw HTTPError.notFound("Not found.") }
    }

    // MARK: Operators

    /// `POST /v1/operator/centres` (a new centre, 201) and `PUT /v1/operator/centres/{id}` (its new description).
    func saveCentre(_ request: Request, _ body: CentreBody) throws -> Response {
        let isNew = request.method == "POST"
        let id = isNew ? UUID.v7() : try Validate.pathID(request)
        guard TimeZone(identifier: body.timeZone) != nil else { throw HTTPError.validation("timeZone is not a time zone.", field: "timeZone") }
        let centre = CentreDescription(name: body.name, address: body.address, point: GeoPoint(lat: body.lat, lon: body.lon),
                                       timeZone: body.timeZone, openingHours: try OpeningHours.validated(body.openingHours, field: "openingHours"),
                                       acceptsDropOffs: body.acceptsDropOffs, acceptsCollections: body.acceptsCollections)
        guard isNew else {
            return .json(CentreView(try pool.withTransaction { c -> CentreRecord in
                guard try storage.centre(c, id) != nil else { throw HTTPError.notFound("Not found.") }
                return try storage.saveCentre(c, id: id, centre)
            }))
        }
        return try idempotency.run(request, caller: "operator") { c in .json(CentreView(try storage.saveCentre(c, id: id, centre)), status: 201) }
    }

    /// `PUT` / `DELETE /v1/operator/centres/{id}/staff/{userId}`: names someone staff of a centre, or no longer.
    func setStaff(_ request: Request) throws -> Response {
        let centre = try Validate.pathID(request), user = try Validate.pathID(request, "userId")
        try pool.withTransaction { c in
            guard try storage.centre(c, centre) != nil else { throw HTTPError.notFound("Not found.") }
            try storage.setStaff(c, centre: centre, user: user, request.method == "PUT")
        }
        return .noContent
    }
}
