import Foundation
import Geo
import Models
import Postgres

struct CourierRecord: PostgresRecord {
    let userId: UUID
    let vehicle: String
    let capacity: Int
    let active: Int
    let online: Bool
    /// Whether an operator approved them (`Vetting`): only then may they go online and be offered parcels.
    let vetting: VettingStatus
    var position: GeoPoint?  // as of the last fold; `Matcher.latest` knows newer
    var fixAt: Date?
    let createdAt: Date
    let updatedAt: Date

    init(_ r: Row) throws {
        userId = try r["user_id"]; vehicle = try r["vehicle"]; capacity = try r["capacity"]; active = try r["active"]
        online = try r["online"]; vetting = try r["vetting"]
        fixAt = try r.decode("fix_at"); createdAt = try r["created_at"]; updatedAt = try r["updated_at"]
        position = try r.point()
    }

    /// The columns, from the couriers' table as `c` and their positions as `p`.
    static let columns: SQL = "\(courierColumns), p.lat, p.lon, p.fix_at"
    /// Those of `columns` in the couriers' table: what a statement writing it as `c` returns, to join with `p`.
    static let courierColumns: SQL = "c.user_id, c.vehicle, c.capacity, c.active, c.online, c.vetting, c.created_at, c.updated_at"
}

extension DispatchStorage {
    /// Couriers' rows with their positions (`courier_positions`), as `CourierRecord` reads them, from `couriers`: the
    /// table, or a CTE of the rows a statement wrote.
    private static func withPositions(_ couriers: String) -> SQL {
        "SELECT \(CourierRecord.columns) FROM \(unescaped: couriers) c JOIN dispatch.courier_positions p USING (user_id)"
    }

    /// Registers the courier, or changes their vehicle and capacity. An approved courier who changes vehicle is no
    /// longer vetted (the operators approved the vehicle they saw) and goes offline until they apply again.
    func registerCourier(_ c: Connection, user: UUID, vehicle: String, capacity: Int) throws -> CourierRecord {
        try c.one(CourierRecord.self, """
            WITH c AS (
                INSERT INTO dispatch.couriers AS c (user_id, vehicle, capacity) VALUES (\(user), \(vehicle), \(capacity))
                ON CONFLICT (user_id) DO UPDATE SET vehicle = EXCLUDED.vehicle,
                    capacity = GREATEST(EXCLUDED.capacity, c.active), updated_at = clock_timestamp(),
                    vetting = CASE WHEN c.vetting = 'approved' AND c.vehicle <> EXCLUDED.vehicle THEN 'unvetted' ELSE c.vetting END,
                    online = c.online AND NOT (c.vetting = 'approved' AND c.vehicle <> EXCLUDED.vehicle)
                RETURNING \(CourierRecord.courierColumns)),
            p AS (INSERT INTO dispatch.courier_positions (user_id) SELECT user_id FROM c ON CONFLICT DO NOTHING)
            SELECT \(CourierRecord.columns) FROM c LEFT JOIN dispatch.courier_positions p USING (user_id)
            """)!
    }

    /// `lock`: the courier's row stays locked until the transaction ends.
    func courier(_ c: Connection, _ user: UUID, lock: Bool = false) throws -> CourierRecord? {
        try c.one(CourierRecord.self, "\(Self.withPositions("dispatch.couriers")) WHERE user_id = \(user)\(unescaped: lock ? " FOR UPDATE OF c" : "")")
    }

    /// Takes the courier online (only an approved one) or offline; nil when that changed nothing (not a courier, or
    /// not approved).
    func setOnline(_ c: Connection, user: UUID, online: Bool) throws -> CourierRecord? {
        try c.one(CourierRecord.self, """
            WITH c AS (UPDATE dispatch.couriers c SET online = \(online), updated_at = clock_timestamp()
                       WHERE user_id = \(user) AND (vetting = 'approved' OR NOT \(online)::boolean)
                       RETURNING \(CourierRecord.courierColumns)) \(Self.withPositions("c"))
            """)
    }

    /// Creates or updates couriers that have no account of their own here (a fleet's, a load test's). In a transaction.
    /// The operator made them: those it creates are approved; one it updates stays as vetted, and online only if approved.
    func seedCouriers(_ c: Connection, _ couriers: [SeededCourier]) throws -> [CourierRecord] {
        // A seeding and a fold write the same positions, each in its own order: together they deadlocked (40P01,
        // some every time a fleet was seeded again while its fixes were folded). Seedings hold the fold's lock
        // shared: they run together, and wait for a fold in progress (as long as one may take), or it for them.
        try c.executeScript("""
            SET LOCAL lock_timeout = '60s'; SET LOCAL statement_timeout = '60s';
            SELECT pg_advisory_xact_lock_shared(\(Self.foldLock));
            SET LOCAL lock_timeout TO DEFAULT; SET LOCAL statement_timeout TO DEFAULT
            """)
        return try c.all(CourierRecord.self, """
            WITH s AS (SELECT id, vehicle, capacity, online, lat, lon
                       FROM unnest(\(PostgresArray(couriers.map(\.id)))::uuid[], \(PostgresArray(couriers.map(\.vehicle)))::text[],
                                   \(PostgresArray(couriers.map(\.capacity)))::int[], \(PostgresArray(couriers.map(\.online)))::bool[],
                                   \(PostgresArray(couriers.map(\.position?.lat)))::float8[],
                                   \(PostgresArray(couriers.map(\.position?.lon)))::float8[])
                           AS s (id, vehicle, capacity, online, lat, lon)),
            c AS (
                INSERT INTO dispatch.couriers AS c (user_id, vehicle, capacity, online, vetting)
                SELECT id, vehicle, capacity, online, 'approved' FROM s
                ON CONFLICT (user_id) DO UPDATE SET vehicle = EXCLUDED.vehicle, online = EXCLUDED.online AND c.vetting = 'approved',
                    capacity = GREATEST(EXCLUDED.capacity, c.active), updated_at = clock_timestamp()
                RETURNING \(CourierRecord.courierColumns)),
            p AS (
                INSERT INTO dispatch.courier_positions (user_id, lat, lon, fix_at)
                SELECT id, lat, lon, CASE WHEN lat IS NULL THEN NULL ELSE clock_timestamp() END FROM s
                ON CONFLICT (user_id) DO UPDATE SET lat = COALESCE(EXCLUDED.lat, dispatch.courier_positions.lat),
                    lon = COALESCE(EXCLUDED.lon, dispatch.courier_positions.lon),
                    fix_at = COALESCE(EXCLUDED.fix_at, dispatch.courier_positions.fix_at)
                RETURNING user_id, lat, lon, fix_at)
            SELECT \(CourierRecord.columns) FROM c JOIN p USING (user_id)
            """)
    }

    /// The operator's map: online couriers with a position (the latest fixes first) and the parcels waiting for a
    /// courier (the longest-waiting first), `limit` of each, and the database's time. A courier's row holds their fix
    /// as of the last fold; `latest` knows a newer one, and `newer(t)` every fix this instance knows newer than `t`:
    /// the couriers whose folded fix did not make the first `limit` but whose latest one would are read too.
    func fleet(_ c: Connection, limit: Int, latest: (UUID, Date?) -> (point: GeoPoint, at: Date)?,
               newer: (Date) -> [(id: UUID, point: GeoPoint, at: Date)])
        throws -> (couriers: [FleetCourierView], waiting: [ParcelRecord], at: Date) {
        let read = try c.rows(together: [
            """
            SELECT user_id, p.lat, p.lon, c.active, c.capacity, p.fix_at
            FROM dispatch.couriers c JOIN dispatch.courier_positions p USING (user_id)
            WHERE c.online AND c.vetting = 'approved' ORDER BY p.fix_at DESC NULLS LAST LIMIT \(limit)
            """,
            "SELECT \(ParcelRecord.columns) FROM dispatch.parcels WHERE status = 'awaiting_courier' ORDER BY updated_at LIMIT \(limit)",
            "SELECT now() AS at"])
        var couriers = try read[0].compactMap { row -> FleetCourierView? in
            let id: UUID = try row["user_id"]
            let stored: (point: GeoPoint?, at: Date?) = (try row.point(), try row.decode("fix_at"))
            let (position, fixAt) = latest(id, stored.at).map { ($0.point, $0.at) } ?? stored
            guard let position else { return nil }
            return FleetCourierView(id: id, position: position, active: try row["active"], capacity: try row["capacity"], fixAt: fixAt)
        }
        // Fewer rows than `limit`: every online courier is among them. Otherwise a courier left out has a folded fix
        // no newer than the last row's, and makes the map only with a newer fix not yet folded.
        if read[0].count == limit, let last = read[0].last {
            let shown = Set(couriers.map(\.id))  // (one left out had no position, and no fix here newer than nothing)
            let candidates = newer(try last.decode("fix_at") ?? .distantPast).filter { !shown.contains($0.id) }
            if !candidates.isEmpty {
                let positions = Dictionary(candidates.map { ($0.id, $0.point) }) { a, _ in a }
                couriers += try c.rows("""
                    SELECT user_id, m.at, c.active, c.capacity
                    FROM unnest(\(PostgresArray(candidates.map(\.id)))::uuid[], \(PostgresArray(candidates.map(\.at)))::timestamptz[])
                        AS m (user_id, at) JOIN dispatch.couriers c USING (user_id)
                    WHERE c.online AND c.vetting = 'approved' ORDER BY m.at DESC LIMIT \(limit)
                    """).compactMap { row in
                    let id: UUID = try row["user_id"]
                    return try positions[id].map {
                        FleetCourierView(id: id, position: $0, active: try row["active"], capacity: try row["capacity"], fixAt: try row["at"])
                    }
                }
            }
        }
        couriers.sort { $0.fixAt ?? .distantPast > $1.fixAt ?? .distantPast }
        return (Array(couriers.prefix(limit)), try read[1].map(ParcelRecord.init), try read[2].first!["at"])
    }

    /// A courier as the in-memory index needs them: whether they can take a parcel (online, approved, with room) as
    /// their row was at `updatedAt`, and their position as of their last fix.
    struct CourierState: PostgresRecord {
        let id: UUID
        let available: Bool
        let updatedAt: Date
        let position: GeoPoint?
        let fixAt: Date?

        /// The columns, from the couriers' table as `c` and their positions as `p`.
        static let columns: SQL = """
            c.user_id, c.online AND c.vetting = 'approved' AND c.active < c.capacity AS available, c.updated_at, p.lat, p.lon, p.fix_at
            """

        init(_ row: Row) throws {
            id = try row["user_id"]; available = try row["available"]; updatedAt = try row["updated_at"]
            position = try row.point(); fixAt = try row["fix_at"]
        }
    }

    /// The couriers whose rows changed after `since` (going online or off, taking or leaving a parcel; nil: those who
    /// can take a parcel now, for a first load, which stays small however many courier rows the table holds), with
    /// their positions. Fixes do not change these rows: they reach the index as notifications.
    ///
    /// Also where the next read must start, `nextSince`: the database's time before this read, or the start of the
    /// oldest transaction of this service's instances then open that has written (a row it changed becomes visible
    /// at its commit but carries the earlier time), whichever is earlier, and never more than `maxLookBack` back.
    /// Transactions of other programs are not waited for (an operator's session, another service's migration).
    func couriersChanged(_ c: Connection, since: Date?, maxLookBack: TimeInterval = 10)
        throws -> (couriers: [CourierState], readAt: Date, nextSince: Date) {
        let start = try c.first("""
            SELECT now() AS at, GREATEST(now() - make_interval(secs => \(maxLookBack)), LEAST(now(), (
                SELECT min(xact_start) FROM pg_stat_activity WHERE datname = current_database() AND backend_xid IS NOT NULL
                    AND application_name = current_setting('application_name')))) AS next_since
            """)!
        let select: SQL = "SELECT \(CourierState.columns) FROM dispatch.couriers c JOIN dispatch.courier_positions p USING (user_id)"
        let couriers = try since.map { try c.all(CourierState.self, "\(select) WHERE c.updated_at >= \($0) ORDER BY c.updated_at") }
            ?? c.all(CourierState.self, "\(select) WHERE c.online AND c.vetting = 'approved' AND c.active < c.capacity")
        return (couriers, try start["at"], try start["next_since"])
    }

    /// Those of `couriers` who have no row (erased).
    func withoutRows(_ c: Connection, _ couriers: [UUID]) throws -> [UUID] {
        try c.rows("""
            SELECT u AS id FROM unnest(\(PostgresArray(couriers))::uuid[]) u WHERE NOT EXISTS (SELECT 1 FROM dispatch.couriers WHERE user_id = u)
            """).map { try $0["id"] }
    }

    /// Whether the courier can take an offer now: online, approved, with spare capacity, and their row not held by another
    /// transaction (an accept or another offer in flight: they are passed over this round). Locks the row.
    func canBeOffered(_ c: Connection, courier: UUID) throws -> Bool {
        try c.first("""
            SELECT 1 AS ok FROM dispatch.couriers
            WHERE user_id = \(courier) AND online AND vetting = 'approved' AND active < capacity FOR UPDATE SKIP LOCKED
            """) != nil
    }

    func changeLoad(_ c: Connection, courier: UUID, by delta: Int) throws -> Bool {
        try c.execute("""
            UPDATE dispatch.couriers SET active = active + \(delta), updated_at = clock_timestamp()
            WHERE user_id = \(courier) AND active + \(delta) >= 0 AND active + \(delta) <= capacity
            """) == 1
    }
}
