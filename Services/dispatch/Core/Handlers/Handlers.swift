import Events
import Features
import Foundation
import Geo
import HTTP
import Models
import Payments
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
    /// Card payments through the provider; nil when none is set up (`STRIPE_SECRET_KEY`): cards are refused.
    let payments: PaymentSettler?
    /// Stripe's webhook signatures (`STRIPE_WEBHOOK_SECRET`).
    let webhookSignature: StripeWebhookSignature?
    /// A courier's share of what they deliver.
    let earnings: EarningsRule
    let tariff = Tariff()
    let tariffs = TariffBook()
    /// Claim codes, limited in guesses as invite codes are.
    let claims = InviteJoins(schema: "dispatch", table: "claim_failures")
    var parcels: Parcels { Parcels(storage: storage, outbox: outbox, matcher: matcher, earnings: earnings) }
    var couriers: Couriers { Couriers(storage: storage, parcels: parcels, matcher: matcher, tracking: tracking) }
    var centres: Centres { Centres(parcels: parcels) }

    // MARK: Couriers

    /// A vehicle under review or of a suspended courier stays as it is; an approved courier's new vehicle is vetted
    /// anew (`registerCourier`).
    func registerCourier(_ context: Context<Caller>, _ body: RegisterCourierBody) throws -> Response {
        let courier = try pool.withTransaction { c in
            // Locked, so that an operator's decision lands before or after this change, never beside it.
            if let known = try storage.courier(c, context.caller.userId, lock: true), known.vehicle != body.vehicle,
               [.pending, .suspended].contains(known.vetting) {
                throw VettingError.vehicleVetted(known.vetting)
            }
            return try storage.registerCourier(c, user: context.caller.userId, vehicle: body.vehicle, capacity: body.capacity)
        }
        matcher.update(courier)
        return .json(CourierView(matcher.latest(courier)), status: 201)
    }

    /// Online only once approved (`Vetting`): a courier not approved, or suspended, is told why.
    func setStatus(_ context: Context<Caller>, _ body: CourierStatusBody) throws -> Response {
        let user = context.caller.userId
        let courier = try pool.withTransaction { c in
            if let courier = try storage.setOnline(c, user: user, online: body.online) { return courier }
            guard let known = try storage.courier(c, user) else { throw HTTPError.notFound("Register as a courier first.") }
            throw VettingError.notApproved(known.vetting)
        }
        matcher.update(courier)
        return .json(CourierView(matcher.latest(courier)))
    }

    func location(_ context: Context<Caller>, _ body: LocationBody) throws -> Response {
        let caller = context.caller
        let fix = try Fix(courier: caller.userId, lat: body.lat, lon: body.lon, heading: body.heading, speedMps: body.speedMps, at: body.at)
        let applied = try pool.withTransaction { c in
            let applied = try couriers.record(c, [fix], refusing: true) == 1
            if !applied, try storage.courier(c, caller.userId) == nil { throw HTTPError.notFound("Register as a courier first.") }
            return applied  // false: stale or out of order, ignored
        }
        return .json(AppliedView(applied: applied))
    }

    // MARK: Quotes and parcels

    func quote(_ context: Context<Caller>, _ body: QuoteBody) throws -> Response {
        try pool.withConnection { c in
            let route = try centres.itinerary(c, pickup: body.pickup.map { ($0.point, "") }, dropoff: body.dropoff.map { ($0.point, "") },
                                              dropOffCentre: body.dropOffCentreId, collectionCentre: body.collectionCentreId)
            var quote = try quote(c, context.caller.userId, route, body.service, insured: body.insured ?? false, by: try tariffs.inForce(c))
            quote.validUntil = Date().addingTimeInterval(TariffBook.quoteValidity)
            return .json(QuoteView(quote: quote))
        }
    }

    /// `sender`'s price by `tariff`: their plan's benefits applied.
    private func quote(_ c: Connection, _ sender: UUID, _ route: Itinerary, _ service: ParcelService, insured: Bool,
                       by tariff: Tariff) throws -> Quote {
        let plan = try parcels.payments.plans.running(c, sender, currency: tariff.currency)
        let quote = tariff.quote(meters: greatCircleMeters(route.pickup, route.dropoff), service: service, insured: insured,
                                 plan: plan.map { ($0.id, $0.benefits) })
        // Past what one card payment may take (Stripe's 999,999.99), and what the columns hold: a tariff an operator
        // may set makes a long enough trip cost that.
        guard quote.amountMinor <= Self.maxPriceMinor else {
            throw HTTPError.validation("This delivery would cost more than one payment can take: choose a nearer drop-off.", field: "dropoff")
        }
        return quote
    }

    static let maxPriceMinor = 99_999_999

    /// Books a parcel, offered at once when it can be (`Parcels.create`). A card is authorised before the answer when
    /// the provider answers in time (a declined card leaves the parcel cancelled, saying why); otherwise the parcel
    /// stays `awaiting_payment` and the settler asks again.
    func createParcel(_ context: Context<Caller>, _ body: CreateParcelBody) throws -> Response {
        let caller = context.caller
        if body.paymentMethod == .card {
            guard payments != nil else { throw PaymentError.cardsOff }
            guard body.cardPaymentMethod != nil else { throw PaymentError.cardMissing }
        }
        let created = Opened()
        return try idempotency.run(context.request, caller: caller.userId.lowercased, finishingWithin: 2 * (payments?.lease ?? 1)) { c in
            try media.requireOwned([body.documentPhotoMediaId], by: caller.userId, field: "documentPhotoMediaId", on: c)
            let route = try centres.itinerary(c, pickup: body.pickup.map { ($0.point, $0.address) }, dropoff: body.dropoff.map { ($0.point, $0.address) },
                                              dropOffCentre: body.dropOffCentreId, collectionCentre: body.collectionCentreId)
            let parcel = try parcels.create(c, sender: caller.userId, body: body, route: route,
                                            quote: try quote(c, caller.userId, route, body.service, insured: body.insured ?? false,
                                                             by: try tariffs.forBooking(c, quoted: body.tariffId)),
                                            paymentLease: payments?.lease ?? 0)
            created.id = parcel.id
            created.waiting = parcel.status == .awaitingCourier
            return .json(try view(c, parcel, for: caller.userId), status: 201)
        } then: { response in  // (a first request's only: its answer is the one a retry gets)
            if created.waiting, let id = created.id { matcher.wake(for: id) }  // (not offered at once)
            guard body.paymentMethod == .card, let id = created.id, let payments else { return response }
            if let payment = try pool.withConnection({ try storage.payment($0, parcel: id) }) { askNow(payment.id, payments) }  // else the settler asks
            return try pool.withConnection { c in
                guard let parcel = try storage.parcel(c, id) else { return response }
                return .json(try view(c, parcel, for: caller.userId), status: 201)
            }
        }
    }

    func getParcel(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self), caller = context.caller
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
        let details = try storage.parcelDetails(c, parcel, withPayment: viewer == parcel.senderId)
        let courier = details.courier.map {
            CourierCard(courier: matcher.latest($0.courier), profile: $0.profile, phone: mayCall ? $0.profile?.phone : nil, urls: media.urls)
        }
        return ParcelView(parcel, for: viewer, at: whereIs(viewer), earnings: earnings, history: details.history, courier: courier, payment: details.payment,
                          dropOffCentre: details.dropOffCentre, collectionCentre: details.collectionCentre, media: media)
    }

    /// Where a courier was last, as far as this instance knows: how far an offer's pickup is from them.
    func whereIs(_ courier: UUID) -> GeoPoint? { matcher.position(of: courier, newerThan: nil)?.point }

    /// `POST /v1/parcel-claims`: the caller becomes the recipient of the parcel its sender gave them the code of.
    /// Codes nobody holds count against the caller (`claims.throttle`).
    func claim(_ context: Context<Caller>, _ body: ClaimBody) throws -> Response {
        let caller = context.caller
        return try claims.join(pool, typed: body.code, user: caller.userId, unknown: ParcelError.unknownClaimCode) { c, code in
            try parcels.claim(c, code: code, by: caller.userId).map { .json(try view(c, $0, for: caller.userId)) }
        }
    }

    func listParcels(_ context: Context<Caller>) throws -> Response {
        let request = context.request, caller = context.caller
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
        return .json(PageResponse(parcels, page, item: { ParcelView($0, for: caller.userId, at: whereIs(caller.userId), earnings: earnings, media: media) }, cursor: { [$0.id.lowercased] }))
    }

    // MARK: Actions

    func accept(_ context: Context<Caller>, _ c: Connection) throws -> Response { try act(context, .accept, c) }
    func decline(_ context: Context<Caller>, _ c: Connection) throws -> Response { try act(context, .decline, c) }
    func pickup(_ context: Context<Caller>, _ c: Connection) throws -> Response { try act(context, .pickup, c) }
    func cancel(_ context: Context<Caller>, _ c: Connection) throws -> Response { try act(context, .cancel, c) }

    /// Delivered with a photo, or with the recipient's PIN too, received; a parcel its recipient collects at a centre
    /// is left there. A cash parcel's price is taken at the door (at a centre, when collected).
    func deliver(_ context: Context<Caller>, _ body: DeliverBody) throws -> Response {
        let photo = body.photoMediaId, caller = context.caller
        let id = try context.parameters.require("id", as: UUID.self)
        // (Only for one of its parties: anyone else learns nothing here, and gets the 404 below.)
        if try pool.withConnection({ try storage.parcel($0, id).flatMap { $0.involves(caller.userId) ? $0.collectionCentreId : nil } }) != nil {
            guard body.pin == nil, body.cashCollectedMinor == nil else {
                throw HTTPError.validation("This parcel is collected at a centre: its recipient shows the PIN and pays there.", field: "pin")
            }
            return try act(context, .leaveAtCentre) { c, p in
                try media.requireOwned([photo], by: caller.userId, field: "photoMediaId", on: c)
                p.deliveryPhotoMediaId = photo
            }
        }
        guard let pin = body.pin else {
            return try act(context, .deliver, cashCollected: body.cashCollectedMinor) { c, p in
                try media.requireOwned([photo], by: caller.userId, field: "photoMediaId", on: c)
                p.deliveryPhotoMediaId = photo
            }
        }
        return try idempotency.attempt(context.request, caller: caller.userId.lowercased) { c -> Result<Response, ParcelError> in
            try media.requireOwned([photo], by: caller.userId, field: "photoMediaId", on: c)
            switch try parcels.handOver(c, id, by: caller.userId, pin: pin, photo: photo, cashCollected: body.cashCollectedMinor) {
            case .success(let parcel): return .success(.json(try view(c, parcel, for: caller.userId)))
            case .failure(let refusal): return .failure(refusal)  // the wrong PIN is counted: commit, then refuse
            }
        }.get()
    }

    func confirm(_ context: Context<Caller>, _ body: PhotoBody, _ c: Connection) throws -> Response {
        let photo = body.photoMediaId, user = context.caller.userId
        return try perform(c, try context.parameters.require("id", as: UUID.self), by: user, .confirm) { c, p in
            try media.requireOwned([photo], by: user, field: "photoMediaId", on: c)
            p.receiptPhotoMediaId = photo
        }
    }

    func fail(_ context: Context<Caller>, _ body: FailBody, _ c: Connection) throws -> Response {
        let reason = body.reason
        return try perform(c, try context.parameters.require("id", as: UUID.self), by: context.caller.userId, .fail) { _, p in
            p.failureReason = reason
        }
    }

    /// The caller's `action` in the transaction `c` their route's `Idempotency` opened; the matcher looks again once
    /// it committed when the parcel may need another courier.
    private func act(_ context: Context<Caller>, _ action: ParcelAction, _ c: Connection) throws -> Response {
        if action == .decline || action == .cancel { c.afterCommit { [matcher] in matcher.wake() } }
        return try perform(c, try context.parameters.require("id", as: UUID.self), by: context.caller.userId, action, nil)
    }

    private func act(_ context: Context<Caller>, _ action: ParcelAction, cashCollected: Int? = nil,
                     _ change: ((Connection, inout ParcelRecord) throws -> Void)? = nil) throws -> Response {
        try perform(context.request, try context.parameters.require("id", as: UUID.self), by: context.caller.userId, action,
                    cashCollected: cashCollected, change)
    }

    /// One party's action, in a transaction (sent again with its `Idempotency-Key`, answered as the first time); `by`
    /// scopes the key too.
    func perform(_ request: Request, _ id: UUID, by user: UUID, _ action: ParcelAction, cashCollected: Int? = nil,
                 _ change: ((Connection, inout ParcelRecord) throws -> Void)? = nil) throws -> Response {
        try idempotency.run(request, caller: user.lowercased) { c in
            try perform(c, id, by: user, action, cashCollected: cashCollected, change)
        }
    }

    /// One party's action in the transaction `c`, answered with the parcel as they see it.
    private func perform(_ c: Connection, _ id: UUID, by user: UUID, _ action: ParcelAction, cashCollected: Int? = nil,
                         _ change: ((Connection, inout ParcelRecord) throws -> Void)?) throws -> Response {
        let updated = try parcels.perform(c, id, by: user, action, cashCollected: cashCollected) { try change?(c, &$0) }
        return .json(try view(c, updated, for: user))
    }

    // MARK: Payments


    /// `POST /v1/payments/stripe/webhook`: an event from Stripe, its signature checked (400 otherwise), each event
    /// acted on once however often it comes.
    func stripeWebhook(_ request: Request) throws -> Response {
        guard let object = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any],
              let id = object["id"] as? String, let type = object["type"] as? String, id.count <= 255, type.count <= 255 else {
            throw HTTPError.validation("The body is not a Stripe event.")
        }
        let intent = (object["data"] as? [String: Any])?["object"] as? [String: Any]
        try pool.withTransaction { c in
            guard try storage.firstSight(c, providerEvent: id, type: type), let intent, let payments else { return }
            try payments.webhook(c, type: type, intent: intent)
        }
        return .json(ReceivedView(received: true))
    }

    // MARK: Media

    func uploadMedia(_ context: Context<Caller>) throws -> Response {
        try media.upload(context.request, owner: context.caller.userId, idempotency: idempotency)
    }

    /// A parcel's photo, by the signed URL its view gave, or for its uploader and whoever the parcel involves; never
    /// an identity document's (the operators' route alone serves those).
    func getMedia(_ request: Request, _ caller: Caller?) throws -> Response {
        let id = try Validate.pathID(request)
        return try pool.withConnection { c in
            guard caller != nil else {
                guard let found = try storage.mediaByURL(c, id) else { throw HTTPError.notFound() }
                return try media.serve(request, found, on: c)
            }
            return try media.serve(request, id, caller: caller, on: c) { try storage.visibleMedia(c, id, reader: $0) }
        }
    }

}
