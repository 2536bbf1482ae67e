import Foundation
import Geo
import Models
import ServiceKit

// MARK: - Request bodies

/// The shapes dispatch's bodies share.
enum Shapes {
    static let lat = Schema.number(-90...90)
    static let lon = Schema.number(-180...180)
    static let vehicle = Schema.oneOf(["foot", "bike", "scooter", "car"])
    static let capacity = Schema.integer(1...50)
    static let service = Schema.oneOf(ParcelService.allCases.map(\.rawValue))
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
        "service": .required(Shapes.service), "paymentMethod": .required(.oneOf(["card", "cash", "wallet"])),
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

// MARK: - Responses

struct PlaceView: Encodable {
    let lat: Double
    let lon: Double
    let address: String?
}

struct CourierView: Encodable {
    let id: String
    let vehicle: String
    let capacity: Int
    let activeParcels: Int
    let online: Bool
    let position: PlaceView?
    let createdAt: String
    let updatedAt: String

    init(_ c: CourierRecord) {
        id = c.userId.lowercased; vehicle = c.vehicle; capacity = c.capacity; activeParcels = c.active; online = c.online
        position = c.position.map { PlaceView(lat: $0.lat, lon: $0.lon, address: nil) }
        createdAt = Timestamp.format(c.createdAt); updatedAt = Timestamp.format(c.updatedAt)
    }
}

struct HistoryView: Encodable {
    let at: String
    let from: String?
    let to: String
    let actor: String
    let actorId: String?
    let place: PlaceView?
    init(_ h: HistoryEntry) {
        at = Timestamp.format(h.at); from = h.from; to = h.to; actor = h.actor; actorId = h.actorId?.lowercased
        place = h.place.map { PlaceView(lat: $0.lat, lon: $0.lon, address: nil) }
    }
}

struct ParcelView: Encodable {
    let id: String
    let status: String
    let senderId: String
    let recipient: [String: String?]
    let pickup: PlaceView
    let dropoff: PlaceView
    let service: String
    let paymentMethod: String
    let insured: Bool
    let description: String?
    let documentPhotoMediaId: String
    let deliveryPhotoMediaId: String?
    let receiptPhotoMediaId: String?
    let quote: Quote
    let courierId: String?
    let offeredTo: String?
    let offerExpiresAt: String?
    let courierPosition: PlaceView?
    let history: [HistoryView]?
    let createdAt: String
    let updatedAt: String

    init(_ p: ParcelRecord, history: [HistoryEntry]? = nil, courierPosition: GeoPoint? = nil) {
        id = p.id.lowercased; status = p.status.rawValue; senderId = p.senderId.lowercased
        recipient = ["userId": p.recipientUserId?.lowercased, "name": p.recipientName, "phone": p.recipientPhone]
        pickup = PlaceView(lat: p.pickup.lat, lon: p.pickup.lon, address: p.pickupAddress)
        dropoff = PlaceView(lat: p.dropoff.lat, lon: p.dropoff.lon, address: p.dropoffAddress)
        service = p.service.rawValue; paymentMethod = p.paymentMethod; insured = p.insured; description = p.description
        documentPhotoMediaId = p.documentPhotoMediaId.lowercased; deliveryPhotoMediaId = p.deliveryPhotoMediaId?.lowercased
        receiptPhotoMediaId = p.receiptPhotoMediaId?.lowercased; quote = p.quote; courierId = p.courierId?.lowercased
        offeredTo = p.status == .offered ? p.offeredTo?.lowercased : nil
        offerExpiresAt = p.status == .offered ? p.offerExpiresAt.map(Timestamp.format) : nil
        self.courierPosition = courierPosition.map { PlaceView(lat: $0.lat, lon: $0.lon, address: nil) }
        self.history = history?.map(HistoryView.init)
        createdAt = Timestamp.format(p.createdAt); updatedAt = Timestamp.format(p.updatedAt)
    }
}

// MARK: - Schemas for the OpenAPI document

enum Schemas {
    static let courier = #"{"type":"object","required":["id","vehicle","capacity","activeParcels","online"]}"#
    static let applied = #"{"type":"object","required":["applied"],"properties":{"applied":{"type":"boolean"}}}"#
    static let quote = #"{"type":"object","required":["currency","amountMinor","etaSeconds","distanceMeters"],"properties":{"currency":{"type":"string"},"amountMinor":{"type":"integer"},"etaSeconds":{"type":"integer"},"distanceMeters":{"type":"integer"}}}"#
    static let parcel = #"{"type":"object","required":["id","status","senderId","pickup","dropoff","service","quote","createdAt","updatedAt"],"properties":{"id":{"type":"string","format":"uuid"},"status":{"enum":["awaiting_courier","offered","assigned","picked_up","in_transit","delivered","received","cancelled","failed"]},"quote":"# + quote + #"}}"#
    static let parcelPage = #"{"type":"object","required":["items","nextCursor"],"properties":{"items":{"type":"array","items":"# + parcel + #"},"nextCursor":{"type":["string","null"]}}}"#
    static let media = #"{"type":"object","required":["id","url","contentType","size"]}"#
    static let seeded = #"{"type":"object","required":["seeded"],"properties":{"seeded":{"type":"integer"}}}"#
    static let fixesApplied = #"{"type":"object","required":["received","applied"],"properties":{"received":{"type":"integer"},"applied":{"type":"integer"}}}"#
    static let offers = #"{"type":"object","required":["items"],"properties":{"items":{"type":"array","items":{"type":"object","required":["parcelId","courierId","pickup","service","expiresAt"],"properties":{"parcelId":{"type":"string","format":"uuid"},"courierId":{"type":"string","format":"uuid"},"pickup":{"type":"object"},"service":{"enum":["express","standard"]},"expiresAt":{"type":"string","format":"date-time"}}}}}}"#
}
