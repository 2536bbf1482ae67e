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
    /// many fixes were applied: of registered couriers, newer than their last one this instance knows.
    @discardableResult
    func record(_ c: Connection, _ fixes: [Fix], publish: Bool = true) throws -> Int {
        // Every fix is stored (folding keeps the newest); one older than what this instance knows changes nothing
        // here. Stored even so: what is known may come from a transaction that then rolled back.
        var applied = 0
        let fixes = Fix.newestPerCourier(fixes)
        let recorded = try storage.recordFixes(c, fixes, known: matcher.knowsRows(of: fixes.map(\.courier)), origin: matcher.origin)
        let moved = matcher.update(fixes: recorded.map { ($0.fix.courier, $0.available, $0.updatedAt, $0.fix.point, $0.fix.time) })
        for ((fix, active, _, _), moved) in zip(recorded, moved) {
            guard moved else { continue }
            applied += 1
            guard active > 0 else { continue }
            if publish {
                tracking.publishPosition(CourierLocation(courierId: fix.courier.lowercased, lat: fix.point.lat, lon: fix.point.lon,
                                                         heading: fix.heading, speedMps: fix.speed, at: Timestamp.format(fix.time)))
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
