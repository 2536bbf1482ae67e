import Foundation

/// A latitude and longitude in events.
public struct Place: Codable, Sendable, Equatable {
    public var lat: Double
    public var lon: Double
    public init(lat: Double, lon: Double) { self.lat = lat; self.lon = lon }
}

/// `parcel.created`: someone booked a delivery. Key: the parcel id.
public struct ParcelCreated: EventPayload, Equatable {
    public static let type = "parcel.created"
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

/// `parcel.claimed`: someone became the recipient of a parcel by the claim code its sender passed on. Key: the
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
    public var parcelId: String
    public var from: String
    public var to: String
    /// `sender`, `recipient`, `courier` or `system`.
    public var actor: String
    public var actorId: String?
    public var courierId: String?
    public var place: Place?
    public var at: String

    public init(parcelId: String, from: String, to: String, actor: String, actorId: String?, courierId: String?, place: Place?, at: String) {
        self.parcelId = parcelId; self.from = from; self.to = to; self.actor = actor; self.actorId = actorId
        self.courierId = courierId; self.place = place; self.at = at
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
