import Events
import Foundation
import Geo
import HTTP
import Models
import Postgres
import Web

/// A courier seeded by an operator.
struct SeededCourier {
    let id: UUID
    let vehicle: String
    let capacity: Int
    let online: Bool
    let position: GeoPoint?
}

struct SeedCouriersBody: RequestBody {
    struct Item: RequestBody {
        /// A position is both `lat` and `lon`, or neither.
        static let schema = Schema.object([
            "id": .required(.uuid), "vehicle": .required(Shapes.vehicle), "capacity": .required(Shapes.capacity),
            "online": .optional(.boolean), "lat": .optional(Shapes.lat), "lon": .optional(Shapes.lon),
        ])
        let id: UUID; let vehicle: String; let capacity: Int; let online: Bool?; let lat: Double?; let lon: Double?
    }
    static let schema = Schema.object(["couriers": .required(.array(Item.schema, count: 1...DispatchHandlers.batchLimit))])
    let couriers: [Item]
}

struct FleetFixesBody: RequestBody {
    struct Item: RequestBody {
        static let schema = Schema.object([
            "courierId": .required(.uuid), "lat": .required(Shapes.lat), "lon": .required(Shapes.lon),
            "heading": .optional(Shapes.heading), "speedMps": .optional(Shapes.speedMps), "at": .optional(.dateTime),
        ])
        let courierId: UUID; let lat: Double; let lon: Double; let heading: Double?; let speedMps: Double?; let at: String?
    }
    static let schema = Schema.object(["fixes": .required(.array(Item.schema, count: 1...DispatchHandlers.batchLimit))])
    let fixes: [Item]
}

/// A fleet's batches, the hottest body there is, read without a tree.
extension FleetFixesBody: ScannedBody {
    static func scan(_ s: inout JSONScanner) -> FleetFixesBody? {
        guard s.take(UInt8(ascii: "{")), s.key() == "fixes", s.take(UInt8(ascii: "[")) else { return nil }
        var fixes: [Item] = []
        fixes.reserveCapacity(DispatchHandlers.batchLimit)
        while true {
            guard fixes.count < DispatchHandlers.batchLimit, let item = Item.scan(&s), let next = s.more(before: UInt8(ascii: "]"))
            else { return nil }
            fixes.append(item)
            if !next { break }
        }
        guard s.more(before: UInt8(ascii: "}")) == false else { return nil }
        return FleetFixesBody(fixes: fixes)
    }
}

extension FleetFixesBody.Item {
    static func scan(_ s: inout JSONScanner) -> Self? {
        guard s.take(UInt8(ascii: "{")) else { return nil }
        var id: UUID?, lat: Double?, lon: Double?, heading: Double??, speed: Double??, at: String??
        /// An optional member's value: nil for null.
        func optional<T>(_ value: (inout JSONScanner) -> T?) -> T?? {
            if s.null() { return .some(nil) }
            return value(&s).map { .some($0) }
        }
        while true {
            switch s.key() {
            case "courierId"?:
                guard id == nil, let v = s.string().flatMap(UUID.init(postgresText:)) else { return nil }
                id = v
            case "lat"?: guard lat == nil, let v = s.number(Shapes.lat) else { return nil }; lat = v
            case "lon"?: guard lon == nil, let v = s.number(Shapes.lon) else { return nil }; lon = v
            case "heading"?: guard heading == nil, let v = optional({ $0.number(Shapes.heading) }) else { return nil }; heading = v
            case "speedMps"?: guard speed == nil, let v = optional({ $0.number(Shapes.speedMps) }) else { return nil }; speed = v
            case "at"?:
                guard at == nil, let v = optional({ $0.string(.dateTime) }) else { return nil }
                at = v
            default: return nil
            }
            guard let next = s.more(before: UInt8(ascii: "}")) else { return nil }
            if !next { break }
        }
        guard let id, let lat, let lon else { return nil }
        return Self(courierId: id, lat: lat, lon: lon, heading: heading ?? nil, speedMps: speed ?? nil, at: at ?? nil)
    }
}

struct OperatorAcceptBody: RequestBody {
    static let schema = Schema.object(["courierId": .required(.uuid)])
    let courierId: UUID
}

struct OfferView: View {
    let parcel: ParcelRecord
    let courierId: UUID

    var pickup: PlaceView { PlaceView(parcel.pickup) }
    var expiresAt: Date { parcel.offerExpiresAt ?? parcel.updatedAt }

    static let fields: [ViewField<Self>] = [
        .field("parcelId", \.parcel.id), .field("courierId", \.courierId), .field("pickup", \.pickup),
        .field("service", \.parcel.service.rawValue, Shapes.service), .field("expiresAt", \.expiresAt),
    ]
}

struct SeededView: View {
    let seeded: Int
    static let fields: [ViewField<Self>] = [.field("seeded", \.seeded, .integer(0...Int.max))]
}

struct FixesAppliedView: View {
    let received: Int
    let applied: Int
    static let fields: [ViewField<Self>] = [.field("received", \.received, .integer(0...Int.max)), .field("applied", \.applied, .integer(0...Int.max))]
}

/// The operator's bulk path, for a trusted fleet gateway or a load tester: couriers without sign-ups, location
/// fixes in batches (or on the `courier.location` topic), and answers to the offers its couriers get.
extension DispatchHandlers {
    static let batchLimit = 1000

    /// `POST /v1/operator/couriers`: creates or updates up to 1,000 couriers.
    func seedCouriers(_ context: Context<Void>, _ body: SeedCouriersBody) throws -> Response {
        var seen = Set<UUID>()
        let couriers = try body.couriers.enumerated().map { i, item -> SeededCourier in
            let field = "couriers[\(i)]."
            guard seen.insert(item.id).inserted else { throw HTTPError.validation("A courier appears twice.", field: field + "id") }
            var position: GeoPoint?
            switch (item.lat, item.lon) {
            case (nil, nil): position = nil
            case (let lat?, let lon?): position = GeoPoint(lat: lat, lon: lon)
            default: throw HTTPError.validation("Give both lat and lon, or neither.", field: field + "lat")
            }
            return SeededCourier(id: item.id, vehicle: item.vehicle, capacity: item.capacity, online: item.online ?? true, position: position)
        }
        let seeded = try pool.withTransaction { try storage.seedCouriers($0, couriers) }
        seeded.forEach(matcher.update)
        matcher.wake()
        return .json(SeededView(seeded: seeded.count))
    }

    /// `POST /v1/operator/locations`: up to 1,000 fixes for any couriers.
    func fleetLocations(_ context: Context<Void>, _ body: FleetFixesBody) throws -> Response {
        let now = Date()
        let fixes = try body.fixes.enumerated().map { i, f in
            try Fix(courier: f.courierId, lat: f.lat, lon: f.lon, heading: f.heading, speedMps: f.speedMps, at: f.at,
                    field: "fixes[\(i)].", now: now)
        }
        let applied = try pool.withTransaction { try couriers.record($0, fixes) }
        return .json(FixesAppliedView(received: fixes.count, applied: applied))
    }

    /// `GET /v1/operator/offers`: the offers open now, the oldest first (`?limit=`, at most 1,000).
    func openOffers(_ context: Context<Void>) throws -> Response {
        let limit = try Page(context.request, maxLimit: Self.batchLimit, defaultLimit: 100).limit
        let offers = try pool.withConnection { try storage.openOffers($0, limit: limit) }
        return .json(ItemList(offers.compactMap { p in p.offeredTo.map { OfferView(parcel: p, courierId: $0) } }))
    }

    /// `GET /v1/operator/payments/reconciliation?day=`: the day's (UTC, default today) deliveries per courier and
    /// currency against what was taken for them, and per currency where that went (refunds, couriers' earnings, what
    /// is kept); `differenceMinor` is zero when every delivery, top-up and plan month is paid for, else what is missing.
    func reconciliation(_ context: Context<Void>) throws -> Response {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        let day = context.request.query["day"] ?? formatter.string(from: Date())
        guard let date = formatter.date(from: day), formatter.string(from: date) == day else {
            throw HTTPError.validation("day must be a date such as 2026-12-02.", field: "day")
        }
        return .json(try pool.withConnection { c in
            let rows = try storage.deliveredOn(c, day: day)
            let taken = Dictionary(rows.map { ($0.currency, $0.priceMinor - $0.differenceMinor) }, uniquingKeysWith: +)
            return ReconciliationView(day: day, rows: rows, creditRows: try storage.creditsOn(c, day: day),
                                      centreRows: try storage.centreCashOn(c, day: day), moneyRows: try storage.moneyOn(c, day: day, taken: taken))
        })
    }

    /// `POST /v1/operator/parcels/{id}/accept`: a fleet accepts an offer for the courier it was made to.
    func operatorAccept(_ context: Context<Void>, _ body: OperatorAcceptBody) throws -> Response {
        try perform(context.request, try context.parameters.require("id", as: UUID.self), by: body.courierId, .accept)
    }

    /// A fix from a fleet gateway on `courier.location` (the service's own position events are skipped).
    func fleetFix(_ event: ReceivedEvent, _ c: Connection) throws {
        guard event.source != "/dispatch", let fix = try? event.decode(CourierLocation.self),
              let valid = try? Fix(courier: fix.courierId, lat: fix.lat, lon: fix.lon, heading: fix.heading, speedMps: fix.speedMps,
                                   at: Timestamp.format(fix.at))
        else { return }  // malformed fixes are dropped, not retried
        try couriers.record(c, [valid], publish: false)  // watchers already see the gateway's event
    }


}

/// An online courier on the operator's map: where their last fix put them, and whether they can take a parcel.
struct FleetCourierView: View {
    let id: UUID
    let position: GeoPoint
    let active: Int
    let capacity: Int
    let fixAt: Date?

    var place: PlaceView { PlaceView(position) }
    var available: Bool { active < capacity }

    static let fields: [ViewField<Self>] = [
        .field("courierId", \.id), .field("position", \.place), .field("available", \.available),
        .field("active", \.active, .integer(0...50)), .field("capacity", \.capacity, Shapes.capacity), .nullable("fixAt", \.fixAt),
    ]
}

/// A parcel waiting for a courier to be offered it, at its pickup, since its last change.
struct WaitingParcelView: View {
    let parcel: ParcelRecord
    var pickup: PlaceView { PlaceView(parcel.pickup) }
    static let fields: [ViewField<Self>] = [
        .field("parcelId", \.parcel.id), .field("pickup", \.pickup), .field("service", \.parcel.service.rawValue, Shapes.service),
        .field("waitingSince", \.parcel.updatedAt),
    ]
}

/// The operator's map at one moment: the online couriers with a position and the parcels waiting for one, each the
/// `limit` most recent (couriers by their last fix) or oldest (parcels by how long they have waited).
struct FleetView: View {
    let couriers: [FleetCourierView]
    let waiting: [WaitingParcelView]
    let at: Date
    static let fields: [ViewField<Self>] = [.field("couriers", \.couriers), .field("waiting", \.waiting), .field("at", \.at)]
}

extension DispatchHandlers {
    /// `GET /v1/operator/fleet`: the map now (`?limit=` of each, at most 5,000).
    func fleet(_ context: Context<Void>) throws -> Response {
        .json(try fleetNow(limit: try Page(context.request, maxLimit: 5000, defaultLimit: 1000).limit))
    }

    /// `GET /v1/operator/fleet/events`: the map now (`snapshot`), then, live, every courier position (`position`, a
    /// `courier.location` event's data: couriers carrying parcels, and every fix a fleet gateway puts on the topic)
    /// and every parcel transition (`status`, a `parcel.status` event's data), from the event streams every instance
    /// reads. A courier who moves without a parcel shows at the next snapshot the console asks for.
    func fleetEvents(_ context: Context<Void>) throws -> Response {
        let snapshot = try fleetNow(limit: try Page(context.request, maxLimit: 5000, defaultLimit: 1000).limit)
        let stream = EventStream()
        tracking.watchFleet(stream: stream)
        stream.send(event: "snapshot", data: String(decoding: JSON.encode(snapshot), as: UTF8.self))
        return .eventStream(stream)
    }

    private func fleetNow(limit: Int) throws -> FleetView {
        try pool.withConnection { c in
            let (couriers, waiting, at) = try storage.fleet(c, limit: limit, latest: matcher.position(of:newerThan:),
                                                                newer: matcher.positions(newerThan:))
            return FleetView(couriers: couriers, waiting: waiting.map(WaitingParcelView.init), at: at)
        }
    }
}
