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

// MARK: - Responses

struct PlaceView: View {
    let lat: Double
    let lon: Double
    let address: String?
    init(_ point: GeoPoint, address: String? = nil) { lat = point.lat; lon = point.lon; self.address = address }

    static let fields: [ViewField<Self>] = [.field("lat", \.lat, Shapes.lat), .field("lon", \.lon, Shapes.lon), .omitted("address", \.address)]
}

struct CourierView: View {
    let courier: CourierRecord
    init(_ c: CourierRecord) { courier = c }

    var position: PlaceView? { courier.position.map { PlaceView($0) } }

    static let fields: [ViewField<Self>] = [
        .field("id", \.courier.userId), .field("vehicle", \.courier.vehicle, Shapes.vehicle), .field("capacity", \.courier.capacity),
        .field("activeParcels", \.courier.active), .field("online", \.courier.online), .omitted("position", \.position),
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
        .field("distanceMeters", \.quote.distanceMeters),
    ]
}

struct RecipientView: View {
    let userId: UUID?
    let name: String
    let phone: String?

    static let fields: [ViewField<Self>] = [.nullable("userId", \.userId), .field("name", \.name), .nullable("phone", \.phone)]
}

struct ParcelView: View {
    let parcel: ParcelRecord
    let historyEntries: [HistoryEntry]?
    let position: GeoPoint?

    init(_ p: ParcelRecord, history: [HistoryEntry]? = nil, courierPosition: GeoPoint? = nil) {
        parcel = p; historyEntries = history; position = courierPosition
    }

    var recipient: RecipientView { RecipientView(userId: parcel.recipientUserId, name: parcel.recipientName, phone: parcel.recipientPhone) }
    var pickup: PlaceView { PlaceView(parcel.pickup, address: parcel.pickupAddress) }
    var dropoff: PlaceView { PlaceView(parcel.dropoff, address: parcel.dropoffAddress) }
    var quote: QuoteView { QuoteView(quote: parcel.quote) }
    /// Only while the offer is open.
    var offeredTo: UUID? { parcel.status == .offered ? parcel.offeredTo : nil }
    var offerExpiresAt: Date? { parcel.status == .offered ? parcel.offerExpiresAt : nil }
    var courierPosition: PlaceView? { position.map { PlaceView($0) } }
    var history: [HistoryView]? { historyEntries?.map(HistoryView.init) }

    static let fields: [ViewField<Self>] = [
        .field("id", \.parcel.id), .field("status", \.parcel.status.rawValue, Shapes.status), .field("senderId", \.parcel.senderId),
        .field("recipient", \.recipient), .field("pickup", \.pickup), .field("dropoff", \.dropoff),
        .field("service", \.parcel.service.rawValue, Shapes.service), .field("paymentMethod", \.parcel.paymentMethod, Shapes.paymentMethod),
        .field("insured", \.parcel.insured), .omitted("description", \.parcel.description),
        .field("documentPhotoMediaId", \.parcel.documentPhotoMediaId), .omitted("deliveryPhotoMediaId", \.parcel.deliveryPhotoMediaId),
        .omitted("receiptPhotoMediaId", \.parcel.receiptPhotoMediaId), .field("quote", \.quote), .omitted("courierId", \.parcel.courierId),
        .omitted("offeredTo", \.offeredTo), .omitted("offerExpiresAt", \.offerExpiresAt), .omitted("courierPosition", \.courierPosition),
        .omitted("history", \.history), .field("createdAt", \.parcel.createdAt), .field("updatedAt", \.parcel.updatedAt),
    ]
}

/// Whether a courier's own fix was applied (false: stale or out of order, ignored).
struct AppliedView: View {
    let applied: Bool
    static let fields: [ViewField<Self>] = [.field("applied", \.applied)]
}
