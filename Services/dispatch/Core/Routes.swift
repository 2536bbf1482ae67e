import Features
import Payments
import HTTP
import Identity
import Web

/// The dispatch API: the table of routes, nothing else. Every route needs a bearer token: a user's, or on
/// `/v1/operator/...` the operator's (the event stream takes a stream ticket too).
func makeRoutes(_ h: DispatchHandlers, _ auth: any Authenticator, tickets: StreamTickets, fleet: SharedSecret, services: SharedSecret) -> Router {
    var r = Router()
    r.add("POST", "/v1/couriers/me", summary: "Register (or update) the caller as a courier", body: RegisterCourierBody.self,
          response: (201, CourierView.shape), auth: auth, h.registerCourier)
    r.add("PUT", "/v1/couriers/me/status", summary: "Go online or offline", body: CourierStatusBody.self,
          response: (200, CourierView.shape), auth: auth, h.setStatus)
    r.add("PUT", "/v1/couriers/me/location", summary: "A location fix; stale or out-of-order fixes are ignored, one beyond the courier's reach refused",
          body: LocationBody.self, response: (200, AppliedView.shape), auth: auth, h.location)
    r.add("POST", "/v1/quotes", summary: "Price and ETA for a delivery", body: QuoteBody.self,
          response: (200, QuoteView.shape), auth: auth, h.quote)
    r.add("POST", "/v1/parcels", summary: "Send a parcel; the nearest available courier is offered it", body: CreateParcelBody.self,
          response: (201, ParcelView.shape), auth: auth, h.createParcel)
    r.add("GET", "/v1/parcels", summary: "My parcels as sender, recipient or courier (?role=&status=)",
          response: (200, PageResponse<ParcelView>.shape), auth: auth, h.listParcels)
    r.add("GET", "/v1/parcels/{id}", summary: "A parcel with its history and the courier's position",
          response: (200, ParcelView.shape), auth: auth, h.getParcel)
    r.addStream("/v1/parcels/{id}/events", summary: "Server-Sent Events: a snapshot, then every transition and courier position",
                auth: auth, tickets: tickets, h.events)
    r.add("POST", "/v1/parcels/{id}/accept", summary: "The offered courier takes the parcel", response: (200, ParcelView.shape), auth: auth, h.accept)
    r.add("POST", "/v1/parcels/{id}/decline", summary: "The offered courier refuses it", response: (200, ParcelView.shape), auth: auth, h.decline)
    r.add("POST", "/v1/parcels/{id}/pickup", summary: "The courier has it", response: (200, ParcelView.shape), auth: auth, h.pickup)
    r.add("POST", "/v1/parcel-claims", summary: "Become the recipient of a parcel by the claim code its sender passed on",
          body: ClaimBody.self, response: (200, ParcelView.shape), auth: auth, h.claim)
    r.add("POST", "/v1/parcels/{id}/deliver",
          summary: "The courier handed it over, with a photo: received with the recipient's PIN, else delivered and awaiting their confirmation",
          body: DeliverBody.self,
          response: (200, ParcelView.shape), auth: auth, h.deliver)
    r.add("POST", "/v1/parcels/{id}/fail", summary: "The courier could not deliver it", body: FailBody.self,
          response: (200, ParcelView.shape), auth: auth, h.fail)
    r.add("POST", "/v1/parcels/{id}/confirm", summary: "The recipient confirms receipt, with a photo", body: PhotoBody.self,
          response: (200, ParcelView.shape), auth: auth, h.confirm)
    r.add("POST", "/v1/parcels/{id}/cancel", summary: "The sender cancels before pickup", response: (200, ParcelView.shape), auth: auth, h.cancel)
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
    }
    r.add("GET", "/v1/centres", summary: "The reception centres nearest a point (?lat=&lon=&limit=), open now or when they open",
          response: (200, ItemList<CentreView>.shape), auth: auth, h.nearestCentres)
    r.query("GET", "/v1/centres", [QueryParameter("lat", .number(-90...90), "Latitude"), QueryParameter("lon", .number(-180...180), "Longitude"),
                                   .limit(max: 50, default: 10)])
    r.add("POST", "/v1/centres/{id}/check-ins", summary: "A centre's staff take in a parcel by the code its sender shows",
          body: CheckInBody.self, response: (200, ParcelView.shape), auth: auth, h.checkIn)
    r.add("POST", "/v1/centres/{id}/collections", summary: "A centre's staff hand a parcel to its recipient, who shows its code and PIN",
          body: CollectBody.self, response: (200, ParcelView.shape), auth: auth, h.collect)
    r.add("POST", "/v1/dispatch/media", summary: "Upload a photo (raw JPEG, PNG, HEIC or WebP, 10 MiB at most)", bodyLimit: MediaStore.limit,
          response: (201, MediaView.shape), auth: auth, h.uploadMedia)
    r.query("POST", "/v1/dispatch/media", [h.media.purposeParameter])
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
    // Without OPERATOR_TOKEN the operator routes do not exist: 404, and absent from /openapi.json.
    if fleet.isEnabled {
        r.add("POST", "/v1/operator/couriers", summary: "Operator: create or update up to 1,000 couriers without sign-ups",
              body: SeedCouriersBody.self, response: (200, SeededView.shape), trusted: fleet, h.seedCouriers)
        r.add("POST", "/v1/operator/locations", summary: "Operator: up to 1,000 location fixes from a fleet gateway",
              body: FleetFixesBody.self, response: (200, FixesAppliedView.shape), trusted: fleet, h.fleetLocations)
        r.add("GET", "/v1/operator/fleet", summary: "Operator: the map now, online couriers and parcels waiting for one (?limit= of each)",
              response: (200, FleetView.shape), trusted: fleet, h.fleet)
        r.query("GET", "/v1/operator/fleet", [.limit(max: 5000, default: 1000)])
        r.add("GET", "/v1/operator/fleet/events",
              summary: "Operator: Server-Sent Events, the map now (snapshot), then every courier position and parcel transition, live",
              trusted: fleet, h.fleetEvents)
        r.query("GET", "/v1/operator/fleet/events", [.limit(max: 5000, default: 1000)])
        r.add("GET", "/v1/operator/offers", summary: "Operator: the offers open now, the oldest first (?limit=)", response: (200, ItemList<OfferView>.shape),
              trusted: fleet, h.openOffers)
        r.query("GET", "/v1/operator/offers", [.limit(max: DispatchHandlers.batchLimit, default: 100)])
        r.add("POST", "/v1/operator/centres", summary: "Operator: a new reception centre", body: CentreBody.self,
              response: (201, CentreView.shape), trusted: fleet, h.saveCentre)
        r.add("PUT", "/v1/operator/centres/{id}", summary: "Operator: a reception centre's new description", body: CentreBody.self,
              response: (200, CentreView.shape), trusted: fleet, h.saveCentre)
        r.add("PUT", "/v1/operator/centres/{id}/staff/{userId}", summary: "Operator: name someone staff of a centre",
              response: (204, nil), trusted: fleet, h.setStaff)
        r.add("DELETE", "/v1/operator/centres/{id}/staff/{userId}", summary: "Operator: someone is no longer staff of a centre",
              response: (204, nil), trusted: fleet, h.setStaff)
        r.add("GET", "/v1/operator/payments/reconciliation",
              summary: "Operator: a day's deliveries per courier against the cash collected and the cards captured (?day=, UTC)",
              response: (200, ReconciliationView.shape), trusted: fleet, h.reconciliation)
        r.query("GET", "/v1/operator/payments/reconciliation",
                [QueryParameter("day", .string(pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"), "The day, UTC (default today)")])
        r.add("POST", "/v1/operator/parcels/{id}/accept", summary: "Operator: accept an offer for the courier it was made to",
              body: OperatorAcceptBody.self, response: (200, ParcelView.shape), trusted: fleet, h.operatorAccept)
        r.idempotent("POST", ["/v1/operator/centres", "/v1/operator/parcels/{id}/accept"])
    }
    r.query("GET", "/v1/parcels", QueryParameter.page + [
        QueryParameter("role", .oneOf(["sender", "recipient", "courier"]), "Parcels I send, receive or carry", default: "sender"),
        QueryParameter("status", Shapes.status, "Only parcels in this status")])
    r.idempotent("POST", ["/v1/parcels", "/v1/dispatch/media",
                          "/v1/centres/{id}/check-ins", "/v1/centres/{id}/collections"]
                 + ["accept", "decline", "pickup", "deliver", "fail", "confirm", "cancel"].map { "/v1/parcels/{id}/\($0)" })
    return r
}

/// A Stripe event as the webhook documents it: Stripe's own shape, of which dispatch reads these members.
private let stripeEvent = """
    {"type":"object","required":["id","type","data"],"properties":{"id":{"type":"string","maxLength":255},\
    "type":{"type":"string","maxLength":255},"data":{"type":"object","required":["object"],"properties":{"object":{"type":"object"}}}}}
    """
