import Foundation

/// A latitude and longitude in events.
public struct Place: Codable, Sendable, Equatable {
    public var lat: Double
    public var lon: Double
    public init(lat: Double, lon: Double) { self.lat = lat; self.lon = lon }
}

extension EventSchema.Field {
    /// An ISO 4217 code.
    fileprivate static let currency = EventSchema.Field(pattern: "^[A-Z]{3}$")
}

/// `parcel.created`: someone booked a delivery. Key: the parcel id.
public struct ParcelCreated: EventPayload, Equatable {
    public static let type = "parcel.created"
    public static let schema = EventSchema(["service": .oneOf(["express", "standard"]), "currency": .currency])
    public var parcelId: String
    public var senderId: String
    public var recipientUserId: String?
    public var service: String
    public var pickup: Place
    public var dropoff: Place
    public var amountMinor: Int
    public var currency: String
    public var createdAt: String

    public init(parcelId: String, senderId: String, recipientUserId: String?, service: String, pickup: Place, dropoff: Place,
                amountMinor: Int, currency: String, createdAt: String) {
        self.parcelId = parcelId; self.senderId = senderId; self.recipientUserId = recipientUserId; self.service = service
        self.pickup = pickup; self.dropoff = dropoff; self.amountMinor = amountMinor; self.currency = currency; self.createdAt = createdAt
    }
}

/// `parcel.claimed`: someone became the recipient of a parcel after its booking: by the claim code its sender passed
/// on, or when dispatch heard of the person the sender named by username a moment after they signed up. Key: the
/// parcel id.
public struct ParcelClaimed: EventPayload, Equatable {
    public static let type = "parcel.claimed"
    public var parcelId: String
    public var senderId: String
    public var recipientUserId: String
    public var claimedAt: String

    public init(parcelId: String, senderId: String, recipientUserId: String, claimedAt: String) {
        self.parcelId = parcelId; self.senderId = senderId; self.recipientUserId = recipientUserId; self.claimedAt = claimedAt
    }
}

/// `parcel.status`: one transition of a parcel. Key: the parcel id, so a parcel's transitions stay in order.
public struct ParcelStatusChanged: EventPayload, Equatable {
    public static let type = "parcel.status"
    public static let schema = EventSchema([
        "from": .oneOf(["awaiting_payment", "awaiting_drop_off", "awaiting_courier", "offered", "assigned", "picked_up", "in_transit",
                        "delivered", "ready_for_collection", "received", "cancelled", "failed"]),
        "to": .oneOf(["awaiting_courier", "offered", "assigned", "picked_up", "in_transit", "delivered", "ready_for_collection", "received",
                      "cancelled", "failed"]),
        "actor": .oneOf(["sender", "recipient", "courier", "staff", "system"]),
        "senderId": .described("The parcel's sender"),
        "recipientUserId": .described("The recipient's account, once known (named at booking or claimed)"),
    ])
    public var parcelId: String
    public var from: String
    public var to: String
    public var actor: String
    public var actorId: String?
    public var courierId: String?
    public var place: Place?
    /// The reception centre it happened at (a check-in, a parcel left for collection, a collection).
    public var centreId: String?
    /// The parcel's sender and (once known) recipient account at this step, so that a consumer needs no earlier
    /// event of another topic to know whom it concerns (topics are read in no fixed order with each other).
    public var senderId: String?
    public var recipientUserId: String?
    public var at: String

    public init(parcelId: String, from: String, to: String, actor: String, actorId: String?, courierId: String?, place: Place?,
                centreId: String? = nil, senderId: String? = nil, recipientUserId: String? = nil, at: String) {
        self.parcelId = parcelId; self.from = from; self.to = to; self.actor = actor; self.actorId = actorId
        self.courierId = courierId; self.place = place; self.centreId = centreId; self.senderId = senderId
        self.recipientUserId = recipientUserId; self.at = at
    }
}

/// `courier.location`: a courier's fix, while they carry parcels (and from a fleet gateway). Key: the courier id.
/// Positions are ephemeral: they are published without the outbox, and a lost one is replaced by the next.
public struct CourierLocation: EventPayload, Equatable {
    public static let type = "courier.location"
    public var courierId: String
    public var lat: Double
    public var lon: Double
    public var heading: Double?
    public var speedMps: Double?
    public var at: String

    public init(courierId: String, lat: Double, lon: Double, heading: Double?, speedMps: Double?, at: String) {
        self.courierId = courierId; self.lat = lat; self.lon = lon; self.heading = heading; self.speedMps = speedMps; self.at = at
    }
}

/// `payment.recorded`: one entry of a parcel's payment ledger, as it was written. Key: the payment id, so a
/// payment's entries stay in order. `entry` is `authorised` (held on the card), `declined`, `captured` (taken),
/// `voided` (the hold released), `cash_collected` (by `courierId` at the hand-over), `wallet_debited` (paid from the
/// sender's wallet at booking) or `wallet_returned` (paid back when it was called off); `amountMinor` is what moved
/// (0 for `declined`), in `currency`'s minor units.
public struct PaymentRecorded: EventPayload, Equatable {
    public static let type = "payment.recorded"
    public static let schema = EventSchema([
        "entryId": .init(minimum: 1), "method": .oneOf(["card", "cash", "wallet"]),
        "entry": .oneOf(["authorised", "declined", "captured", "voided", "cash_collected", "wallet_debited", "wallet_returned"]),
        "amountMinor": .init(minimum: 0), "currency": .currency, "providerReference": .init(maxLength: 255), "declineCode": .init(maxLength: 100),
    ])
    public var entryId: Int
    public var paymentId: String
    public var parcelId: String
    public var method: String
    public var entry: String
    public var amountMinor: Int
    public var currency: String
    public var courierId: String?
    /// The provider's id of the payment (a Stripe PaymentIntent), for card payments.
    public var providerReference: String?
    /// Why a card was declined, as the provider said (`insufficient_funds`, `generic_decline`, ...).
    public var declineCode: String?
    public var at: String

    public init(entryId: Int, paymentId: String, parcelId: String, method: String, entry: String, amountMinor: Int, currency: String,
                courierId: String?, providerReference: String?, declineCode: String?, at: String) {
        self.entryId = entryId; self.paymentId = paymentId; self.parcelId = parcelId; self.method = method; self.entry = entry
        self.amountMinor = amountMinor; self.currency = currency; self.courierId = courierId
        self.providerReference = providerReference; self.declineCode = declineCode; self.at = at
    }
}

/// `loyalty.recorded`: one entry of a sender's loyalty points: `earned` for a delivered parcel, `spent` on a
/// booking, `returned` when that booking was called off or failed. Key: the user id.
public struct LoyaltyRecorded: EventPayload, Equatable {
    public static let type = "loyalty.recorded"
    public static let schema = EventSchema(["entryId": .init(minimum: 1), "entry": .oneOf(["earned", "spent", "returned"]), "points": .init(minimum: 1)])
    public var entryId: Int
    public var userId: String
    public var parcelId: String
    public var entry: String
    public var points: Int
    public var at: String

    public init(entryId: Int, userId: String, parcelId: String, entry: String, points: Int, at: String) {
        self.entryId = entryId; self.userId = userId; self.parcelId = parcelId; self.entry = entry; self.points = points; self.at = at
    }
}

/// `wallet.recorded`: one entry of a sender's wallet: `topped_up` by card, `spent` on a booking, `returned` when
/// that booking was called off or failed. `amountMinor` is what moved and `balanceMinor` the balance after it, in
/// `currency`'s minor units. Key: the user id, so a wallet's entries stay in order.
public struct WalletRecorded: EventPayload, Equatable {
    public static let type = "wallet.recorded"
    public static let schema = EventSchema([
        "entryId": .init(minimum: 1), "entry": .oneOf(["topped_up", "spent", "returned"]), "amountMinor": .init(minimum: 1),
        "balanceMinor": .init(minimum: 0), "currency": .currency,
    ])
    public var entryId: Int
    public var userId: String
    public var paymentId: String
    public var parcelId: String?
    public var entry: String
    public var amountMinor: Int
    public var balanceMinor: Int
    public var currency: String
    public var at: String

    public init(entryId: Int, userId: String, paymentId: String, parcelId: String?, entry: String, amountMinor: Int, balanceMinor: Int,
                currency: String, at: String) {
        self.entryId = entryId; self.userId = userId; self.paymentId = paymentId; self.parcelId = parcelId; self.entry = entry
        self.amountMinor = amountMinor; self.balanceMinor = balanceMinor; self.currency = currency; self.at = at
    }
}

/// `plan.recorded`: one entry of a subscription's ledger: `started` (the first month taken by card), `renewed` (a
/// further month), `declined` (the first month's card was declined), `lapsed` (a renewal's was), or
/// `renewal_stopped` (the subscriber will not renew; the plan lasts until `periodEnd`). Key: the subscription id.
public struct PlanRecorded: EventPayload, Equatable {
    public static let type = "plan.recorded"
    public static let schema = EventSchema([
        "entryId": .init(minimum: 1), "planId": .init(format: .plain, maxLength: 50),
        "entry": .oneOf(["started", "renewed", "declined", "lapsed", "renewal_stopped"]), "amountMinor": .init(minimum: 0),
        "currency": .currency, "providerReference": .init(maxLength: 255), "periodEnd": .dateTime,
    ])
    public var entryId: Int
    public var subscriptionId: String
    public var userId: String
    public var planId: String
    public var entry: String
    public var amountMinor: Int
    public var currency: String
    /// The card payment that moved money (`started`, `renewed`).
    public var paymentId: String?
    /// The provider's id of that payment (a Stripe PaymentIntent).
    public var providerReference: String?
    public var periodEnd: String?
    public var at: String

    public init(entryId: Int, subscriptionId: String, userId: String, planId: String, entry: String, amountMinor: Int, currency: String,
                paymentId: String?, providerReference: String?, periodEnd: String?, at: String) {
        self.entryId = entryId; self.subscriptionId = subscriptionId; self.userId = userId; self.planId = planId; self.entry = entry
        self.amountMinor = amountMinor; self.currency = currency; self.paymentId = paymentId; self.providerReference = providerReference
        self.periodEnd = periodEnd; self.at = at
    }
}
