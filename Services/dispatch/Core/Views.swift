import Features
import Foundation
import Geo
import Models
import Web

// What the routes answer: each view described once (`View`).

struct PlaceView: View {
    let lat: Double
    let lon: Double
    let address: String?
    init(_ point: GeoPoint, address: String? = nil) { lat = point.lat; lon = point.lon; self.address = address }
    /// The area around `point`: its coordinates to two decimals (about a kilometre), and no address.
    init(area point: GeoPoint) { lat = (point.lat * 100).rounded() / 100; lon = (point.lon * 100).rounded() / 100; address = nil }

    static let fields: [ViewField<Self>] = [.field("lat", \.lat, Shapes.lat), .field("lon", \.lon, Shapes.lon), .omitted("address", \.address)]
}

struct CourierView: View {
    let courier: CourierRecord
    init(_ c: CourierRecord) { courier = c }

    var position: PlaceView? { courier.position.map { PlaceView($0) } }

    static let fields: [ViewField<Self>] = [
        .field("id", \.courier.userId), .field("vehicle", \.courier.vehicle, Shapes.vehicle), .field("capacity", \.courier.capacity),
        .field("activeParcels", \.courier.active), .field("online", \.courier.online),
        .field("vetting", \.courier.vetting.rawValue, .oneOf(VettingStatus.allCases.map(\.rawValue))), .omitted("position", \.position),
        .field("createdAt", \.courier.createdAt), .field("updatedAt", \.courier.updatedAt),
    ]
}

struct HistoryView: View {
    let entry: HistoryEntry
    init(_ h: HistoryEntry) { entry = h }

    var place: PlaceView? { entry.place.map { PlaceView($0) } }

    static let fields: [ViewField<Self>] = [
        .field("at", \.entry.at), .omitted("from", \.entry.from, Shapes.status), .field("to", \.entry.to, Shapes.status),
        .field("actor", \.entry.actor), .omitted("actorId", \.entry.actorId), .omitted("place", \.place),
    ]
}

struct QuoteView: View {
    let quote: Quote

    static let fields: [ViewField<Self>] = [
        .field("currency", \.quote.currency), .field("amountMinor", \.quote.amountMinor), .field("etaSeconds", \.quote.etaSeconds),
        .field("distanceMeters", \.quote.distanceMeters), .omitted("planId", \.quote.planId),
        .omitted("planSavingMinor", \.quote.planSavingMinor), .omitted("tariffId", \.quote.tariffId),
        .omitted("validUntil", \.quote.validUntil),
    ]
}

struct RecipientView: View {
    let parcel: ParcelRecord

    static let fields: [ViewField<Self>] = [
        .nullable("userId", \.parcel.recipientUserId), .field("name", \.parcel.recipientName),
        .omitted("username", \.parcel.recipientUsername), .omitted("email", \.parcel.recipientEmail),
        .nullable("phone", \.parcel.recipientPhone),
    ]
}

/// The courier carrying a parcel, as its sender and recipient see them: a name, a face and a vehicle.
struct CourierCard: View {
    let courier: CourierRecord
    let profile: ProfileRecord?
    /// Given only to whom may call the courier.
    let phone: String?
    let urls: MediaURLs

    var fullName: String { profile?.fullName ?? "Courier" }
    var avatarUrls: ImageSizes? { urls.avatarSizes(profile?.avatar, owner: courier.userId, picture: profile?.picture) }
    var avatarUrl: String? { avatarUrls?.full }

    static let fields: [ViewField<Self>] = [
        .field("id", \.courier.userId), .field("fullName", \.fullName), .omitted("username", \.profile?.username),
        .omitted("avatarUrl", \.avatarUrl), .omitted("avatarUrls", \.avatarUrls), .field("vehicle", \.courier.vehicle, Shapes.vehicle),
        .omitted("phone", \.phone),
    ]
}

struct ParcelView: View {
    let parcel: ParcelRecord
    let historyEntries: [HistoryEntry]?
    let position: GeoPoint?

    /// The photos, by their signed URLs (`ImageView`): shown to whoever may see the parcel, the document's only to
    /// its parties (signed for nobody else: a link once given keeps loading until it expires).
    let documentPhoto: ImageView?
    let deliveryPhoto: ImageView?
    let receiptPhoto: ImageView?
    var documentPhotoUrl: String? { documentPhoto?.url }
    var deliveryPhotoUrl: String? { deliveryPhoto?.url }
    var receiptPhotoUrl: String? { receiptPhoto?.url }

    /// Who asks: the claim code is the sender's to pass on, the delivery PIN the sender's and the recipient's.
    let viewer: UUID
    /// Only in a parcel's own answer.
    let courier: CourierCard?
    /// Only in a parcel's own answer, to its sender.
    let payment: PaymentView?
    /// Only in a parcel's own answer: the centres it goes through.
    let dropOffCentre: CentreView?
    let collectionCentre: CentreView?
    /// The viewer is only offered it (neither a party nor its courier): they see what they need to decide (the
    /// areas, how far the pickup is, the service and the price), and the addresses, the document, its description
    /// and the recipient once they accepted.
    let sealed: Bool
    /// How far the offered courier is from the pickup, when their position is known: up to the next 100 m, so that
    /// a courier who moves and reads the offer again learns no more of the address than about where it is.
    let distanceToPickupMeters: Int?
    /// What the courier (or the courier offered it) earns for delivering it: their share of its price.
    let courierEarningsMinor: Int?

    init(_ p: ParcelRecord, for viewer: UUID, at viewerPosition: GeoPoint? = nil, earnings: EarningsRule? = nil,
         history: [HistoryEntry]? = nil, courier: CourierCard? = nil,
         payment: PaymentRecord? = nil, dropOffCentre: CentreRecord? = nil, collectionCentre: CentreRecord? = nil, media: MediaStore) {
        parcel = p; self.viewer = viewer; historyEntries = history; self.courier = courier; position = courier?.courier.position
        self.payment = payment.map(PaymentView.init)
        self.dropOffCentre = dropOffCentre.map { CentreView($0) }
        self.collectionCentre = collectionCentre.map { CentreView($0) }
        sealed = ![p.senderId, p.recipientUserId, p.courierId].contains(viewer)
        distanceToPickupMeters = sealed ? viewerPosition.map { Int((greatCircleMeters($0, p.pickup) / 100).rounded(.up)) * 100 } : nil
        courierEarningsMinor = sealed || viewer == p.courierId ? earnings?.courierShare(ofMinor: p.quote.amountMinor) : nil
        documentPhoto = sealed ? nil : media.view(p.documentPhotoMediaId, meta: p.photoMeta)
        deliveryPhoto = p.deliveryPhotoMediaId.map { media.view($0, meta: p.photoMeta) }
        receiptPhoto = p.receiptPhotoMediaId.map { media.view($0, meta: p.photoMeta) }
    }

    var recipient: RecipientView? { sealed ? nil : RecipientView(parcel: parcel) }
    var documentPhotoMediaId: UUID? { sealed ? nil : parcel.documentPhotoMediaId }
    var description: String? { sealed ? nil : parcel.description }
    /// The sender's, until someone claims it.
    var claimCode: String? {
        viewer == parcel.senderId && parcel.recipientUserId == nil ? parcel.claimCode.map(InviteCode.display) : nil
    }
    /// What the sender shows at the drop-off centre and the recipient at the collection centre.
    var centreCode: String? {
        [parcel.senderId, parcel.recipientUserId].contains(viewer) && !ParcelLifecycle.isFinal(parcel.status)
            ? parcel.centreCode.map(InviteCode.display) : nil
    }
    /// For a parcel still to be brought to a centre: from when it can be (now, while it is open).
    var dropOffFrom: Date? {
        parcel.status == .awaitingDropOff ? dropOffCentre?.centre.hours.nextOpening(from: Date()) : nil
    }
    var deliveryPin: String? {
        [parcel.senderId, parcel.recipientUserId].contains(viewer) && !ParcelLifecycle.isFinal(parcel.status) ? parcel.deliveryPin : nil
    }
    var pickup: PlaceView { sealed ? PlaceView(area: parcel.pickup) : PlaceView(parcel.pickup, address: parcel.pickupAddress) }
    var dropoff: PlaceView { sealed ? PlaceView(area: parcel.dropoff) : PlaceView(parcel.dropoff, address: parcel.dropoffAddress) }
    var quote: QuoteView { QuoteView(quote: parcel.quote) }
    /// Only while the offer is open.
    var offeredTo: UUID? { parcel.status == .offered ? parcel.offeredTo : nil }
    var offerExpiresAt: Date? { parcel.status == .offered ? parcel.offerExpiresAt : nil }
    var courierPosition: PlaceView? { position.map { PlaceView($0) } }
    var history: [HistoryView]? { historyEntries?.map(HistoryView.init) }

    static let fields: [ViewField<Self>] = [
        .field("id", \.parcel.id), .field("status", \.parcel.status.rawValue, Shapes.status), .field("senderId", \.parcel.senderId),
        .omitted("recipient", \.recipient), .omitted("claimCode", \.claimCode), .omitted("deliveryPin", \.deliveryPin),
        .field("pickup", \.pickup), .field("dropoff", \.dropoff),
        .field("service", \.parcel.service.rawValue, Shapes.service), .field("paymentMethod", \.parcel.paymentMethod.rawValue, Shapes.paymentMethod),
        .field("insured", \.parcel.insured), .field("pointsSpent", \.parcel.pointsSpent), .omitted("description", \.description),
        .omitted("documentPhotoMediaId", \.documentPhotoMediaId), .omitted("documentPhotoUrl", \.documentPhotoUrl),
        .omitted("documentPhoto", \.documentPhoto), .omitted("distanceToPickupMeters", \.distanceToPickupMeters),
        .omitted("courierEarningsMinor", \.courierEarningsMinor, .integer(0...Int.max)),
        .omitted("deliveryPhotoMediaId", \.parcel.deliveryPhotoMediaId), .omitted("deliveryPhotoUrl", \.deliveryPhotoUrl),
        .omitted("deliveryPhoto", \.deliveryPhoto),
        .omitted("receiptPhotoMediaId", \.parcel.receiptPhotoMediaId), .omitted("receiptPhotoUrl", \.receiptPhotoUrl),
        .omitted("receiptPhoto", \.receiptPhoto), .field("quote", \.quote), .omitted("courierId", \.parcel.courierId),
        .omitted("courier", \.courier),
        .omitted("offeredTo", \.offeredTo), .omitted("offerExpiresAt", \.offerExpiresAt), .omitted("courierPosition", \.courierPosition),
        .omitted("payment", \.payment), .omitted("dropOffCentreId", \.parcel.dropOffCentreId),
        .omitted("collectionCentreId", \.parcel.collectionCentreId), .omitted("centreCode", \.centreCode),
        .omitted("dropOffCentre", \.dropOffCentre), .omitted("collectionCentre", \.collectionCentre), .omitted("dropOffFrom", \.dropOffFrom),
        .omitted("history", \.history), .field("createdAt", \.parcel.createdAt), .field("updatedAt", \.parcel.updatedAt),
    ]
}

/// Whether a courier's own fix was applied (false: stale or out of order, ignored).
struct AppliedView: View {
    let applied: Bool
    static let fields: [ViewField<Self>] = [.field("applied", \.applied)]
}

/// A parcel's payment as its sender sees it: where it stands, the amount, and why a card was declined;
/// `requires_action` while the card's holder is to authenticate it (3-D Secure) with the provider's SDK and
/// `clientSecret`, by `authenticateBy`.
struct PaymentView: View {
    let payment: PaymentRecord
    init(_ payment: PaymentRecord) { self.payment = payment }
    var status: String { payment.requiresAction ? "requires_action" : payment.status.rawValue }
    var clientSecret: String? { payment.requiresAction ? payment.clientSecret : nil }
    var authenticateBy: Date? { payment.requiresAction ? payment.actionExpiresAt : nil }

    static let fields: [ViewField<Self>] = [
        .field("id", \.payment.id), .field("method", \.payment.method.rawValue, Shapes.paymentMethod),
        .field("status", \.status, .oneOf(PaymentStatus.allCases.map(\.rawValue) + ["requires_action"])),
        .field("amountMinor", \.payment.amountMinor), .field("currency", \.payment.currency),
        .omitted("declineCode", \.payment.declineCode), .omitted("clientSecret", \.clientSecret),
        .omitted("authenticateBy", \.authenticateBy),
    ]
}

/// A webhook event taken.
struct ReceivedView: View {
    let received: Bool
    static let fields: [ViewField<Self>] = [.field("received", \.received)]
}

/// A day's reconciliation, for the operator: per courier and currency, the prices of the parcels they delivered
/// against the cash they collected, the cards captured, the wallets debited and the captures still due; and per
/// currency, the cards captured for top-ups and plans against the wallets credited and the months given.
struct ReconciliationView: View {
    let day: String
    let rows: [ReconciliationRow]
    let creditRows: [CreditRow]
    let centreRows: [CentreCashRow]
    /// Per currency: what the day's deliveries took, the day's refunds, the couriers' earnings and what is kept.
    let moneyRows: [MoneyRow]
    var items: [ReconciliationRowView] { rows.map(ReconciliationRowView.init) }
    var credits: [CreditRowView] { creditRows.map(CreditRowView.init) }
    var centres: [CentreCashView] { centreRows.map(CentreCashView.init) }
    var money: [MoneyRowView] { moneyRows.map(MoneyRowView.init) }
    var differenceMinor: Int {
        rows.reduce(0) { $0 + $1.differenceMinor } + creditRows.reduce(0) { $0 + $1.differenceMinor }
    }
    static let fields: [ViewField<Self>] = [
        .field("day", \.day), .field("items", \.items), .field("credits", \.credits), .field("centres", \.centres),
        .field("money", \.money), .field("differenceMinor", \.differenceMinor),
    ]
}

/// The cash one centre took in a day: what its staff hand in.
struct CentreCashView: View {
    let row: CentreCashRow
    init(_ row: CentreCashRow) { self.row = row }
    static let fields: [ViewField<Self>] = [
        .field("centreId", \.row.centreId), .field("currency", \.row.currency), .field("parcels", \.row.parcels),
        .field("cashCollectedMinor", \.row.cashCollectedMinor),
    ]
}

struct CreditRowView: View {
    let row: CreditRow
    init(_ row: CreditRow) { self.row = row }
    static let fields: [ViewField<Self>] = [
        .field("currency", \.row.currency), .field("topUpsCapturedMinor", \.row.topUpsCapturedMinor),
        .field("walletCreditedMinor", \.row.walletCreditedMinor), .field("plansCapturedMinor", \.row.plansCapturedMinor),
        .field("planMonthsMinor", \.row.planMonthsMinor), .field("differenceMinor", \.row.differenceMinor),
    ]
}

struct ReconciliationRowView: View {
    let row: ReconciliationRow
    init(_ row: ReconciliationRow) { self.row = row }
    static let fields: [ViewField<Self>] = [
        .nullable("courierId", \.row.courierId), .field("currency", \.row.currency), .field("parcels", \.row.parcels),
        .field("priceMinor", \.row.priceMinor), .field("cashCollectedMinor", \.row.cashCollectedMinor),
        .field("capturedMinor", \.row.capturedMinor), .field("walletMinor", \.row.walletMinor),
        .field("captureDueMinor", \.row.captureDueMinor),
        .field("awaitingCollectionMinor", \.row.awaitingCollectionMinor),
        .field("withoutPayment", \.row.withoutPayment), .field("differenceMinor", \.row.differenceMinor),
    ]
}

/// A reception centre: where it is, whether it is open now and when it next opens, what it takes.
struct CentreView: View {
    let centre: CentreRecord
    let now: Date
    init(_ centre: CentreRecord, now: Date = Date()) { self.centre = centre; self.now = now }

    var openNow: Bool { centre.hours.isOpen(at: now) }
    var nextOpening: Date? { openNow ? nil : centre.hours.nextOpening(from: now) }
    var openingHours: [SpanView] { centre.hours.spans.map(SpanView.init) }

    static let fields: [ViewField<Self>] = [
        .field("id", \.centre.id), .field("name", \.centre.name), .field("address", \.centre.address),
        .field("lat", \.centre.point.lat, Shapes.lat), .field("lon", \.centre.point.lon, Shapes.lon),
        .field("timeZone", \.centre.hours.zone.identifier), .field("openingHours", \.openingHours), .field("openNow", \.openNow),
        .omitted("nextOpening", \.nextOpening), .field("acceptsDropOffs", \.centre.acceptsDropOffs),
        .field("acceptsCollections", \.centre.acceptsCollections),
        .field("createdAt", \.centre.createdAt), .field("updatedAt", \.centre.updatedAt),
    ]
}

struct SpanView: View {
    let span: OpeningHours.Span
    init(_ span: OpeningHours.Span) { self.span = span }
    static let fields: [ViewField<Self>] = [.field("day", \.span.day), .field("opens", \.span.opens), .field("closes", \.span.closes)]
}
