import Foundation
import Geo
import Models
import Postgres
import Web

/// A fix that breaks a rule.
struct FixError: DomainError {
    let field: String?
    let message: String
    var refusal: Refusal { .invalid }
}

/// A location fix, validated.
struct Fix {
    let courier: UUID
    let point: GeoPoint
    let heading: Double?
    let speed: Double?
    let time: Date

    /// Checks a fix's ranges (also for fixes from the topic, which no schema checked); `field` prefixes the names in
    /// errors (`fixes[3].`).
    init(courier: UUID, lat: Double, lon: Double, heading: Double?, speedMps: Double?, at: String?, field: String = "",
         now: Date = Date()) throws {
        self.courier = courier
        point = GeoPoint(lat: lat, lon: lon)
        guard point.isValid else { throw FixError(field: field + "lat", message: "lat must be -90 to 90 and lon -180 to 180.") }
        if let heading, !(heading.isFinite && (0...360).contains(heading)) {
            throw FixError(field: field + "heading", message: "heading must be 0 to 360.")
        }
        if let speedMps, !(speedMps.isFinite && (0...100).contains(speedMps)) {
            throw FixError(field: field + "speedMps", message: "speedMps must be 0 to 100.")
        }
        self.heading = heading
        speed = speedMps
        var t = now
        if let at {
            guard let parsed = Timestamp.parse(at) else { throw FixError(field: field + "at", message: "at must be an RFC 3339 time.") }
            guard parsed <= now.addingTimeInterval(30) else { throw FixError(field: field + "at", message: "at is in the future.") }
            t = parsed
        }
        time = Date(timeIntervalSince1970: (t.timeIntervalSince1970 * 1_000_000).rounded() / 1_000_000)  // whole µs, as stored
    }

    /// The fastest a courier is believed to move (300 km/h), and how far off a fix may be besides (a cell-tower fix,
    /// a phone waking after a tunnel): what this refuses is a courier in another city, or country, an instant later
    /// (whose offers would follow a position they are not at), not a courier's ordinary jitter.
    static let maxMetersPerSecond = 300 / 3.6
    static let slackMeters = 5_000.0

    /// Whether a courier at `last` at `then` can be at `point` at `now`.
    static func reachable(from last: GeoPoint, at then: Date, to point: GeoPoint, at now: Date) -> Bool {
        greatCircleMeters(last, point) <= slackMeters + maxMetersPerSecond * max(0, now.timeIntervalSince(then))
    }

    /// The newest fix of each courier (a batch may carry several).
    static func newestPerCourier(_ fixes: [Fix]) -> [Fix] {
        var newest: [UUID: Fix] = [:]
        newest.reserveCapacity(fixes.count)
        for f in fixes where (newest[f.courier]?.time ?? .distantPast) < f.time { newest[f.courier] = f }
        return Array(newest.values)
    }
}

/// The couriers' side of the rules: their positions, which keep the matching index current, show on the parcels
/// they carry, and put a picked-up parcel in transit once it has left its pickup.
struct Couriers: Sendable {
    let storage: DispatchStorage
    let parcels: Parcels
    let matcher: Matcher
    let tracking: ParcelTracking

    /// Records fixes (the newest per courier), keeps the index current, shows the positions of couriers carrying
    /// parcels to their watchers, and puts parcels in transit on the first fix 50 m from their pickup. Returns how
    /// many fixes were applied: of registered couriers, newer than their last one this instance knows, and within
    /// reach of it (`Fix.reachable`). An unreachable fix is dropped (a fleet's), or refused with a 400 (`refusing`:
    /// a courier's own, who learns why).
    @discardableResult
    func record(_ c: Connection, _ fixes: [Fix], publish: Bool = true, refusing: Bool = false) throws -> Int {
        // Every fix is stored (folding keeps the newest); one older than what this instance knows changes nothing
        // here. Stored even so: what is known may come from a transaction that then rolled back.
        var applied = 0
        let newest = Fix.newestPerCourier(fixes)
        var reachable = matcher.reachable(newest)
        // A courier's own fix, whose last position this instance does not know (it started after it, or forgot them
        // while they were offline): their stored one, as of the last fold, bounds it instead.
        if refusing, newest.count == 1, let fix = newest.first, matcher.position(of: fix.courier, newerThan: nil) == nil,
           let stored = try storage.courier(c, fix.courier), let last = stored.position, let at = stored.fixAt, fix.time > at {
            reachable = [Fix.reachable(from: last, at: at, to: fix.point, at: fix.time)]
        }
        if refusing, reachable.contains(false) {
            throw FixError(field: "lat", message: "This fix is farther from your last one than a courier travels in the time between them.")
        }
        let fixes = reachable.contains(false) ? zip(newest, reachable).compactMap { $1 ? $0 : nil } : newest
        guard !fixes.isEmpty else { return 0 }
        let recorded = try storage.recordFixes(c, fixes, known: matcher.knowsRows(of: fixes.map(\.courier)), origin: matcher.origin)
        let moved = matcher.update(fixes: recorded.map { ($0.fix.courier, $0.available, $0.updatedAt, $0.fix.point, $0.fix.time) })
        for ((fix, active, _, _), moved) in zip(recorded, moved) {
            guard moved else { continue }
            applied += 1
            guard active > 0 else { continue }
            if publish {
                tracking.publishPosition(CourierLocation(courierId: fix.courier, lat: fix.point.lat, lon: fix.point.lon,
                                                         heading: fix.heading, speedMps: fix.speed, at: fix.time))
            }
            for id in try storage.pickedUp(c, courier: fix.courier) {
                guard let parcel = try storage.parcel(c, id, lock: true),
                      greatCircleMeters(parcel.pickup, fix.point) > ParcelLifecycle.departureMeters else { continue }
                _ = try parcels.apply(c, parcel, .depart, actor: .system, actorId: nil, place: fix.point)
            }
        }
        return applied
    }
}
