import Foundation
import Geo
import Models
import ServiceKit

// MARK: - Request bodies

struct RegisterCourierBody: RequestBody {
    static let fields: Set<String> = ["vehicle", "capacity"]
    let vehicle: String
    let capacity: Int
}

struct CourierStatusBody: RequestBody {
    static let fields: Set<String> = ["online"]
    let online: Bool
}

struct LocationBody: RequestBody {
    static let fields: Set<String> = ["lat", "lon", "heading", "speedMps", "at"]
    let lat: Double
    let lon: Double
    let heading: Double?
    let speedMps: Double?
    let at: String?
}

struct PointBody: Decodable {
    let lat: Double
    let lon: Double
}

struct QuoteBody: RequestBody {
    static let fields: Set<String> = ["pickup", "dropoff", "service", "insured"]
    let pickup: PointBody
    let dropoff: PointBody
    let service: String
    let insured: Bool?
}

struct AddressBody: Decodable {
    let lat: Double
    let lon: Double
    let address: String
}

struct RecipientBody: Decodable {
    let userId: String?
    let name: String
    let phone: String?
}

struct CreateParcelBody: RequestBody {
    static let fields: Set<String> = ["pickup", "dropoff", "recipient", "service", "paymentMethod", "insured", "description",
                                      "documentPhotoMediaId"]
    let pickup: AddressBody
    let dropoff: AddressBody
    let recipient: RecipientBody
    let service: String
    let paymentMethod: String
    let insured: Bool?
    let description: String?
    let documentPhotoMediaId: String
}

struct PhotoBody: RequestBody {
    static let fields: Set<String> = ["photoMediaId"]
    let photoMediaId: String
}

struct FailBody: RequestBody {
    static let fields: Set<String> = ["reason"]
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
    static let point = #"{"type":"object","required":["lat","lon"],"properties":{"lat":{"type":"number","minimum":-90,"maximum":90},"lon":{"type":"number","minimum":-180,"maximum":180}}}"#
    static let address = #"{"type":"object","required":["lat","lon","address"],"properties":{"lat":{"type":"number","minimum":-90,"maximum":90},"lon":{"type":"number","minimum":-180,"maximum":180},"address":{"type":"string","minLength":1,"maxLength":300}}}"#
    static let courier = #"{"type":"object","required":["id","vehicle","capacity","activeParcels","online"]}"#
    static let registerCourier = #"{"type":"object","required":["vehicle","capacity"],"additionalProperties":false,"properties":{"vehicle":{"enum":["foot","bike","scooter","car"]},"capacity":{"type":"integer","minimum":1,"maximum":50}}}"#
    static let courierStatus = #"{"type":"object","required":["online"],"additionalProperties":false,"properties":{"online":{"type":"boolean"}}}"#
    static let location = #"{"type":"object","required":["lat","lon"],"additionalProperties":false,"properties":{"lat":{"type":"number","minimum":-90,"maximum":90},"lon":{"type":"number","minimum":-180,"maximum":180},"heading":{"type":"number","minimum":0,"maximum":360},"speedMps":{"type":"number","minimum":0,"maximum":100},"at":{"type":"string","format":"date-time"}}}"#
    static let applied = #"{"type":"object","required":["applied"],"properties":{"applied":{"type":"boolean"}}}"#
    static let quoteRequest = #"{"type":"object","required":["pickup","dropoff","service"],"additionalProperties":false,"properties":{"pickup":"# + point + #","dropoff":"# + point + #","service":{"enum":["express","standard"]},"insured":{"type":"boolean"}}}"#
    static let quote = #"{"type":"object","required":["currency","amountMinor","etaSeconds","distanceMeters"],"properties":{"currency":{"type":"string"},"amountMinor":{"type":"integer"},"etaSeconds":{"type":"integer"},"distanceMeters":{"type":"integer"}}}"#
    static let createParcel = #"{"type":"object","required":["pickup","dropoff","recipient","service","paymentMethod","documentPhotoMediaId"],"additionalProperties":false,"properties":{"pickup":"# + address + #","dropoff":"# + address + #","recipient":{"type":"object","required":["name"],"properties":{"userId":{"type":"string","format":"uuid"},"name":{"type":"string","minLength":1,"maxLength":100},"phone":{"type":"string","maxLength":32}}},"service":{"enum":["express","standard"]},"paymentMethod":{"enum":["card","cash","wallet"]},"insured":{"type":"boolean"},"description":{"type":"string","maxLength":1000},"documentPhotoMediaId":{"type":"string","format":"uuid"}}}"#
    static let parcel = #"{"type":"object","required":["id","status","senderId","pickup","dropoff","service","quote","createdAt","updatedAt"],"properties":{"id":{"type":"string","format":"uuid"},"status":{"enum":["awaiting_courier","offered","assigned","picked_up","in_transit","delivered","received","cancelled","failed"]},"quote":"# + quote + #"}}"#
    static let parcelPage = #"{"type":"object","required":["items","nextCursor"],"properties":{"items":{"type":"array","items":"# + parcel + #"},"nextCursor":{"type":["string","null"]}}}"#
    static let photo = #"{"type":"object","required":["photoMediaId"],"additionalProperties":false,"properties":{"photoMediaId":{"type":"string","format":"uuid"}}}"#
    static let fail = #"{"type":"object","required":["reason"],"additionalProperties":false,"properties":{"reason":{"type":"string","minLength":1,"maxLength":500}}}"#
    static let seedCouriers = #"{"type":"object","required":["couriers"],"additionalProperties":false,"properties":{"couriers":{"type":"array","minItems":1,"maxItems":1000,"items":{"type":"object","required":["id","vehicle","capacity"],"properties":{"id":{"type":"string","format":"uuid"},"vehicle":{"enum":["foot","bike","scooter","car"]},"capacity":{"type":"integer","minimum":1,"maximum":50},"online":{"type":"boolean"},"lat":{"type":"number"},"lon":{"type":"number"}}}}}}"#
    static let fleetFixes = #"{"type":"object","required":["fixes"],"additionalProperties":false,"properties":{"fixes":{"type":"array","minItems":1,"maxItems":1000,"items":{"type":"object","required":["courierId","lat","lon"],"properties":{"courierId":{"type":"string","format":"uuid"},"lat":{"type":"number","minimum":-90,"maximum":90},"lon":{"type":"number","minimum":-180,"maximum":180},"heading":{"type":"number"},"speedMps":{"type":"number"},"at":{"type":"string","format":"date-time"}}}}}}"#
    static let operatorAccept = #"{"type":"object","required":["courierId"],"additionalProperties":false,"properties":{"courierId":{"type":"string","format":"uuid"}}}"#
    static let media = #"{"type":"object","required":["id","url","contentType","size"]}"#
}
