import Foundation
import Geo
import HTTP
import Postgres
import Web

/// Reception centres: the nearest for the apps, check-ins and collections for their staff, and the operator's
/// management of centres and staff. Anyone but a centre's staff gets 404 for its staff routes.
extension DispatchHandlers {
    /// `GET /v1/centres?lat=&lon=&limit=`: the nearest centres, each with whether it is open now and when it opens.
    func nearestCentres(_ context: Context<Caller>) throws -> Response {
        let request = context.request
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
    func checkIn(_ context: Context<Caller>, _ body: CheckInBody) throws -> Response {
        let centre = try context.parameters.require("id", as: UUID.self), caller = context.caller
        let checkedIn = Opened()
        let response = try idempotency.run(context.request, caller: caller.userId.lowercased) { c in
            try requireStaff(c, centre, caller)
            let parcel = try centres.checkIn(c, centre: centre, code: body.code, by: caller.userId)
            checkedIn.id = parcel.id
            return .json(try view(c, parcel, for: caller.userId))
        }
        if let parcel = checkedIn.id { matcher.wake(for: parcel) }  // it waits for a courier now (not when answered again)
        return response
    }

    /// `POST /v1/centres/{id}/collections`: staff hand a parcel to its recipient, who shows its code and the PIN.
    func collect(_ context: Context<Caller>, _ body: CollectBody) throws -> Response {
        let centre = try context.parameters.require("id", as: UUID.self), caller = context.caller
        let response = try idempotency.attempt(context.request, caller: caller.userId.lowercased) { c -> Result<Response, ParcelError> in
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

    /// `POST /v1/operator/centres`: a new centre, 201.
    func createCentre(_ context: Context<Void>, _ body: CentreBody, _ c: Connection) throws -> Response {
        .json(CentreView(try storage.saveCentre(c, id: UUID.v7(), try centre(body))), status: 201)
    }

    /// `PUT /v1/operator/centres/{id}`: its new description.
    func updateCentre(_ context: Context<Void>, _ body: CentreBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self), centre = try centre(body)
        return .json(CentreView(try pool.withTransaction { c -> CentreRecord in
            guard try storage.centre(c, id) != nil else { throw HTTPError.notFound("Not found.") }
            return try storage.saveCentre(c, id: id, centre)
        }))
    }

    private func centre(_ body: CentreBody) throws -> CentreDescription {
        guard TimeZone(identifier: body.timeZone) != nil else { throw HTTPError.validation("timeZone is not a time zone.", field: "timeZone") }
        return CentreDescription(name: body.name, address: body.address, point: GeoPoint(lat: body.lat, lon: body.lon),
                                 timeZone: body.timeZone, openingHours: try OpeningHours.validated(body.openingHours, field: "openingHours"),
                                 acceptsDropOffs: body.acceptsDropOffs, acceptsCollections: body.acceptsCollections)
    }

    /// `PUT` / `DELETE /v1/operator/centres/{id}/staff/{userId}`: names someone staff of a centre, or no longer.
    func setStaff(_ context: Context<Void>) throws -> Response {
        let centre = try context.parameters.require("id", as: UUID.self), user = try context.parameters.require("userId", as: UUID.self)
        try pool.withTransaction { c in
            guard try storage.centre(c, centre) != nil else { throw HTTPError.notFound("Not found.") }
            try storage.setStaff(c, centre: centre, user: user, context.request.method == "PUT")
        }
        return .noContent
    }
}
