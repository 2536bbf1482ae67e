import Foundation

/// Where a parcel is in its life. `awaiting_payment` (a card being authorised) or `awaiting_drop_off` (to be
/// brought to a reception centre and checked in there) `→ awaiting_courier → offered → assigned → picked_up →
/// in_transit → delivered → received` (or, for collection at a centre, `→ ready_for_collection → received`), or
/// `cancelled` / `failed`; a declined or expired offer returns it to `awaiting_courier`.
public enum ParcelStatus: String, Codable, Sendable, CaseIterable {
    case awaitingPayment = "awaiting_payment", awaitingDropOff = "awaiting_drop_off", awaitingCourier = "awaiting_courier", offered,
         assigned, pickedUp = "picked_up", inTransit = "in_transit", delivered, readyForCollection = "ready_for_collection",
         received, cancelled, failed
}

/// Who does something to a parcel.
public enum ParcelActor: String, Codable, Sendable, CaseIterable {
    /// `staff`: a reception centre's, checking parcels in and handing them over there.
    case sender, recipient, courier, staff, system
}

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
    public static let schema = EventSchema(["currency": .currency])
    public var parcelId: UUID
    public var senderId: UUID
    public var recipientUserId: UUID?
    public var service: ParcelService
    public var pickup: Place
    public var dropoff: Place
    public var amountMinor: Int
    public var currency: String
    public var createdAt: Date

    public init(parcelId: UUID, senderId: UUID, recipientUserId: UUID?, service: ParcelService, pickup: Place, dropoff: Place,
                amountMinor: Int, currency: String, createdAt: Date) {
        self.parcelId = parcelId; self.senderId = senderId; self.recipientUserId = recipientUserId; self.service = service
        self.pickup = pickup; self.dropoff = dropoff; self.amountMinor = amountMinor; self.currency = currency; self.createdAt = createdAt
    }
}

/// `parcel.claimed`: someone became the recipient of a parcel after its booking: by the claim code its sender passed
/// on, or when dispatch heard of the person the sender named by username a moment after they signed up. Key: the
/// parcel id.
public struct ParcelClaimed: EventPayload, Equatable {
    public static let type = "parcel.claimed"
    public var parcelId: UUID
    public var senderId: UUID
    public var recipientUserId: UUID
    public var claimedAt: Date

    public init(parcelId: UUID, senderId: UUID, recipientUserId: UUID, claimedAt: Date) {
        self.parcelId = parcelId; self.senderId = senderId; self.recipientUserId = recipientUserId; self.claimedAt = claimedAt
    }
}

/// `parcel.status`: one transition of a parcel. Key: the parcel id, so a parcel's transitions stay in order.
public struct ParcelStatusChanged: EventPayload, Equatable {
    public static let type = "parcel.status"
    public static let schema = EventSchema([
        "to": .oneOf(["awaiting_courier", "offered", "assigned", "picked_up", "in_transit", "delivered", "ready_for_collection", "received",
                      "cancelled", "failed"]),
        "senderId": .described("The parcel's sender"),
        "recipientUserId": .described("The recipient's account, once known (named at booking or claimed)"),
    ])
    public var parcelId: UUID
    public var from: ParcelStatus
    public var to: ParcelStatus
    public var actor: ParcelActor
    public var actorId: UUID?
    public var courierId: UUID?
    public var place: Place?
    /// The reception centre it happened at (a check-in, a parcel left for collection, a collection).
    public var centreId: UUID?
    /// The parcel's sender and (once known) recipient account at this step, so that a consumer needs no earlier
    /// event of another topic to know whom it concerns (topics are read in no fixed order with each other).
    public var senderId: UUID?
    public var recipientUserId: UUID?
    public var at: Date

    public init(parcelId: UUID, from: ParcelStatus, to: ParcelStatus, actor: ParcelActor, actorId: UUID?, courierId: UUID?, place: Place?,
                centreId: UUID? = nil, senderId: UUID? = nil, recipientUserId: UUID? = nil, at: Date) {
        self.parcelId = parcelId; self.from = from; self.to = to; self.actor = actor; self.actorId = actorId
        self.courierId = courierId; self.place = place; self.centreId = centreId; self.senderId = senderId
        self.recipientUserId = recipientUserId; self.at = at
    }
}

/// `courier.location`: a courier's fix, while they carry parcels (and from a fleet gateway). Key: the courier id.
/// Positions are ephemeral: they are published without the outbox, and a lost one is replaced by the next.
public struct CourierLocation: EventPayload, Equatable {
    public static let type = "courier.location"
    public var courierId: UUID
    public var lat: Double
    public var lon: Double
    public var heading: Double?
    public var speedMps: Double?
    public var at: Date

    public init(courierId: UUID, lat: Double, lon: Double, heading: Double?, speedMps: Double?, at: Date) {
        self.courierId = courierId; self.lat = lat; self.lon = lon; self.heading = heading; self.speedMps = speedMps; self.at = at
    }
}

/// How a parcel travels.
public enum ParcelService: String, Codable, Sendable, CaseIterable {
    case express, standard
}

/// How a payment is made.
public enum PaymentMethod: String, Codable, Sendable, CaseIterable {
    case card, cash, wallet
}

/// What one entry of a payment's ledger records.
public enum PaymentEntry: String, Codable, Sendable, CaseIterable {
    case authorised, declined, captured, voided, cashCollected = "cash_collected", walletDebited = "wallet_debited",
         walletReturned = "wallet_returned"
}

/// What one entry of a sender's loyalty points records.
public enum LoyaltyEntry: String, Codable, Sendable, CaseIterable {
    case earned, spent, returned
}

/// What one entry of a sender's wallet records.
public enum WalletEntry: String, Codable, Sendable, CaseIterable {
    case toppedUp = "topped_up", spent, returned
}

/// What one entry of a subscription's ledger records.
public enum PlanEntry: String, Codable, Sendable, CaseIterable {
    case started, renewed, declined, lapsed, renewalStopped = "renewal_stopped"
}

/// `payment.recorded`: one entry of a parcel's payment ledger, as it was written. Key: the payment id, so a
/// payment's entries stay in order. `entry` is `authorised` (held on the card), `declined`, `captured` (taken),
/// `voided` (the hold released), `cash_collected` (by `courierId` at the hand-over), `wallet_debited` (paid from the
/// sender's wallet at booking) or `wallet_returned` (paid back when it was called off); `amountMinor` is what moved
/// (0 for `declined`), in `currency`'s minor units.
public struct PaymentRecorded: EventPayload, Equatable {
    public static let type = "payment.recorded"
    public static let schema = EventSchema([
        "entryId": .init(minimum: 1),
        "amountMinor": .init(minimum: 0), "currency": .currency, "providerReference": .init(maxLength: 255), "declineCode": .init(maxLength: 100),
    ])
    public var entryId: Int
    public var paymentId: UUID
    public var parcelId: UUID
    public var method: PaymentMethod
    public var entry: PaymentEntry
    public var amountMinor: Int
    public var currency: String
    public var courierId: UUID?
    /// The provider's id of the payment (a Stripe PaymentIntent), for card payments.
    public var providerReference: String?
    /// Why a card was declined, as the provider said (`insufficient_funds`, `generic_decline`, ...).
    public var declineCode: String?
    public var at: Date

    public init(entryId: Int, paymentId: UUID, parcelId: UUID, method: PaymentMethod, entry: PaymentEntry, amountMinor: Int, currency: String,
                courierId: UUID?, providerReference: String?, declineCode: String?, at: Date) {
        self.entryId = entryId; self.paymentId = paymentId; self.parcelId = parcelId; self.method = method; self.entry = entry
        self.amountMinor = amountMinor; self.currency = currency; self.courierId = courierId
        self.providerReference = providerReference; self.declineCode = declineCode; self.at = at
    }
}

/// `loyalty.recorded`: one entry of a sender's loyalty points: `earned` for a delivered parcel, `spent` on a
/// booking, `returned` when that booking was called off or failed. Key: the user id.
public struct LoyaltyRecorded: EventPayload, Equatable {
    public static let type = "loyalty.recorded"
    public static let schema = EventSchema(["entryId": .init(minimum: 1), "points": .init(minimum: 1)])
    public var entryId: Int
    public var userId: UUID
    public var parcelId: UUID
    public var entry: LoyaltyEntry
    public var points: Int
    public var at: Date

    public init(entryId: Int, userId: UUID, parcelId: UUID, entry: LoyaltyEntry, points: Int, at: Date) {
        self.entryId = entryId; self.userId = userId; self.parcelId = parcelId; self.entry = entry; self.points = points; self.at = at
    }
}

/// `wallet.recorded`: one entry of a sender's wallet: `topped_up` by card, `spent` on a booking, `returned` when
/// that booking was called off or failed. `amountMinor` is what moved and `balanceMinor` the balance after it, in
/// `currency`'s minor units. Key: the user id, so a wallet's entries stay in order.
public struct WalletRecorded: EventPayload, Equatable {
    public static let type = "wallet.recorded"
    public static let schema = EventSchema([
        "entryId": .init(minimum: 1), "amountMinor": .init(minimum: 1),
        "balanceMinor": .init(minimum: 0), "currency": .currency,
    ])
    public var entryId: Int
    public var userId: UUID
    public var paymentId: UUID
    public var parcelId: UUID?
    public var entry: WalletEntry
    public var amountMinor: Int
    public var balanceMinor: Int
    public var currency: String
    /// The operator's refund this entry pays back (`returned`), when it is one: `payment.refunded` tells why.
    public var refundId: UUID?
    public var at: Date

    public init(entryId: Int, userId: UUID, paymentId: UUID, parcelId: UUID?, entry: WalletEntry, amountMinor: Int, balanceMinor: Int,
                currency: String, refundId: UUID? = nil, at: Date) {
        self.entryId = entryId; self.userId = userId; self.paymentId = paymentId; self.parcelId = parcelId; self.entry = entry
        self.amountMinor = amountMinor; self.balanceMinor = balanceMinor; self.currency = currency; self.refundId = refundId; self.at = at
    }
}

/// Where an operator's refund goes: back to the card that paid, or to the payer's wallet.
public enum RefundDestination: String, Codable, Sendable, CaseIterable {
    case card, wallet
}

/// `payment.refunded`: an operator paid back part or all of what a delivered parcel's payment took, to the card
/// (through the provider, `providerReference` its refund) or to the payer's wallet (also told by `wallet.recorded`).
/// `amountMinor` is this refund, `refundedMinor` all refunds of the payment so far, in `currency`'s minor units.
/// Key: the payment id, with its `payment.recorded` entries.
public struct PaymentRefunded: EventPayload, Equatable {
    public static let type = "payment.refunded"
    public static let schema = EventSchema([
        "entryId": .init(minimum: 1), "amountMinor": .init(minimum: 1), "refundedMinor": .init(minimum: 1), "currency": .currency,
        "reason": .init(maxLength: 500), "providerReference": .init(maxLength: 255),
    ])
    public var entryId: Int
    public var refundId: UUID
    public var paymentId: UUID
    public var parcelId: UUID
    public var payerId: UUID
    public var method: PaymentMethod
    public var to: RefundDestination
    public var amountMinor: Int
    public var refundedMinor: Int
    public var currency: String
    public var reason: String
    /// The provider's id of the refund (a Stripe Refund), for refunds to the card.
    public var providerReference: String?
    public var at: Date

    public init(entryId: Int, refundId: UUID, paymentId: UUID, parcelId: UUID, payerId: UUID, method: PaymentMethod, to: RefundDestination,
                amountMinor: Int, refundedMinor: Int, currency: String, reason: String, providerReference: String?, at: Date) {
        self.entryId = entryId; self.refundId = refundId; self.paymentId = paymentId; self.parcelId = parcelId; self.payerId = payerId
        self.method = method; self.to = to; self.amountMinor = amountMinor; self.refundedMinor = refundedMinor; self.currency = currency
        self.reason = reason; self.providerReference = providerReference; self.at = at
    }
}

/// `plan.recorded`: one entry of a subscription's ledger: `started` (the first month taken by card), `renewed` (a
/// further month), `declined` (the first month's card was declined), `lapsed` (a renewal's was), or
/// `renewal_stopped` (the subscriber will not renew; the plan lasts until `periodEnd`). Key: the subscription id.
public struct PlanRecorded: EventPayload, Equatable {
    public static let type = "plan.recorded"
    public static let schema = EventSchema([
        "entryId": .init(minimum: 1), "planId": .init(format: .plain, maxLength: 50),
        "amountMinor": .init(minimum: 0),
        "currency": .currency, "providerReference": .init(maxLength: 255),
    ])
    public var entryId: Int
    public var subscriptionId: UUID
    public var userId: UUID
    public var planId: String
    public var entry: PlanEntry
    public var amountMinor: Int
    public var currency: String
    /// The card payment that moved money (`started`, `renewed`).
    public var paymentId: UUID?
    /// The provider's id of that payment (a Stripe PaymentIntent).
    public var providerReference: String?
    public var periodEnd: Date?
    public var at: Date

    public init(entryId: Int, subscriptionId: UUID, userId: UUID, planId: String, entry: PlanEntry, amountMinor: Int, currency: String,
                paymentId: UUID?, providerReference: String?, periodEnd: Date?, at: Date) {
        self.entryId = entryId; self.subscriptionId = subscriptionId; self.userId = userId; self.planId = planId; self.entry = entry
        self.amountMinor = amountMinor; self.currency = currency; self.paymentId = paymentId; self.providerReference = providerReference
        self.periodEnd = periodEnd; self.at = at
    }
}

/// `payment.receipt`: the receipt of a payment taken by card (a parcel's price at its delivery, a wallet top-up, a
/// plan's month), numbered without gaps within its year; prices include the tax, `taxMinor` of `totalMinor` at
/// `taxRateBasisPoints` (rounded half up), `netMinor` the rest; the lines add up to the total. Key: the payer's id.
public struct PaymentReceiptIssued: EventPayload, Equatable {
    public static let type = "payment.receipt"
    public static let schema = EventSchema([
        "number": .init(pattern: "^R[0-9]{4}-[0-9]{6,}$"), "purpose": .oneOf(["parcel", "top_up", "plan"]), "currency": .currency,
        "totalMinor": .init(minimum: 0), "netMinor": .init(minimum: 0), "taxMinor": .init(minimum: 0),
        "taxRateBasisPoints": .init(minimum: 0, maximum: 10_000), "lines": .init(maxItems: 10, description: "What was paid for, adding up to the total"),
    ])
    public var number: String
    public var paymentId: UUID
    public var payerId: UUID
    public var purpose: String
    public var parcelId: UUID?
    public var currency: String
    public var totalMinor: Int
    public var netMinor: Int
    public var taxMinor: Int
    public var taxRateBasisPoints: Int
    public var lines: [ReceiptLine]
    public var issuedAt: Date

    public init(number: String, paymentId: UUID, payerId: UUID, purpose: String, parcelId: UUID?, currency: String, totalMinor: Int,
                netMinor: Int, taxMinor: Int, taxRateBasisPoints: Int, lines: [ReceiptLine], issuedAt: Date) {
        self.number = number; self.paymentId = paymentId; self.payerId = payerId; self.purpose = purpose; self.parcelId = parcelId
        self.currency = currency; self.totalMinor = totalMinor; self.netMinor = netMinor; self.taxMinor = taxMinor
        self.taxRateBasisPoints = taxRateBasisPoints; self.lines = lines; self.issuedAt = issuedAt
    }
}

/// One line of a receipt: what it is for, and its amount (negative for what came off, such as loyalty points).
public struct ReceiptLine: Codable, Sendable, Equatable {
    public var description: String
    public var amountMinor: Int
    public init(description: String, amountMinor: Int) { self.description = description; self.amountMinor = amountMinor }
}
