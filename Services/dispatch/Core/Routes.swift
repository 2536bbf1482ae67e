import Features
import Payments
import HTTP
import Identity
import Web

/// The dispatch API: the table of routes, nothing else. Every route needs a bearer token: a user's, or on
/// `/v1/operator/...` the operator's, or on a fleet gateway's routes its own or the operator's (the event stream
/// takes a stream ticket too).
func makeRoutes(_ h: DispatchHandlers, _ auth: any Authenticator, tickets: StreamTickets, operators: SharedSecret, fleet: SharedSecret,
                services: SharedSecret) -> Router {
    var r = Router()
    r.group("/v1/couriers/me", .user(auth)) { couriers in
        couriers.add("POST", "", "Register (or update) the caller as a courier", body: RegisterCourierBody.self,
                     answers: (201, CourierView.shape), h.registerCourier)
        couriers.add("PUT", "/status", "Go online (once an operator approved the caller) or offline", body: CourierStatusBody.self,
                     answers: (200, CourierView.shape), also: [.refusal(403, "Not approved: apply, wait for an operator, or suspended")],
                     h.setStatus)
        couriers.add("POST", "/application", "Apply to deliver: legal name, phone, vehicle, photos of an identity document and the vehicle",
                     body: CourierApplicationBody.self, answers: (201, CourierApplicationView.shape), idempotent: h.idempotency,
                     h.applyAsCourier)
        couriers.add("GET", "/application", "Where my application stands, and why it was rejected or I was suspended",
                     answers: (200, CourierApplicationView.shape), h.myApplication)
        couriers.add("PUT", "/location", "A location fix; stale or out-of-order fixes are ignored, one beyond the courier's reach refused",
                     body: LocationBody.self, answers: (200, AppliedView.shape), h.location)
        couriers.add("GET", "/earnings", "My earnings statement for an ISO week (?week=2026-W49, UTC, default this week): each parcel I delivered, my share, the total",
                     answers: (200, EarningsStatementView.shape), query: [ISOWeek.parameter], h.earningsStatement)
    }
    r.group("/v1", .user(auth)) { parcels in
        parcels.add("POST", "/quotes", "Price and ETA for a delivery", body: QuoteBody.self,
                    answers: (200, QuoteView.shape), h.quote)
        parcels.add("POST", "/parcels", "Send a parcel; the nearest available courier is offered it", body: CreateParcelBody.self,
                    answers: (201, ParcelView.shape), idempotent: true, h.createParcel)
        parcels.add("GET", "/parcels", "My parcels as sender, recipient or courier (?role=&status=)",
                    answers: (200, PageResponse<ParcelView>.shape), query: QueryParameter.page + [
                        QueryParameter("role", .oneOf(["sender", "recipient", "courier"]), "Parcels I send, receive or carry", default: "sender"),
                        QueryParameter("status", Shapes.status, "Only parcels in this status")], h.listParcels)
        parcels.add("GET", "/parcels/{id}", "A parcel with its history and the courier's position",
                    answers: (200, ParcelView.shape), h.getParcel)
        parcels.add("POST", "/parcels/{id}/accept", "The offered courier takes the parcel", answers: (200, ParcelView.shape),
                    idempotent: h.idempotency, h.accept)
        parcels.add("POST", "/parcels/{id}/decline", "The offered courier refuses it", answers: (200, ParcelView.shape),
                    idempotent: h.idempotency, h.decline)
        parcels.add("POST", "/parcels/{id}/pickup", "The courier has it", answers: (200, ParcelView.shape), idempotent: h.idempotency, h.pickup)
        parcels.add("POST", "/parcel-claims", "Become the recipient of a parcel by the claim code its sender passed on",
                    body: ClaimBody.self, answers: (200, ParcelView.shape), h.claim)
        parcels.add("POST", "/parcels/{id}/deliver",
                    "The courier handed it over, with a photo: received with the recipient's PIN, else delivered and awaiting their confirmation",
                    body: DeliverBody.self, answers: (200, ParcelView.shape), idempotent: true, h.deliver)
        parcels.add("POST", "/parcels/{id}/fail", "The courier could not deliver it", body: FailBody.self,
                    answers: (200, ParcelView.shape), idempotent: h.idempotency, h.fail)
        parcels.add("POST", "/parcels/{id}/confirm", "The recipient confirms receipt, with a photo", body: PhotoBody.self,
                    answers: (200, ParcelView.shape), idempotent: h.idempotency, h.confirm)
        parcels.add("POST", "/parcels/{id}/cancel", "The sender cancels before pickup", answers: (200, ParcelView.shape),
                    idempotent: h.idempotency, h.cancel)
    }
    r.group("/v1/parcels", .stream(auth, tickets: tickets)) { streams in
        streams.add("GET", "/{id}/events", "Server-Sent Events: a snapshot, then every transition and courier position",
                    answers: (200, nil), also: [.eventStream], h.events)
    }
    r.group("/v1", .user(auth)) { money in
        money.add("GET", "/loyalty", "My loyalty points: the balance and the latest entries (?limit=)",
                  answers: (200, LoyaltyView.shape), query: [.limit(max: 100, default: 20)], h.loyaltyStatement)
        money.add("GET", "/wallet", "My wallet: the balance, top-ups still being taken, and the latest entries (?limit=)",
                  answers: (200, WalletView.shape), query: [.limit(max: 100, default: 20)], h.walletStatement)
        money.add("POST", "/wallet/top-ups", "Top up my wallet from a card, taken at once", body: TopUpBody.self,
                  answers: (201, TopUpView.shape), idempotent: true, h.topUp)
        money.add("GET", "/wallet/top-ups/{id}", "One of my top-ups: pending, captured or declined",
                  answers: (200, TopUpView.shape), h.getTopUp)
        money.add("GET", "/plans", "The plans one may subscribe to, with their monthly price and benefits",
                  answers: (200, ItemList<PlanView>.shape), h.listPlans)
        money.add("POST", "/plans/subscription", "Subscribe to a plan, its months taken from a card",
                  body: SubscribeBody.self, answers: (201, SubscriptionView.shape), idempotent: true, h.subscribe)
        money.add("GET", "/plans/subscription", "My subscription, if I have one", answers: (200, SubscriptionView.shape),
                  h.getSubscription)
        money.add("DELETE", "/plans/subscription", "Stop renewing my plan: it runs until its period ends",
                  answers: (200, SubscriptionView.shape), h.stopRenewing)
        money.add("GET", "/receipts", "My receipts, one for each payment taken by card, the newest first (?limit=)",
                  answers: (200, ItemList<ReceiptView>.shape), query: [.limit(max: 100, default: 20)], h.listReceipts)
        money.add("GET", "/receipts/{number}", "One of my receipts, by its number", answers: (200, ReceiptView.shape), h.getReceipt)
    }
    r.group("/v1/centres", .user(auth)) { centres in
        centres.add("GET", "", "The reception centres nearest a point (?lat=&lon=&limit=), open now or when they open",
                    answers: (200, ItemList<CentreView>.shape),
                    query: [QueryParameter("lat", .number(-90...90), "Latitude"), QueryParameter("lon", .number(-180...180), "Longitude"),
                            .limit(max: 50, default: 10)], h.nearestCentres)
        centres.add("POST", "/{id}/check-ins", "A centre's staff take in a parcel by the code its sender shows",
                    body: CheckInBody.self, answers: (200, ParcelView.shape), idempotent: true, h.checkIn)
        centres.add("POST", "/{id}/collections", "A centre's staff hand a parcel to its recipient, who shows its code and PIN",
                    body: CollectBody.self, answers: (200, ParcelView.shape), idempotent: true, h.collect)
    }
    r.group("/v1/dispatch/media", .user(auth)) { media in
        media.add("POST", "", "Upload a photo (raw JPEG, PNG, HEIC or WebP, 10 MiB at most)", answers: (201, MediaView.shape),
                  query: [h.media.purposeParameter], bodyLimit: MediaStore.limit, idempotent: true, h.uploadMedia)
    }
    r.addImage("/v1/dispatch/media/{id}", summary: "A photo, by the signed URL a parcel gave, or for its uploader and the parcel's sender, courier and recipient",
               auth: auth, urls: h.media.urls, h.getMedia)
    // Stripe signs its webhooks: the signature is the route's credential (400 without a valid one).
    if let signature = h.webhookSignature {
        r.add("POST", "/v1/payments/stripe/webhook", summary: "Stripe's events about card payments, signed (Stripe-Signature)",
              bodyLimit: 256 * 1024, request: stripeEvent, response: (200, ReceivedView.shape), credentials: { request in
                  guard signature.verifies(request.header("Stripe-Signature") ?? "", body: request.body) else {
                      throw HTTPError.validation("The Stripe-Signature header does not sign this body.", field: "Stripe-Signature")
                  }
              }) { request, _ in try h.stripeWebhook(request) }
    }
    r.addExport(services: services) { user in
        try h.storage.foldFixes(h.pool, wait: true)  // their last fix, however recent
        return try h.pool.withConnection { try h.storage.export($0, user, media: h.media) }
    }
    // Without their tokens these routes do not exist: 404, and absent from /openapi.json. A fleet gateway's take its own
    // token or the operator's (whose console shows the map); the rest, the operator's alone.
    if fleet.isEnabled || operators.isEnabled {
        r.group("/v1/operator", .trusted(anyOf: [fleet, operators])) { gateway in
            gateway.add("POST", "/locations", "Operator: up to 1,000 location fixes from a fleet gateway",
                      body: FleetFixesBody.self, answers: (200, FixesAppliedView.shape), h.fleetLocations)
            gateway.add("GET", "/fleet", "Operator: the map now, online couriers and parcels waiting for one (?limit= of each)",
                      answers: (200, FleetView.shape), query: [.limit(max: 5000, default: 1000)], h.fleet)
            gateway.add("GET", "/fleet/events",
                      "Operator: Server-Sent Events, the map now (snapshot), then every courier position and parcel transition, live",
                      answers: (200, nil), query: [.limit(max: 5000, default: 1000)], h.fleetEvents)
            gateway.add("GET", "/offers", "Operator: the offers open now, the oldest first (?limit=)", answers: (200, ItemList<OfferView>.shape),
                      query: [.limit(max: DispatchHandlers.batchLimit, default: 100)], h.openOffers)
            gateway.add("POST", "/parcels/{id}/accept", "Operator: accept an offer for the courier it was made to",
                      body: OperatorAcceptBody.self, answers: (200, ParcelView.shape), idempotent: true, h.operatorAccept)
        }
    }
    if operators.isEnabled {
        r.group("/v1/operator", .trusted(operators)) { op in
            op.add("POST", "/couriers", "Operator: create or update up to 1,000 couriers without sign-ups",
                   body: SeedCouriersBody.self, answers: (200, SeededView.shape), h.seedCouriers)
            op.add("GET", "/couriers/applications", "Operator: couriers' applications in a status, the longest-waiting first (?status=&limit=)",
                   answers: (200, ItemList<CourierApplicationView>.shape),
                   query: [QueryParameter("status", .oneOf(VettingStatus.allCases.map(\.rawValue)), "Applications in this status",
                                          default: VettingStatus.pending.rawValue), .limit(max: 100, default: 50)], h.applicationQueue)
            op.add("GET", "/couriers/{userId}/application", "Operator: a courier's application and the history of its decisions",
                   answers: (200, CourierApplicationView.shape), h.operatorApplication)
            op.add("GET", "/couriers/{userId}/identity-photo", "Operator: the photo of an applicant's identity document, while it is kept",
                   answers: (200, nil), also: [.answer(200, contentType: "image/jpeg", description: "The photo")], h.identityPhoto)
            for (action, summary, handler) in [
                ("approve", "Operator: approve a pending application; the courier may go online", h.approveCourier),
                ("reject", "Operator: reject a pending application, with a reason the applicant sees", h.rejectCourier),
                ("suspend", "Operator: suspend an approved courier, with a reason: offline at once, offered nothing", h.suspendCourier),
                ("reinstate", "Operator: reinstate a suspended courier", h.reinstateCourier),
            ] as [(String, String, @Sendable (Context<Void>, VettingDecisionBody) throws -> Response)] {
                op.add("POST", "/couriers/{userId}/\(action)", summary, body: VettingDecisionBody.self,
                       answers: (200, CourierApplicationView.shape), handler)
            }
            op.add("POST", "/centres", "Operator: a new reception centre", body: CentreBody.self,
                   answers: (201, CentreView.shape), idempotent: h.idempotency, h.createCentre)
            op.add("PUT", "/centres/{id}", "Operator: a reception centre's new description", body: CentreBody.self,
                   answers: (200, CentreView.shape), h.updateCentre)
            op.add("PUT", "/centres/{id}/staff/{userId}", "Operator: name someone staff of a centre", answers: (204, nil), h.setStaff)
            op.add("DELETE", "/centres/{id}/staff/{userId}", "Operator: someone is no longer staff of a centre",
                   answers: (204, nil), h.setStaff)
            op.add("GET", "/payments/reconciliation",
                   "Operator: a day's deliveries per courier against the cash collected and the cards captured, with the day's refunds and couriers' earnings (?day=, UTC)",
                   answers: (200, ReconciliationView.shape),
                   query: [QueryParameter("day", .string(pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"), "The day, UTC (default today)")],
                   h.reconciliation)
            op.add("GET", "/tariffs", "Operator: every tariff, the latest effective first, and the one in force now",
                   answers: (200, TariffsView.shape), h.listTariffs)
            op.add("POST", "/tariffs", "Operator: a new tariff from a time not in the past; quotes made before keep their price",
                   body: TariffBody.self, answers: (201, TariffView.shape),
                   also: [.refusal(409, "Another tariff takes effect at that very time")], idempotent: h.idempotency, h.setTariff)
            op.add("GET", "/plan-prices", "Operator: every plan's monthly prices, the latest effective first",
                   answers: (200, ItemList<PlanPriceView>.shape), h.listPlanPrices)
            op.add("POST", "/plan-prices", "Operator: a plan's new monthly price from a time not in the past, for the subscriptions taken from then",
                   body: PlanPriceBody.self, answers: (201, PlanPriceView.shape),
                   also: [.refusal(409, "Another price of this plan takes effect at that very time")], idempotent: h.idempotency, h.setPlanPrice)
            op.add("GET", "/payouts", "Operator: what each courier earned in an ISO week, to be paid (?week=2026-W49, UTC)",
                   answers: (200, PayoutsView.shape), query: [ISOWeek.parameter], h.payouts)
            op.add("POST", "/parcels/{id}/refunds",
                   "Operator: refund part or all of a delivered parcel's payment, to the card that paid or to the payer's wallet",
                   body: RefundBody.self, answers: (201, RefundView.shape), idempotent: true, h.refund)
        }
    }
    return r
}

/// A Stripe event as the webhook documents it: Stripe's own shape, of which dispatch reads these members.
private let stripeEvent = """
    {"type":"object","required":["id","type","data"],"properties":{"id":{"type":"string","maxLength":255},\
    "type":{"type":"string","maxLength":255},"data":{"type":"object","required":["object"],"properties":{"object":{"type":"object"}}}}}
    """
