import Foundation
import Geo
import Postgres

/// A reception centre.
struct CentreRecord: PostgresRecord, Sendable {
    let id: UUID
    let name: String
    let address: String
    let point: GeoPoint
    let hours: OpeningHours
    let acceptsDropOffs: Bool
    let acceptsCollections: Bool
    let createdAt: Date
    let updatedAt: Date

    init(_ r: Row) throws {
        id = try r["id"]; name = try r["name"]; address = try r["address"]
        point = GeoPoint(lat: try r["lat"], lon: try r["lon"])
        let spans = (try? JSONDecoder().decode([OpeningHours.Span].self, from: Data((try r["opening_hours"] as String).utf8))) ?? []
        hours = OpeningHours(spans: spans, zone: TimeZone(identifier: try r["time_zone"]) ?? TimeZone(identifier: "UTC")!)
        acceptsDropOffs = try r["accepts_drop_offs"]; acceptsCollections = try r["accepts_collections"]
        createdAt = try r["created_at"]; updatedAt = try r["updated_at"]
    }

    static let columns: SQL = "id, name, address, lat, lon, time_zone, opening_hours, accepts_drop_offs, accepts_collections, created_at, updated_at"
}

extension DispatchStorage {
    func centre(_ c: Connection, _ id: UUID) throws -> CentreRecord? {
        try c.one(CentreRecord.self, Self.centreSQL(id))
    }

    static func centreSQL(_ id: UUID) -> SQL {
        "SELECT \(CentreRecord.columns) FROM dispatch.centres WHERE id = \(id)"
    }

    func saveCentre(_ c: Connection, id: UUID, _ centre: CentreDescription) throws -> CentreRecord {
        let hours = String(decoding: try JSONEncoder().encode(centre.openingHours), as: UTF8.self)
        return try c.one(CentreRecord.self, """
            INSERT INTO dispatch.centres (id, name, address, lat, lon, time_zone, opening_hours, accepts_drop_offs, accepts_collections)
            VALUES (\(id), \(centre.name), \(centre.address), \(centre.point.lat), \(centre.point.lon), \(centre.timeZone), \(hours),
                \(centre.acceptsDropOffs), \(centre.acceptsCollections))
            ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, address = EXCLUDED.address, lat = EXCLUDED.lat, lon = EXCLUDED.lon,
                time_zone = EXCLUDED.time_zone, opening_hours = EXCLUDED.opening_hours, accepts_drop_offs = EXCLUDED.accepts_drop_offs,
                accepts_collections = EXCLUDED.accepts_collections, updated_at = now()
            RETURNING \(CentreRecord.columns)
            """)!
    }

    /// The `limit` centres nearest `point`, nearest first (`bench/centres.sh` measures it). The GiST index on
    /// `point(lon, lat)` finds the `limit` nearest in degrees; the farthest of those, in metres, bounds how far the
    /// true nearest can be (a degree of longitude is cos(lat) of one of latitude, so a circle of that distance over
    /// cos(lat), in degrees, holds them all), and only the centres in that circle are ranked.
    func nearestCentres(_ c: Connection, to point: GeoPoint, limit: Int) throws -> [CentreRecord] {
        let (lat, lon) = (point.lat, point.lon)
        return try c.all(CentreRecord.self, """
            WITH first AS (SELECT lat, lon FROM dispatch.centres ORDER BY point(lon, lat) <-> point(\(lon), \(lat)) LIMIT \(limit)),
                bound AS (SELECT max(sqrt((lat - \(lat)) ^ 2 + ((lon - \(lon)) * cos(radians(\(lat)))) ^ 2)) / greatest(cos(radians(\(lat))), 0.001)
                                 * 1.000001 + 1e-9 AS r
                          FROM first)
            SELECT \(CentreRecord.columns) FROM dispatch.centres c, bound WHERE point(c.lon, c.lat) <@ circle(point(\(lon), \(lat)), bound.r)
            ORDER BY (c.lat - \(lat)) ^ 2 + ((c.lon - \(lon)) * cos(radians(\(lat)))) ^ 2, c.id LIMIT \(limit)
            """)
    }

    func isStaff(_ c: Connection, centre: UUID, user: UUID) throws -> Bool {
        try c.first("SELECT 1 AS one FROM dispatch.centre_staff WHERE centre_id = \(centre) AND user_id = \(user)") != nil
    }

    func setStaff(_ c: Connection, centre: UUID, user: UUID, _ on: Bool) throws {
        try c.execute(on ? "INSERT INTO dispatch.centre_staff (centre_id, user_id) VALUES (\(centre), \(user)) ON CONFLICT DO NOTHING"
                         : "DELETE FROM dispatch.centre_staff WHERE centre_id = \(centre) AND user_id = \(user)")
    }
}
