import Events
import Features
import Foundation
import Geo
import HTTP
import Models
import Postgres
import Web

/// The dispatch service's handlers: they take the decoded request, run the domain (`Parcels`, `Couriers`) in a
/// transaction and map the result to its view. The rules and their refusals (404 for anyone not a party, 403 for
/// another party's action, 409 for a transition the status machine does not have) live in the domain.
struct DispatchHandlers: Sendable {
    let pool: Pool
    let outbox: Outbox
    let idempotency: Idempotency
    let matcher: Matcher
    let tracking: ParcelTracking
    let storage = DispatchStorage()
    let media: MediaStore
    let tariff = Tariff()
    /// Claim codes, limited in guesses as invite codes are.
    let claims = InviteJoins(schema: "dispatch", table: "claim_failures")
    var parcels: Parcels { Parcels(storage: storage, outbox: outbox) }
    var couriers: Couriers { Couriers(storage: storage, parcels: parcels, matcher: matcher, tracking: tracking) }

    // MARK: Couriers

    func registerCourier(_ request: Request, _ caller: Caller, _ body: RegisterCourierBody) throws -> Response {
        let courier = try pool.withTransaction { try storage.registerCourier($0, user: caller.userId, vehicle: body.vehicle, capacity: body.capacity) }
        return .json(CourierView(courier), status: 201)
    }

    func setStatus(_ request: Request, _ caller: Caller, _ body: CourierStatusBody) throws -> Response {
        guard let courier = try pool.withTransaction({ try storage.setOnline($0, user: caller.userId, online: body.online) }) else {
            throw HTTPError.notFound("Register as a courier first.")
        }
        matcher.update(courier)
        return .json(CourierView(courier))
    }

    func location(_ request: Request, _ caller: Caller, _ body: LocationBody) throws -> Response {
        let fix = try Fix(courier: caller.userId, lat: body.lat, lon: body.lon, heading: body.heading, speedMps: body.speedMps, at: body.at)
        let applied = try pool.withTransaction { c in
            let applied = try couriers.record(c, [fix]) == 1
            if !applied, try storage.courier(c, caller.userId) == nil { throw HTTPError.notFound("Register as a courier first.") }
            return applied  // false: stale or out of order, ignored
        }
        return .json(AppliedView(applied: applied))
    }

    // MARK: Quotes and parcels

    func quote(_ request: Request, _ caller: Caller, _ body: QuoteBody) throws -> Response {
        let meters = greatCircleMeters(body.pickup.point, body.dropoff.point)
        return .json(QuoteView(quote: tariff.quote(meters: meters, service: body.service, insured: body.insured ?? false)))
    }

    func createParcel(_ request: Request, _ caller: Caller, _ body: CreateParcelBody) throws -> Response {
        let quote = tariff.quote(meters: greatCircleMeters(body.pickup.point, body.dropoff.point), service: body.service,
                                 insured: body.insured ?? false)
        let response = try idempotency.run(request, caller: caller.userId.lowercased) { c in
            try media.requireOwned([body.documentPhotoMediaId], by: caller.userId, field: "documentPhotoMediaId", on: c)
            let parcel = try parcels.create(c, sender: caller.userId, body: body, quote: quote)
            return .json(try view(c, parcel, for: caller.userId), status: 201)
        }
        matcher.wake()
        return response
    }

    func getParcel(_ request: Request, _ caller: Caller) throws -> Response {
        let id = try Validate.pathID(request)
        return try pool.withConnection { c in
            guard let parcel = try storage.parcel(c, id), parcel.involves(caller.userId) else { throw ParcelError.notFound }
            return .json(try view(c, parcel, for: caller.userId))
        }
    }

    /// A parcel as `viewer` sees it on its own: with its history, its courier's card and position; the courier's
    /// phone only to its sender and recipient, and only while the courier carries it (assigned until delivered).
    func view(_ c: Connection, _ parcel: ParcelRecord, for viewer: UUID) throws -> ParcelView {
        let carrying: Set<ParcelStatus> = [.assigned, .pickedUp, .inTransit]
        let mayCall = carrying.contains(parcel.status) && (viewer == parcel.senderId || viewer == parcel.recipientUserId)
        let courier = try parcel.courierId.flatMap { id in
            try storage.courier(c, id).map {
                let profile = try storage.profile(c, id)
                return CourierCard(courier: $0, profile: profile, phone: mayCall ? profile?.phone : nil, urls: media.urls)
            }
        }
        return ParcelView(parcel, for: viewer, history: try storage.history(c, parcel: parcel.id), courier: courier, media: media)
    }

    /// `POST /v1/parcel-claims`: the caller becomes the recipient of the parcel its sender gave them the code of.
    /// Codes nobody holds count against the caller (`claims.throttle`).
    func claim(_ request: Request, _ caller: Caller, _ body: ClaimBody) throws -> Response {
        try claims.join(pool, typed: body.code, user: caller.userId, unknown: ParcelError.unknownClaimCode) { c, code in
            try parcels.claim(c, code: code, by: caller.userId).map { .json(try view(c, $0, for: caller.userId)) }
        }
    }

    func listParcels(_ request: Request, _ caller: Caller) throws -> Response {
        let page = try Page(request)
        let role = request.query["role"] ?? "sender"
        guard ["sender", "recipient", "courier"].contains(role) else {
            throw HTTPError.validation("role must be sender, recipient or courier.", field: "role")
        }
        let status = request.query["status"]
        if let status, ParcelStatus(rawValue: status) == nil { throw HTTPError.validation("status is not a parcel status.", field: "status") }
        let after = try page.after.map { values -> UUID in
            guard values.count == 1, let id = UUID(uuidString: values[0]) else { throw HTTPError.validation("cursor is not valid.", field: "cursor") }
            return id
        }
        let parcels = try pool.withConnection { try storage.list($0, user: caller.userId, role: role, status: status, after: after, limit: page.limit + 1) }
        return .json(PageResponse(parcels, page, item: { ParcelView($0, for: caller.userId, media: media) }, cursor: { [$0.id.lowercased] }))
    }

    // MARK: Actions

    func accept(_ r: Request, _ c: Caller) throws -> Response { try act(r, c, .accept) }
    func decline(_ r: Request, _ c: Caller) throws -> Response { try act(r, c, .decline) }
    func pickup(_ r: Request, _ c: Caller) throws -> Response { try act(r, c, .pickup) }
    func cancel(_ r: Request, _ c: Caller) throws -> Response { try act(r, c, .cancel) }

    /// Delivered with a photo, or with the recipient's PIN too, received.
    func deliver(_ request: Request, _ caller: Caller, _ body: DeliverBody) throws -> Response {
        let photo = body.photoMediaId
        guard let pin = body.pin else {
            return try act(request, caller, .deliver) { c, p in
                try media.requireOwned([photo], by: caller.userId, field: "photoMediaId", on: c)
                p.deliveryPhotoMediaId = photo
            }
        }
        let id = try Validate.pathID(request)
        return try pool.withTransaction { c -> Result<Response, ParcelError> in
            try media.requireOwned([photo], by: caller.userId, field: "photoMediaId", on: c)
            switch try parcels.handOver(c, id, by: caller.userId, pin: pin, photo: photo) {
            case .success(let parcel): return .success(.json(try view(c, parcel, for: caller.userId)))
            case .failure(let refusal): return .failure(refusal)  // the wrong PIN is counted: commit, then refuse
            }
        }.get()
    }

    func confirm(_ request: Request, _ caller: Caller, _ body: PhotoBody) throws -> Response {
        let photo = body.photoMediaId
        return try act(request, caller, .confirm) { c, p in
            try media.requireOwned([photo], by: caller.userId, field: "photoMediaId", on: c)
            p.receiptPhotoMediaId = photo
        }
    }

    func fail(_ request: Request, _ caller: Caller, _ body: FailBody) throws -> Response {
        let reason = body.reason
        return try act(request, caller, .fail) { _, p in p.failureReason = reason }
    }

    private func act(_ request: Request, _ caller: Caller, _ action: ParcelAction,
                     _ change: ((Connection, inout ParcelRecord) throws -> Void)? = nil) throws -> Response {
        try perform(try Validate.pathID(request), by: caller.userId, action, change)
    }

    /// One party's action, in a transaction; the matcher looks again when a parcel may need another courier.
    func perform(_ id: UUID, by user: UUID, _ action: ParcelAction,
                 _ change: ((Connection, inout ParcelRecord) throws -> Void)? = nil) throws -> Response {
        let response = try pool.withTransaction { c -> Response in
            let updated = try parcels.perform(c, id, by: user, action) { try change?(c, &$0) }
            return .json(try view(c, updated, for: user))
        }
        if action == .decline || action == .cancel { matcher.wake() }
        return response
    }

    // MARK: Media

    func uploadMedia(_ request: Request, _ caller: Caller) throws -> Response {
        try media.upload(request, owner: caller.userId, idempotency: idempotency)
    }

    /// A parcel's photo, by the signed URL its view gave, or for its uploader and whoever the parcel involves.
    func getMedia(_ request: Request, _ caller: Caller?) throws -> Response {
        let id = try Validate.pathID(request)
        return try pool.withConnection { c in
            try media.serve(request, id, caller: caller, on: c) { try storage.visibleMedia(c, id, reader: $0) }
        }
    }

}
