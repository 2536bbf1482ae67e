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
    static let paymentMethod = Schema.oneOf(["card", "cash", "wallet"])
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

struct QuoteBody: RequestBody {
    static let schema = Schema.object([
        "pickup": .required(PointBody.schema), "dropoff": .required(PointBody.schema), "service": .required(Shapes.service),
        "insured": .optional(.boolean),
    ])
    let pickup: PointBody
    let dropoff: PointBody
    let service: ParcelService
    let insured: Bool?
}

struct AddressBody: RequestBody {
    static let schema = Schema.object(["lat": .required(Shapes.lat), "lon": .required(Shapes.lon), "address": .required(.text(max: 300))])
    let lat: Double
    let lon: Double
    let address: String
    var point: GeoPoint { GeoPoint(lat: lat, lon: lon) }
}

struct RecipientBody: RequestBody {
    static let schema = Schema.object(["userId": .optional(.uuid), "name": .required(.text(max: 100)), "phone": .optional(.text(max: 32))])
    let userId: UUID?
    let name: String
    let phone: String?
}

struct CreateParcelBody: RequestBody {
    static let schema = Schema.object([
        "pickup": .required(AddressBody.schema), "dropoff": .required(AddressBody.schema), "recipient": .required(RecipientBody.schema),
        "service": .required(Shapes.service), "paymentMethod": .required(Shapes.paymentMethod),
        "insured": .optional(.boolean), "description": .optional(.text(min: 0, max: 1000, multiline: true)),
        "documentPhotoMediaId": .required(.uuid),
    ])
    let pickup: AddressBody
    let dropoff: AddressBody
    let recipient: RecipientBody
    let service: ParcelService
    let paymentMethod: String
    let insured: Bool?
    let description: String?
    let documentPhotoMediaId: UUID
}

struct PhotoBody: RequestBody {
    static let schema = Schema.object(["photoMediaId": .required(.uuid)])
    let photoMediaId: UUID
}

struct FailBody: RequestBody {
    static let schema = Schema.object(["reason": .required(.text(max: 500))])
    let reason: String
}
