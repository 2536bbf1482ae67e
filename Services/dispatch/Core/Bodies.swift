import Foundation
import Geo
import Models
import Web

// What the routes take: each request body described once (`RequestBody`).

/// The shapes dispatch's bodies share.
enum Shapes {
    static let lat = Schema.number(-90...90)
    static let lon = Schema.number(-180...180)
    static let vehicle = Schema.oneOf(["foot", "bike", "scooter", "car"])
    static let capacity = Schema.integer(1...50)
    static let service = Schema.oneOf(ParcelService.allCases.map(\.rawValue))
    static let status = Schema.oneOf(ParcelStatus.allCases.map(\.rawValue))
    /// How a sender pays: a card held at booking and taken at delivery, cash to the courier, or from their wallet
    /// at booking.
    static let paymentMethod = Schema.oneOf(PaymentMethod.allCases.map(\.rawValue))
    /// A card as the provider's app SDK made it (a Stripe PaymentMethod id): card numbers never reach the API.
    static let card = Schema.string(min: 4, max: 255, pattern: "^pm_[A-Za-z0-9_]+$", rule: "cardPaymentMethod must be a payment method id (pm_...).")
    /// A fix's optional parts.
    static let heading = Schema.number(0...360)
    static let speedMps = Schema.number(0...100)
}

struct RegisterCourierBody: RequestBody {
    static let schema = Schema.object(["vehicle": .required(Shapes.vehicle), "capacity": .required(Shapes.capacity)])
    let vehicle: String
    let capacity: Int
}

struct CourierStatusBody: RequestBody {
    static let schema = Schema.object(["online": .required(.boolean)])
    let online: Bool
}

struct LocationBody: RequestBody {
    static let schema = Schema.object([
        "lat": .required(Shapes.lat), "lon": .required(Shapes.lon), "heading": .optional(Shapes.heading),
        "speedMps": .optional(Shapes.speedMps), "at": .optional(.dateTime),
    ])
    let lat: Double
    let lon: Double
    let heading: Double?
    let speedMps: Double?
    let at: String?
}

struct PointBody: RequestBody {
    static let schema = Schema.object(["lat": .required(Shapes.lat), "lon": .required(Shapes.lon)])
    let lat: Double
    let lon: Double
    var point: GeoPoint { GeoPoint(lat: lat, lon: lon) }
}

/// A quote from a pickup or a centre the sender brings the parcel to, to a drop-off or a centre its recipient
/// collects it from.
struct QuoteBody: RequestBody {
    static let schema = Schema.object([
        "pickup": .optional(PointBody.schema), "dropoff": .optional(PointBody.schema), "service": .required(Shapes.service),
        "dropOffCentreId": .optional(.uuid), "collectionCentreId": .optional(.uuid), "insured": .optional(.boolean),
    ])
    let pickup: PointBody?
    let dropoff: PointBody?
    let service: ParcelService
    let dropOffCentreId: UUID?
    let collectionCentreId: UUID?
    let insured: Bool?
}

struct AddressBody: RequestBody {
    static let schema = Schema.object(["lat": .required(Shapes.lat), "lon": .required(Shapes.lon), "address": .required(.text(max: 300))])
    let lat: Double
    let lon: Double
    let address: String
    var point: GeoPoint { GeoPoint(lat: lat, lon: lon) }
}

/// Who receives a parcel: a name for the courier, and at most one of an account's id or username (the account sees
/// the parcel at once); without either, or with a username nobody has, the sender gets a claim code to pass on.
/// An e-mail address or phone number is for the courier and a later claim, never a match by itself.
struct RecipientBody: RequestBody {
    static let schema = Schema.object([
        "name": .required(.text(max: 100)), "userId": .optional(.uuid),
        "username": .optional(.string(min: 3, max: 32, pattern: "^[A-Za-z0-9_.]+$")),
        "email": .optional(.string(max: 254, pattern: "^[^@\\s]+@[^@\\s]+$", rule: "email must be an e-mail address.")),
        "phone": .optional(.string(min: 3, max: 32, pattern: "^\\+?[0-9][0-9 ()-]*$", rule: "phone must be a phone number.")),
    ])
    let name: String
    let userId: UUID?
    let username: String?
    let email: String?
    let phone: String?
}

/// A recipient claiming a parcel by the code its sender passed on.
struct ClaimBody: RequestBody {
    static let schema = Schema.object(["code": .required(.string(min: 1, max: 64))])
    let code: String
}

struct CreateParcelBody: RequestBody {
    static let schema = Schema.object([
        // A pickup, or the centre the sender brings it to; a drop-off, or the centre the recipient collects it from.
        "pickup": .optional(AddressBody.schema), "dropoff": .optional(AddressBody.schema), "recipient": .required(RecipientBody.schema),
        "dropOffCentreId": .optional(.uuid), "collectionCentreId": .optional(.uuid),
        "service": .required(Shapes.service), "paymentMethod": .required(Shapes.paymentMethod),
        // The card, as the provider's client library tokenised it in the app (a Stripe PaymentMethod id).
        "cardPaymentMethod": .optional(Shapes.card),
        "insured": .optional(.boolean), "description": .optional(.text(min: 0, max: 1000, multiline: true)),
        "documentPhotoMediaId": .required(.uuid),
        // Loyalty points to take off the price, one minor unit each (at most the price is used).
        "pointsToSpend": .optional(.integer(0...10_000_000)),
        // The tariff of the quote the sender accepted: its price holds while the quote does.
        "tariffId": .optional(.uuid),
    ])
    let pickup: AddressBody?
    let dropoff: AddressBody?
    let dropOffCentreId: UUID?
    let collectionCentreId: UUID?
    let recipient: RecipientBody
    let service: ParcelService
    let paymentMethod: PaymentMethod
    let cardPaymentMethod: String?
    let pointsToSpend: Int?
    let insured: Bool?
    let description: String?
    let documentPhotoMediaId: UUID
    let tariffId: UUID?
}

/// The courier handing a parcel over: a photo, and the PIN the recipient showed (proof of the handover, which makes
/// it received); without a PIN it is delivered and waits for the recipient's own confirmation.
struct DeliverBody: RequestBody {
    static let schema = Schema.object(["photoMediaId": .required(.uuid), "pin": .optional(.string(min: 1, max: 16)),
                                       // For a cash parcel: what the courier took, which must be its price.
                                       "cashCollectedMinor": .optional(.integer(0...100_000_000))])
    let photoMediaId: UUID
    let pin: String?
    let cashCollectedMinor: Int?
}

struct PhotoBody: RequestBody {
    static let schema = Schema.object(["photoMediaId": .required(.uuid)])
    let photoMediaId: UUID
}

struct FailBody: RequestBody {
    static let schema = Schema.object(["reason": .required(.text(max: 500))])
    let reason: String
}

/// A reception centre as an operator describes it; `openingHours` in its `timeZone` (an IANA name).
struct CentreBody: RequestBody {
    static let span = Schema.object([
        "day": .required(.integer(1...7)), "opens": .required(.string(pattern: "^[0-9]{2}:[0-9]{2}$", rule: "opens must be HH:MM.")),
        "closes": .required(.string(pattern: "^[0-9]{2}:[0-9]{2}$", rule: "closes must be HH:MM.")),
    ])
    static let schema = Schema.object([
        "name": .required(.text(max: 100)), "address": .required(.text(max: 300)), "lat": .required(Shapes.lat), "lon": .required(Shapes.lon),
        "timeZone": .required(.string(min: 1, max: 64, pattern: "^[A-Za-z_]+(/[A-Za-z0-9_+-]+)*$", rule: "timeZone must be an IANA time zone.")),
        "openingHours": .required(.array(span, count: 0...50)),
        "acceptsDropOffs": .required(.boolean), "acceptsCollections": .required(.boolean),
    ])
    let name: String
    let address: String
    let lat: Double
    let lon: Double
    let timeZone: String
    let openingHours: [OpeningHours.Span]
    let acceptsDropOffs: Bool
    let acceptsCollections: Bool
}

/// Staff taking a parcel in by the code its sender shows.
struct CheckInBody: RequestBody {
    static let schema = Schema.object(["code": .required(.string(min: 1, max: 40))])
    let code: String
}

/// Staff handing a parcel over to its recipient, who shows its code and the delivery PIN (and pays, for cash).
struct CollectBody: RequestBody {
    static let schema = Schema.object(["code": .required(.string(min: 1, max: 40)), "pin": .required(.string(min: 1, max: 16)),
                                       "cashCollectedMinor": .optional(.integer(0...100_000_000))])
    let code: String
    let pin: String
    let cashCollectedMinor: Int?
}

/// A top-up of the caller's wallet, taken from a card at once.
struct TopUpBody: RequestBody {
    static let schema = Schema.object([
        "amountMinor": .required(.integer(Wallet.topUpRange)), "cardPaymentMethod": .required(Shapes.card),
    ])
    let amountMinor: Int
    let cardPaymentMethod: String
}

/// A subscription to a plan, its months taken from a card.
struct SubscribeBody: RequestBody {
    static let schema = Schema.object([
        "planId": .required(.string(min: 1, max: 20, pattern: "^[a-z]+$")), "cardPaymentMethod": .required(Shapes.card),
    ])
    let planId: String
    let cardPaymentMethod: String
}
