import Features
import Foundation
import Geo
import HTTP
import Models
import Postgres
import Web

/// A centre's opening hours in its time zone: for each day of the week (1 Monday … 7 Sunday) the spans it is open,
/// `HH:MM` to `HH:MM` (a span may not cross midnight: give the next day its own).
struct OpeningHours: Sendable, Equatable {
    struct Span: Sendable, Equatable, Codable {
        let day: Int
        let opens: String
        let closes: String
        var minutes: (Int, Int) { (OpeningHours.minutes(opens) ?? 0, OpeningHours.minutes(closes) ?? 0) }
    }
    let spans: [Span]
    let zone: TimeZone

    static func minutes(_ hhmm: String) -> Int? {
        let parts = hhmm.split(separator: ":")
        guard parts.count == 2, parts[0].count == 2, parts[1].count == 2, let h = Int(parts[0]), let m = Int(parts[1]),
              (0...24).contains(h), (0...59).contains(m), h * 60 + m <= 24 * 60 else { return nil }
        return h * 60 + m
    }

    /// The spans of `body` (400 naming the bad one).
    static func validated(_ spans: [Span], field: String) throws -> [Span] {
        for (i, span) in spans.enumerated() {
            guard let opens = minutes(span.opens), let closes = minutes(span.closes), opens < closes else {
                throw HTTPError.validation("Each span opens before it closes, as HH:MM (00:00 to 24:00).", field: "\(field)[\(i)]")
            }
        }
        return spans
    }

    private func calendar() -> Calendar {
        var c = Calendar(identifier: .iso8601)
        c.timeZone = zone
        return c
    }

    /// Whether it is open at `date`.
    func isOpen(at date: Date) -> Bool {
        let c = calendar()
        let parts = c.dateComponents([.weekday, .hour, .minute], from: date)
        let day = ((parts.weekday ?? 1) + 5) % 7 + 1  // Foundation: 1 Sunday … 7 Saturday
        let now = (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
        return spans.contains { $0.day == day && $0.minutes.0 <= now && now < $0.minutes.1 }
    }

    /// When it is next open, from `date` (itself when open then), within a week; nil when it never opens.
    func nextOpening(from date: Date) -> Date? {
        if isOpen(at: date) { return date }
        let c = calendar()
        let start = c.startOfDay(for: date)
        for offset in 0..<8 {
            guard let dayStart = c.date(byAdding: .day, value: offset, to: start) else { continue }
            let weekday = ((c.component(.weekday, from: dayStart)) + 5) % 7 + 1
            let opens = spans.filter { $0.day == weekday }.map(\.minutes.0).sorted()
            for minute in opens {
                if let at = c.date(byAdding: .minute, value: minute, to: dayStart), at > date { return at }
            }
        }
        return nil
    }
}

/// What the centre rules refuse.
enum CentreError: DomainError, Equatable {
    case unknownCentre(field: String)
    case noDropOffs, noCollections
    case unknownCode
    case cardNotHeld
    /// Both a place and a centre for one end of the route, or neither.
    case oneEnd(field: String, centre: String)

    var refusal: Refusal {
        switch self {
        case .unknownCentre, .noDropOffs, .noCollections, .oneEnd: return .invalid
        case .unknownCode: return .notFound
        case .cardNotHeld: return .conflict
        }
    }
    var field: String? {
        switch self {
        case .unknownCentre(let field), .oneEnd(let field, _): return field
        case .noDropOffs: return "dropOffCentreId"
        case .noCollections: return "collectionCentreId"
        case .unknownCode: return "code"
        case .cardNotHeld: return nil
        }
    }
    var message: String {
        switch self {
        case .unknownCentre: return "No such reception centre."
        case .noDropOffs: return "That centre takes no drop-offs."
        case .noCollections: return "That centre keeps no parcels for collection."
        case .unknownCode: return "No parcel here has that code."
        case .cardNotHeld: return "The sender's card is not held yet: the parcel cannot be taken in."
        case .oneEnd(let field, let centre): return "Give \(field) or \(centre), one of them."
        }
    }
}

/// Reception centres: where a sender may bring a parcel instead of a pickup, and where a recipient may collect it.
/// Operators manage them and name their staff; staff check parcels in by the code the sender shows, and hand them
/// over to the recipient who shows the code and the delivery PIN.
struct Centres: Sendable {
    let parcels: Parcels
    var storage: DispatchStorage { parcels.storage }

    /// The centre `id` for `field`, open to drop-offs or collections as asked.
    func centre(_ c: Connection, _ id: UUID, field: String, dropOff: Bool) throws -> CentreRecord {
        guard let centre = try storage.centre(c, id) else { throw CentreError.unknownCentre(field: field) }
        if dropOff && !centre.acceptsDropOffs { throw CentreError.noDropOffs }
        if !dropOff && !centre.acceptsCollections { throw CentreError.noCollections }
        return centre
    }

    /// Where a parcel goes from and to: the places given, or the centres named for either end.
    func itinerary(_ c: Connection, pickup: (GeoPoint, String)?, dropoff: (GeoPoint, String)?, dropOffCentre: UUID?,
                   collectionCentre: UUID?) throws -> Itinerary {
        guard (pickup == nil) != (dropOffCentre == nil) else { throw CentreError.oneEnd(field: "pickup", centre: "dropOffCentreId") }
        guard (dropoff == nil) != (collectionCentre == nil) else { throw CentreError.oneEnd(field: "dropoff", centre: "collectionCentreId") }
        let from = try dropOffCentre.map { try centre(c, $0, field: "dropOffCentreId", dropOff: true) }
        let to = try collectionCentre.map { try centre(c, $0, field: "collectionCentreId", dropOff: false) }
        return Itinerary(pickup: from?.point ?? pickup!.0, pickupAddress: from.map { "\($0.name), \($0.address)" } ?? pickup!.1,
                         dropoff: to?.point ?? dropoff!.0, dropoffAddress: to.map { "\($0.name), \($0.address)" } ?? dropoff!.1,
                         dropOffCentre: from, collectionCentre: to)
    }

    /// Staff of `centre` take in the parcel whose centre code is `code`: it waits for a courier there.
    func checkIn(_ c: Connection, centre: UUID, code: String, by staff: UUID) throws -> ParcelRecord {
        guard let code = InviteCode.normalise(code), let parcel = try storage.parcel(c, centreCode: code, lock: true),
              parcel.dropOffCentreId == centre else {
            throw CentreError.unknownCode
        }
        if parcel.paymentMethod == .card, try storage.payment(c, parcel: parcel.id)?.status != .authorised { throw CentreError.cardNotHeld }
        return try parcels.apply(c, parcel, .checkIn, actor: .staff, actorId: staff, place: try storage.centre(c, centre)?.point)
    }

    /// Staff of `centre` hand the parcel with `code` to its recipient, who showed `pin`. A wrong PIN is counted as
    /// at the door (the caller commits it, then refuses).
    func collect(_ c: Connection, centre: UUID, code: String, pin: String, by staff: UUID, cashCollected: Int?) throws -> Result<ParcelRecord, ParcelError> {
        guard let code = InviteCode.normalise(code), let parcel = try storage.parcel(c, centreCode: code, lock: true),
              parcel.collectionCentreId == centre,
              parcel.status == .readyForCollection else { throw CentreError.unknownCode }
        if let wrong = try parcels.checkPin(c, parcel, pin) { return .failure(wrong) }
        return .success(try parcels.apply(c, parcel, .collect, actor: .staff, actorId: staff, place: try storage.centre(c, centre)?.point,
                                          cashCollected: cashCollected))
    }
}

/// A reception centre as an operator describes it: its opening hours are `openingHours` in `timeZone` (an IANA name).
struct CentreDescription {
    let name: String
    let address: String
    let point: GeoPoint
    let timeZone: String
    let openingHours: [OpeningHours.Span]
    let acceptsDropOffs: Bool
    let acceptsCollections: Bool
}

/// Where a parcel goes from and to: addresses, or reception centres (their place and name).
struct Itinerary {
    let pickup: GeoPoint
    let pickupAddress: String
    let dropoff: GeoPoint
    let dropoffAddress: String
    let dropOffCentre: CentreRecord?
    let collectionCentre: CentreRecord?
}
