import Foundation
import Geo
import Postgres

extension DispatchStorage {
    func centre(_ c: Connection, _ id: UUID) throws -> CentreRecord? {
        try c.first(Self.centreSQL, [id]).map(CentreRecord.init)
    }

    static let centreSQL = "SELECT * FROM dispatch.centres WHERE id = $1"

    func saveCentre(_ c: Connection, id: UUID, _ b: CentreBody) throws -> CentreRecord {
        let hours = String(decoding: try JSONEncoder().encode(b.openingHours), as: UTF8.self)
        return try CentreRecord(c.first("""
            INSERT INTO dispatch.centres (id, name, address, lat, lon, time_zone, opening_hours, accepts_drop_offs, accepts_collections)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
            ON CONFLICT (id) DO UPDATE SET name = $2, address = $3, lat = $4, lon = $5, time_zone = $6, opening_hours = $7,
                accepts_drop_offs = $8, accepts_collections = $9, updated_at = now()
            RETURNING *
            """, [id, b.name, b.address, b.lat, b.lon, b.timeZone, hours, b.acceptsDropOffs, b.acceptsCollections])!)
    }

    /// The `limit` centres nearest `point`, nearest first (`bench/centres.sh` measures it). The GiST index on
    /// `point(lon, lat)` finds the `limit` nearest in degrees; the farthest of those, in metres, bounds how far the
    /// true nearest can be (a degree of longitude is cos(lat) of one of latitude, so a circle of that distance over
    /// cos(lat), in degrees, holds them all), and only the centres in that circle are ranked.
    func nearestCentres(_ c: Connection, to point: GeoPoint, limit: Int) throws -> [CentreRecord] {
        try c.rows("""
            WITH first AS (SELECT lat, lon FROM dispatch.centres ORDER BY point(lon, lat) <-> point($2, $1) LIMIT $3),
                bound AS (SELECT max(sqrt((lat - $1) ^ 2 + ((lon - $2) * cos(radians($1))) ^ 2)) / greatest(cos(radians($1)), 0.001)
                                 * 1.000001 + 1e-9 AS r
                          FROM first)
            SELECT c.* FROM dispatch.centres c, bound WHERE point(c.lon, c.lat) <@ circle(point($2, $1), bound.r)
            ORDER BY (c.lat - $1) ^ 2 + ((c.lon - $2) * cos(radians($1))) ^ 2, c.id LIMIT $3
            """, [point.lat, point.lon, limit]).map(CentreRecord.init)
    }

    func isStaff(_ c: Connection, centre: UUID, user: UUID) throws -> Bool {
        try c.first("SELECT 1 AS one FROM dispatch.centre_staff WHERE centre_id = $1 AND user_id = $2", [centre, user]) != nil
    }

    func setStaff(_ c: Connection, centre: UUID, user: UUID, _ on: Bool) throws {
        try c.execute(on ? "INSERT INTO dispatch.centre_staff (centre_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING"
                         : "DELETE FROM dispatch.centre_staff WHERE centre_id = $1 AND user_id = $2", [centre, user])
    }
}
