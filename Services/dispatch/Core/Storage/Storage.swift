import Events
import Features
import Foundation
import Geo
import Models
import Postgres

/// A parcel row.
struct ParcelRecord {
    let id: UUID
    let senderId: UUID
    var recipientUserId: UUID?
    let recipientName: String
    let recipientUsername: String?
    let recipientEmail: String?
    let recipientPhone: String?
    /// The code the sender passes on while nobody is the recipient yet (stored normalised).
    var claimCode: String?
    /// The recipient's proof at the door, and how many wrong ones a courier entered.
    let deliveryPin: String
    var pinFailures: Int
    let pickup: GeoPoint
    let pickupAddress: String
    let dropoff: GeoPoint
    let dropoffAddress: String
    let service: ParcelService
    let paymentMethod: String
    let insured: Bool
    let description: String?
    let documentPhotoMediaId: UUID
    var deliveryPhotoMediaId: UUID?
    var receiptPhotoMediaId: UUID?
    /// The photos' sizes and placeholders, where the query read them (`photoMetaSQL`; `ImageView`).
    var photoMeta: [UUID: ImageMeta] = [:]
    var failureReason: String?
    let quote: Quote
    var status: ParcelStatus
    var courierId: UUID?
    var offeredTo: UUID?
    var offerExpiresAt: Date?
    /// The centre the sender brings it to, the one its recipient collects it from, and the code shown there.
    let dropOffCentreId: UUID?
    let collectionCentreId: UUID?
    let centreCode: String?
    /// Loyalty points taken off its price (`quote.amountMinor` is what is paid).
    let pointsSpent: Int
    let createdAt: Date
    var updatedAt: Date

    init(_ r: Row) throws {
        id = try r["id"]; senderId = try r["sender_id"]; recipientUserId = try r.decode("recipient_user_id")
        recipientName = try r["recipient_name"]; recipientPhone = try r.decode("recipient_phone")
        recipientUsername = try r.decode("recipient_username"); recipientEmail = try r.decode("recipient_email")
        claimCode = try r.decode("claim_code"); deliveryPin = try r["delivery_pin"]; pinFailures = try r["pin_failures"]
        pickup = GeoPoint(lat: try r["pickup_lat"], lon: try r["pickup_lon"]); pickupAddress = try r["pickup_address"]
        dropoff = GeoPoint(lat: try r["dropoff_lat"], lon: try r["dropoff_lon"]); dropoffAddress = try r["dropoff_address"]
        service = ParcelService(rawValue: try r["service"]) ?? .standard; paymentMethod = try r["payment_method"]
        insured = try r["insured"]; description = try r.decode("description"); documentPhotoMediaId = try r["document_photo_media_id"]
        deliveryPhotoMediaId = try r.decode("delivery_photo_media_id"); receiptPhotoMediaId = try r.decode("receipt_photo_media_id")
        photoMeta = ImageMeta.parse((try? r.decode("photo_meta", as: String.self)) ?? nil)
        failureReason = try r.decode("failure_reason")
        quote = Quote(currency: try r["currency"], amountMinor: try r["amount_minor"], etaSeconds: try r["eta_seconds"],
                      distanceMeters: try r["distance_m"])
        status = ParcelStatus(rawValue: try r["status"]) ?? .failed
        courierId = try r.decode("courier_id"); offeredTo = try r.decode("offered_to"); offerExpiresAt = try r.decode("offer_expires_at")
        dropOffCentreId = try r.decode("drop_off_centre_id"); collectionCentreId = try r.decode("collection_centre_id")
        centreCode = try r.decode("centre_code"); pointsSpent = try r["points_spent"]
        createdAt = try r["created_at"]; updatedAt = try r["updated_at"]
    }

    /// The column of the photos' meta, for a query that shows the parcel (`SELECT *, \(photoMetaSQL) FROM dispatch.parcels`).
    static let photoMetaSQL = ImageMeta.sql(ids: "ARRAY[document_photo_media_id, delivery_photo_media_id, receipt_photo_media_id]",
                                            schema: "dispatch") + " AS photo_meta"

    /// Whether `user` takes part in the parcel (and so may see it).
    func involves(_ user: UUID) -> Bool {
        user == senderId || user == recipientUserId || user == courierId || (status == .offered && user == offeredTo)
    }
}

/// What dispatch knows of a person from auth's events.
struct ProfileRecord {
    let username: String
    let fullName: String
    let avatar: UUID?
    let picture: String?
    let phone: String?

    init(_ r: Row) throws {
        username = try r["username"]; fullName = try r["full_name"]; avatar = try r.decode("avatar_media_id")
        picture = try r.decode("picture_url"); phone = try r.decode("phone")
    }
}

struct HistoryEntry {
    let at: Date
    let from: String?
    let to: String
    let actor: String
    let actorId: UUID?
    let place: GeoPoint?

    init(_ r: Row) throws {
        at = try r["at"]; from = try r.decode("from_status"); to = try r["to_status"]; actor = try r["actor"]
        actorId = try r.decode("actor_id")
        place = try r.point()
    }
}

struct CourierRecord {
    let userId: UUID
    let vehicle: String
    let capacity: Int
    let active: Int
    let online: Bool
    var position: GeoPoint?  // as of the last fold; `Matcher.latest` knows newer
    var fixAt: Date?
    let createdAt: Date
    let updatedAt: Date

    init(_ r: Row) throws {
        userId = try r["user_id"]; vehicle = try r["vehicle"]; capacity = try r["capacity"]; active = try r["active"]
        online = try r["online"]; fixAt = try r.decode("fix_at"); createdAt = try r["created_at"]; updatedAt = try r["updated_at"]
        position = try r.point()
    }
}

extension Row {
    /// The place in the `lat` and `lon` columns; nil when either is null.
    func point() throws -> GeoPoint? {
        let lat: Double? = try decode("lat"), lon: Double? = try decode("lon")
        return lat.flatMap { la in lon.map { GeoPoint(lat: la, lon: $0) } }
    }
}

/// The dispatch schema's SQL.
struct DispatchStorage {
    // MARK: Couriers

    /// Couriers' rows with their positions (`courier_positions`), as `CourierRecord` reads them, from `couriers`: the
    /// table, or a CTE of the rows a statement wrote.
    private static func withPositions(_ couriers: String) -> String {
        "SELECT c.*, p.lat, p.lon, p.fix_at FROM \(couriers) c JOIN dispatch.courier_positions p USING (user_id)"
    }

    func registerCourier(_ c: Connection, user: UUID, vehicle: String, capacity: Int) throws -> CourierRecord {
        try CourierRecord(c.first("""
            WITH c AS (
                INSERT INTO dispatch.couriers (user_id, vehicle, capacity) VALUES ($1, $2, $3)
                ON CONFLICT (user_id) DO UPDATE SET vehicle = EXCLUDED.vehicle,
                    capacity = GREATEST(EXCLUDED.capacity, dispatch.couriers.active), updated_at = clock_timestamp()
                RETURNING *),
            p AS (INSERT INTO dispatch.courier_positions (user_id) SELECT user_id FROM c ON CONFLICT DO NOTHING)
            SELECT c.*, p.lat, p.lon, p.fix_at FROM c LEFT JOIN dispatch.courier_positions p USING (user_id)
            """, [user, vehicle, capacity])!)
    }

    func courier(_ c: Connection, _ user: UUID) throws -> CourierRecord? {
        try c.first(Self.withPositions("dispatch.couriers") + " WHERE user_id = $1", [user]).map(CourierRecord.init)
    }

    func setOnline(_ c: Connection, user: UUID, online: Bool) throws -> CourierRecord? {
        try c.first("WITH c AS (UPDATE dispatch.couriers SET online = $2, updated_at = clock_timestamp() WHERE user_id = $1 RETURNING *) "
                    + Self.withPositions("c"), [user, online]).map(CourierRecord.init)
    }

    /// The channel on which fixes are announced to every instance's matching index, at their commits.
    static let positionsChannel = "dispatch_positions"
    /// The channel on which erased couriers are announced (their ids), at the erasure's commit: a deleted row is not
    /// one the refresh reads as changed, so without it every instance's index would keep them until restarted.
    static let erasedChannel = "dispatch_couriers_erased"

    /// Appends fixes (at most one per courier) as one row of `fix_batches` unless none is of a courier registered here,
    /// and announces those that are on `positionsChannel` as `origin`'s; returns them with their couriers: how many
    /// parcels they carry, and whether they could take another (online, with room) as of when their row last changed.
    /// `known` says, for each fix, whether the matching index read its courier's row: a courier it did not is looked
    /// up by key; of the others only those carrying parcels are read, through the index of them alone, and the rest
    /// carry none and come back without a row (`available` nil). Finding each of a fleet's thousand couriers by key
    /// cost PostgreSQL 3 ms a batch, reading the carriers among them 0.6. The couriers' rows are only read; the fixes
    /// reach `courier_positions` when `foldFixes` folds them.
    func recordFixes(_ c: Connection, _ fixes: [Fix], known: [Bool], origin: UUID) throws
        -> [(fix: Fix, active: Int, available: Bool?, updatedAt: Date)] {
        let unknown = fixes.indices.filter { !known[$0] }
        // Rows name their fix by its place in the batch (`i`, from 1): a small number to read, where a courier's id
        // would be parsed from text and looked up.
        let rows = try c.rows("""
            WITH c AS (SELECT u.i, active, online AND active < capacity AS available, updated_at
                       FROM unnest($1::uuid[]) WITH ORDINALITY AS u (id, i) JOIN dispatch.couriers ON user_id = u.id AND active > 0
                       UNION ALL
                       SELECT u.i, active, online AND active < capacity, updated_at
                       FROM unnest($7::uuid[], $8::int8[]) AS u (id, i) JOIN dispatch.couriers ON user_id = u.id AND active = 0),
            b AS (INSERT INTO dispatch.fix_batches (couriers, lat, lon, heading, speed_mps, fix_at)
                  SELECT $1::uuid[], $2::float8[], $3::float8[], $4::float8[], $5::float8[], $6::timestamptz[]
                  WHERE $9 OR EXISTS (SELECT 1 FROM c))
            SELECT * FROM c
            """, [PostgresArray(fixes.map(\.courier)), PostgresArray(fixes.map(\.point.lat)), PostgresArray(fixes.map(\.point.lon)),
                  PostgresArray(fixes.map(\.heading)), PostgresArray(fixes.map(\.speed)), PostgresArray(fixes.map(\.time)),
                  PostgresArray(unknown.map { fixes[$0].courier }), PostgresArray(unknown.map { $0 + 1 }), known.contains(true)])
        var read = [Int: (active: Int, available: Bool, updatedAt: Date)]()
        for row in rows {
            let i: Int = try row["i"]
            guard fixes.indices.contains(i - 1) else { continue }
            read[i - 1] = (try row["active"], try row["available"], try row["updated_at"])
        }
        let applied = fixes.indices.compactMap { i -> (fix: Fix, active: Int, available: Bool?, updatedAt: Date)? in
            if let r = read[i] { return (fixes[i], r.active, r.available, r.updatedAt) }
            return known[i] ? (fixes[i], 0, nil, .distantPast) : nil
        }
        let payloads = PositionNotice.payloads(applied.map(\.fix), origin: origin)
        if !payloads.isEmpty {
            // Delivered at the commit whenever it is sent: with the commit, it costs no round trip of its own.
            try c.enqueue("SELECT pg_notify($1, p) FROM unnest($2::text[]) p", [Self.positionsChannel, PostgresArray(texts: payloads)])
        }
        return applied
    }

    /// The advisory lock a fold holds (and a seeding shares: `seedCouriers`).
    static let foldLock = "hashtext('dispatch.fix_batches')"

    /// The most batches one fold takes: a courier's fixes coalesce only within one.
    static let foldLimit = 1000

    /// Folds the oldest appended batches (at most `foldLimit`) into `courier_positions`, the newest fix of each
    /// courier unless their row holds a newer one, and deletes them; returns how many it folded. In a transaction:
    /// one instance folds at a time, and another's fold is waited for (`wait`) or left to it (0). A batch is deleted
    /// in the transaction that folds it, so a fold cut short leaves it for the next.
    func foldFixes(_ c: Connection, wait: Bool = false) throws -> Int {
        // A fold of many rows outlasts a request's bounds, and so may the wait for another instance's; the newest fix
        // of each courier is found by sorting in memory.
        try c.executeScript("SET LOCAL statement_timeout = '60s'; SET LOCAL lock_timeout = '60s'; SET LOCAL work_mem = '64MB'")
        if wait {
            try c.execute("SELECT pg_advisory_xact_lock(\(Self.foldLock))")
        } else {
            guard try c.first("SELECT pg_try_advisory_xact_lock(\(Self.foldLock)) AS locked")?["locked"] == true else { return 0 }
        }
        return try c.first("""
            WITH b AS (DELETE FROM dispatch.fix_batches WHERE id IN (SELECT id FROM dispatch.fix_batches ORDER BY id LIMIT $1)
                       RETURNING *),
            f AS (SELECT DISTINCT ON (u.id) u.* FROM b, unnest(b.couriers, b.lat, b.lon, b.heading, b.speed_mps, b.fix_at)
                      AS u (id, lat, lon, heading, speed, at)
                  ORDER BY u.id, u.at DESC),
            moved AS (UPDATE dispatch.courier_positions p SET lat = f.lat, lon = f.lon, heading = f.heading, speed_mps = f.speed,
                          fix_at = f.at
                      FROM f WHERE p.user_id = f.id AND (p.fix_at IS NULL OR p.fix_at < f.at))
            SELECT count(*)::int AS n FROM b
            """, [Self.foldLimit])?["n"] ?? 0
    }

    /// Folds every batch appended so far, `foldLimit` a transaction.
    func foldFixes(_ pool: Pool, wait: Bool = false) throws {
        while try pool.withTransaction({ try foldFixes($0, wait: wait) }) == Self.foldLimit {}
    }

    /// Creates or updates couriers that have no account of their own here (a fleet's, a load test's). In a transaction.
    func seedCouriers(_ c: Connection, _ couriers: [SeededCourier]) throws -> [CourierRecord] {
        // A seeding and a fold write the same positions, each in its own order: together they deadlocked (40P01,
        // some every time a fleet was seeded again while its fixes were folded). Seedings hold the fold's lock
        // shared: they run together, and wait for a fold in progress (as long as one may take), or it for them.
        try c.executeScript("""
            SET LOCAL lock_timeout = '60s'; SET LOCAL statement_timeout = '60s';
            SELECT pg_advisory_xact_lock_shared(\(Self.foldLock));
            SET LOCAL lock_timeout TO DEFAULT; SET LOCAL statement_timeout TO DEFAULT
            """)
        return try c.rows("""
            WITH s AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::int[], $4::bool[], $5::float8[], $6::float8[])
                           AS s (id, vehicle, capacity, online, lat, lon)),
            c AS (
                INSERT INTO dispatch.couriers (user_id, vehicle, capacity, online) SELECT id, vehicle, capacity, online FROM s
                ON CONFLICT (user_id) DO UPDATE SET vehicle = EXCLUDED.vehicle, online = EXCLUDED.online,
                    capacity = GREATEST(EXCLUDED.capacity, dispatch.couriers.active), updated_at = clock_timestamp()
                RETURNING *),
            p AS (
                INSERT INTO dispatch.courier_positions (user_id, lat, lon, fix_at)
                SELECT id, lat, lon, CASE WHEN lat IS NULL THEN NULL ELSE clock_timestamp() END FROM s
                ON CONFLICT (user_id) DO UPDATE SET lat = COALESCE(EXCLUDED.lat, dispatch.courier_positions.lat),
                    lon = COALESCE(EXCLUDED.lon, dispatch.courier_positions.lon),
                    fix_at = COALESCE(EXCLUDED.fix_at, dispatch.courier_positions.fix_at)
                RETURNING *)
            SELECT c.*, p.lat, p.lon, p.fix_at FROM c JOIN p USING (user_id)
            """, [PostgresArray(couriers.map(\.id)), PostgresArray(couriers.map(\.vehicle)), PostgresArray(couriers.map(\.capacity)),
                  PostgresArray(couriers.map(\.online)), PostgresArray(couriers.map(\.position?.lat)),
                  PostgresArray(couriers.map(\.position?.lon))]).map(CourierRecord.init)
    }

    /// The operator's map: online couriers with a position (the latest fixes first) and the parcels waiting for a
    /// courier (the longest-waiting first), `limit` of each, and the database's time. A courier's row holds their fix
    /// as of the last fold; `latest` knows a newer one, and `newer(t)` every fix this instance knows newer than `t`:
    /// the couriers whose folded fix did not make the first `limit` but whose latest one would are read too.
    func fleet(_ c: Connection, limit: Int, latest: (UUID, Date?) -> (point: GeoPoint, at: Date)?,
               newer: (Date) -> [(id: UUID, point: GeoPoint, at: Date)])
        throws -> (couriers: [FleetCourierView], waiting: [ParcelRecord], at: Date) {
        let read = try c.rows(together: [
            ("""
             SELECT user_id, p.lat, p.lon, c.active, c.capacity, p.fix_at
             FROM dispatch.couriers c JOIN dispatch.courier_positions p USING (user_id)
             WHERE c.online ORDER BY p.fix_at DESC NULLS LAST LIMIT $1
             """, [limit]),
            ("SELECT * FROM dispatch.parcels WHERE status = 'awaiting_courier' ORDER BY updated_at LIMIT $1", [limit]),
            ("SELECT now() AS at", [])])
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
                    FROM unnest($1::uuid[], $2::timestamptz[]) AS m (user_id, at) JOIN dispatch.couriers c USING (user_id)
                    WHERE c.online ORDER BY m.at DESC LIMIT $3
                    """, [PostgresArray(candidates.map(\.id)), PostgresArray(candidates.map(\.at)), limit]).compactMap { row in
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

    /// Offers open now, the oldest first.
    func openOffers(_ c: Connection, limit: Int) throws -> [ParcelRecord] {
        try c.rows("SELECT * FROM dispatch.parcels WHERE status = 'offered' ORDER BY offer_expires_at LIMIT $1", [limit])
            .map(ParcelRecord.init)
    }

    /// A courier as the in-memory index needs them: whether they can take a parcel as their row was at `updatedAt`,
    /// and their position as of their last fix.
    struct CourierState {
        let id: UUID
        let available: Bool
        let updatedAt: Date
        let position: GeoPoint?
        let fixAt: Date?
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
            SELECT now() AS at, GREATEST(now() - make_interval(secs => $1), LEAST(now(), (
                SELECT min(xact_start) FROM pg_stat_activity WHERE datname = current_database() AND backend_xid IS NOT NULL
                    AND application_name = current_setting('application_name')))) AS next_since
            """, [maxLookBack])!
        let select = """
            SELECT user_id, c.online AND c.active < c.capacity AS available, c.updated_at, p.lat, p.lon, p.fix_at
            FROM dispatch.couriers c JOIN dispatch.courier_positions p USING (user_id)
            """
        let rows = try since.map { try c.rows("\(select) WHERE c.updated_at >= $1 ORDER BY c.updated_at", [$0]) }
            ?? c.rows("\(unescaped: select) WHERE c.online AND c.active < c.capacity")
        let couriers = try rows.map { row in
            CourierState(id: try row["user_id"], available: try row["available"], updatedAt: try row["updated_at"],
                         position: try row.point(), fixAt: try row.decode("fix_at"))
        }
        return (couriers, try start["at"], try start["next_since"])
    }

    /// Those of `couriers` who have no row (erased).
    func withoutRows(_ c: Connection, _ couriers: [UUID]) throws -> [UUID] {
        try c.rows("SELECT u AS id FROM unnest($1::uuid[]) u WHERE NOT EXISTS (SELECT 1 FROM dispatch.couriers WHERE user_id = u)",
                   [PostgresArray(couriers)]).map { try $0["id"] }
    }

    /// Whether the courier can take an offer now: online, with spare capacity, and their row not held by another
    /// transaction (an accept or another offer in flight: they are passed over this round). Locks the row.
    func canBeOffered(_ c: Connection, courier: UUID) throws -> Bool {
        try c.first("""
            SELECT 1 AS ok FROM dispatch.couriers WHERE user_id = $1 AND online AND active < capacity FOR UPDATE SKIP LOCKED
            """, [courier]) != nil
    }

    func changeLoad(_ c: Connection, courier: UUID, by delta: Int) throws -> Bool {
        try c.execute("""
            UPDATE dispatch.couriers SET active = active + $2, updated_at = clock_timestamp()
            WHERE user_id = $1 AND active + $2 >= 0 AND active + $2 <= capacity
            """, [courier, delta]) == 1
    }

    // MARK: Parcels

    func insertParcel(_ c: Connection, id: UUID, sender: UUID, body: CreateParcelBody, route: Itinerary, recipientUserId: UUID?,
                      claimCode: String?, pin: String, quote: Quote, pointsSpent: Int, status: ParcelStatus) throws -> ParcelRecord {
        let r = body.recipient
        return try ParcelRecord(c.first("""
            INSERT INTO dispatch.parcels (id, sender_id, recipient_user_id, recipient_name, recipient_phone, recipient_username,
                recipient_email, claim_code, delivery_pin,
                pickup_lat, pickup_lon, pickup_address, dropoff_lat, dropoff_lon, dropoff_address, service, payment_method,
                insured, description, document_photo_media_id, amount_minor, currency, eta_seconds, distance_m, status,
                drop_off_centre_id, collection_centre_id, centre_code, points_spent)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25,
                $26, $27, $28, $29)
            RETURNING *, \(ParcelRecord.photoMetaSQL)
            """, [id, sender, recipientUserId, r.name, r.phone, r.username, r.email, claimCode, pin, route.pickup.lat, route.pickup.lon,
                  route.pickupAddress, route.dropoff.lat, route.dropoff.lon, route.dropoffAddress, body.service.rawValue, body.paymentMethod,
                  body.insured ?? false, body.description, body.documentPhotoMediaId, quote.amountMinor, quote.currency, quote.etaSeconds,
                  quote.distanceMeters, status.rawValue, route.dropOffCentre?.id, route.collectionCentre?.id,
                  route.dropOffCentre != nil || route.collectionCentre != nil ? InviteCode.generate() : nil, pointsSpent])!)
    }

    func parcel(_ c: Connection, centreCode: String, lock: Bool) throws -> ParcelRecord? {
        try c.first("SELECT * FROM dispatch.parcels WHERE centre_code = $1\(lock ? " FOR UPDATE" : "")", [centreCode]).map(ParcelRecord.init)
    }

    // MARK: Centres

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

    /// The account with `username` (case-insensitive) as auth's events told it; nil when dispatch knows nobody by it.
    func userId(_ c: Connection, username: String) throws -> UUID? {
        try c.first("SELECT user_id FROM dispatch.profiles WHERE lower(username) = lower($1) ORDER BY updated_at DESC LIMIT 1",
                    [username])?["user_id"]
    }

    /// A person's name and avatar as auth's events told them.
    func profile(_ c: Connection, _ user: UUID) throws -> ProfileRecord? {
        try c.first("SELECT username, full_name, avatar_media_id, picture_url, phone FROM dispatch.profiles WHERE user_id = $1", [user])
            .map(ProfileRecord.init)
    }

    /// Records how to reach a person from a `user.registered` or `user.updated`, when that event is the newest of the
    /// user's (`Profiles.apply` kept it): their phone number (a number removed is removed here too), and their e-mail
    /// address with whether they proved it.
    func recordContact(_ c: Connection, _ event: ReceivedEvent) throws {
        let (id, email, verified, phone, time): (String, String, Bool?, String?, String)
        if event.type == UserUpdated.type, let u = try? event.decode(UserUpdated.self) {
            (id, email, verified, phone, time) = (u.userId, u.email, u.emailVerified, u.phone, u.updatedAt)
        } else if event.type == UserRegistered.type, let u = try? event.decode(UserRegistered.self) {
            (id, email, verified, phone, time) = (u.userId, u.email, u.emailVerified, nil, u.createdAt)
        } else { return }
        guard let user = UUID(uuidString: id), let at = Timestamp.parse(time) else { return }
        try c.execute("""
            UPDATE dispatch.profiles SET phone = $2, email = $3, email_verified = $4 WHERE user_id = $1 AND updated_at = $5
            """, [user, phone, email, verified ?? false, at])
    }

    /// The account that proved `email` (case-insensitive), as auth's events told it; nil when none did.
    func userId(_ c: Connection, verifiedEmail email: String) throws -> UUID? {
        try c.first("""
            SELECT user_id FROM dispatch.profiles WHERE lower(email) = lower($1) AND email_verified ORDER BY updated_at DESC LIMIT 1
            """, [email])?["user_id"]
    }

    /// The parcel that claim code `code` (normalised) names, locked.
    func parcel(_ c: Connection, claimCode code: String) throws -> ParcelRecord? {
        try c.first("SELECT * FROM dispatch.parcels WHERE claim_code = $1 FOR UPDATE", [code]).map(ParcelRecord.init)
    }

    /// One more wrong PIN for a parcel; how many there have been.
    func countWrongPin(_ c: Connection, _ id: UUID) throws -> Int {
        try c.first("UPDATE dispatch.parcels SET pin_failures = pin_failures + 1 WHERE id = $1 RETURNING pin_failures", [id])!["pin_failures"]
    }

    /// Image `id` if `reader` uploaded it or it is a photo of a parcel that is theirs (its sender, recipient or
    /// courier: not a courier only offered it, who sees no document until they accept).
    func visibleMedia(_ c: Connection, _ id: UUID, reader: UUID) throws -> MediaRecord? {
        try c.first("""
            SELECT \(MediaRecord.columns) FROM dispatch.media m WHERE m.id = $1 AND (
                m.owner_id = $2
                OR EXISTS (SELECT 1 FROM dispatch.parcels p  -- the reader's parcels, each by its own index
                           WHERE (p.sender_id = $2 OR p.recipient_user_id = $2 OR p.courier_id = $2)
                             AND m.id IN (p.document_photo_media_id, p.delivery_photo_media_id, p.receipt_photo_media_id)))
            """, [id, reader]).map(MediaRecord.init)
    }

    func parcel(_ c: Connection, _ id: UUID, lock: Bool = false, skipLocked: Bool = false) throws -> ParcelRecord? {
        let suffix = lock ? (skipLocked ? " FOR UPDATE SKIP LOCKED" : " FOR UPDATE") : ""
        // A read to show the parcel carries its photos' meta; one to change it does not need them.
        return try c.first("SELECT *\(lock ? "" : ", " + ParcelRecord.photoMetaSQL) FROM dispatch.parcels WHERE id = $1\(suffix)", [id])
            .map(ParcelRecord.init)
    }

    func save(_ c: Connection, _ p: ParcelRecord) throws {
        let update = Self.update(p, from: 1)
        try c.execute(update.sql, update.parameters)
    }

    /// The statement that writes `p`'s changeable columns, its parameters bound from `$n` on.
    private static func update(_ p: ParcelRecord, from n: Int) -> (sql: String, parameters: [(any PostgresEncodable)?]) {
        ("""
         UPDATE dispatch.parcels SET status = $\(n + 1), courier_id = $\(n + 2), offered_to = $\(n + 3), offer_expires_at = $\(n + 4),
             delivery_photo_media_id = $\(n + 5), receipt_photo_media_id = $\(n + 6), failure_reason = $\(n + 7),
             recipient_user_id = $\(n + 8), claim_code = $\(n + 9), updated_at = now()
         WHERE id = $\(n)
         """, [p.id, p.status.rawValue, p.courierId, p.offeredTo, p.offerExpiresAt, p.deliveryPhotoMediaId, p.receiptPhotoMediaId,
               p.failureReason, p.recipientUserId, p.claimCode])
    }

    /// A parcel's move, in one statement: its history entry (`at`), its event, and its row as `saving` now is (none
    /// for a parcel just inserted).
    func record(_ c: Connection, parcel: UUID, saving p: ParcelRecord?, from: ParcelStatus?, to: ParcelStatus,
                actor: ParcelActor, actorId: UUID?, place: GeoPoint?, at: Date, event: OutboxRow) throws {
        let history: [(any PostgresEncodable)?] = [parcel, from?.rawValue, to.rawValue, actor.rawValue, actorId, place?.lat, place?.lon, at]
        let update = p.map { Self.update($0, from: history.count + event.parameters.count + 1) }
        try c.enqueue("""
            WITH history AS (INSERT INTO dispatch.parcel_history (parcel_id, from_status, to_status, actor, actor_id, lat, lon, at)
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8))\(update.map { ", parcel AS (\($0.sql))" } ?? "")
            INSERT INTO dispatch.outbox (event_id, topic, key, payload) VALUES \(OutboxRow.values(from: history.count + 1))
            """, history + event.parameters + (update?.parameters ?? []))
    }

    /// What a parcel's view shows besides its row, read in one round trip: its history; its courier with their
    /// profile (nil before dispatch heard of them from auth), when it has one; its payment, when `withPayment`;
    /// its centres.
    func parcelDetails(_ c: Connection, _ p: ParcelRecord, withPayment: Bool) throws
        -> (history: [HistoryEntry], courier: (courier: CourierRecord, profile: ProfileRecord?)?, payment: PaymentRecord?,
            dropOffCentre: CentreRecord?, collectionCentre: CentreRecord?) {
        var reads: [(sql: String, parameters: [(any PostgresEncodable)?])] = [
            ("SELECT * FROM dispatch.parcel_history WHERE parcel_id = $1 ORDER BY id", [p.id])]
        func read(_ sql: String, _ value: UUID?) -> Int? {
            guard let value else { return nil }
            reads.append((sql, [value]))
            return reads.count - 1
        }
        let courier = read("""
            SELECT c.*, p.lat, p.lon, p.fix_at, f.username, f.full_name, f.avatar_media_id, f.picture_url, f.phone
            FROM dispatch.couriers c JOIN dispatch.courier_positions p USING (user_id) LEFT JOIN dispatch.profiles f USING (user_id)
            WHERE user_id = $1
            """, p.courierId)
        let payment = read(Self.paymentSQL(where: "parcel_id", lock: false), withPayment ? p.id : nil)
        let dropOff = read(Self.centreSQL, p.dropOffCentreId), collection = read(Self.centreSQL, p.collectionCentreId)
        let rows = try c.rows(together: reads)
        func first(_ i: Int?) -> Row? { i.flatMap { rows[$0].first } }
        return (try rows[0].map(HistoryEntry.init),
                try first(courier).map { (try CourierRecord($0), try $0.decode("username") as String? == nil ? nil : try ProfileRecord($0)) },
                try first(payment).map(PaymentRecord.init), try first(dropOff).map(CentreRecord.init),
                try first(collection).map(CentreRecord.init))
    }

    func decline(_ c: Connection, parcel: UUID, courier: UUID) throws {
        try c.execute("INSERT INTO dispatch.parcel_declines (parcel_id, courier_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                      [parcel, courier])
    }

    /// A parcel to offer, locked unless another transaction holds it, with the couriers who declined it.
    func parcelToOffer(_ c: Connection, _ id: UUID) throws -> (parcel: ParcelRecord, declined: Set<UUID>)? {
        try c.first("""
            SELECT p.*, array_to_string(ARRAY(SELECT courier_id FROM dispatch.parcel_declines d WHERE d.parcel_id = p.id), ',') AS declined
            FROM dispatch.parcels p WHERE p.id = $1 FOR UPDATE OF p SKIP LOCKED
            """, [id]).map { r in
            (try ParcelRecord(r), Set((try r["declined"] as String).split(separator: ",").compactMap { UUID(uuidString: String($0)) }))
        }
    }

    /// Parcels waiting for a courier: express first, oldest first within a class.
    /// Parcels waiting for a courier (express first, oldest first) with their pickups: those not marked stranded,
    /// or (`stranded`) those marked.
    func awaiting(_ c: Connection, stranded: Bool = false, limit: Int) throws -> [(id: UUID, pickup: GeoPoint)] {
        try c.rows("""
            SELECT id, pickup_lat, pickup_lon FROM dispatch.parcels
            WHERE status = 'awaiting_courier' AND stranded_at IS \(stranded ? "NOT NULL" : "NULL")
            ORDER BY (service = 'express') DESC, created_at LIMIT $1
            """, [limit]).map { (try $0["id"], GeoPoint(lat: try $0["pickup_lat"], lon: try $0["pickup_lon"])) }
    }

    /// Whether another parcel waits to be offered a courier ahead of `parcel` (the matcher's order: express first,
    /// then the oldest; stranded ones wait for nobody in reach, so not ahead).
    func waitingAhead(_ c: Connection, of parcel: ParcelRecord) throws -> Bool {
        try c.first("""
            SELECT 1 AS ahead FROM dispatch.parcels
            WHERE status = 'awaiting_courier' AND stranded_at IS NULL AND id <> $1 AND (service = 'express' OR NOT $2)
            LIMIT 1
            """, [parcel.id, parcel.service == .express]) != nil
    }

    /// Marks a waiting parcel stranded (no courier within reach), or gives it back to matching.
    func setStranded(_ c: Connection, _ ids: [UUID], _ stranded: Bool) throws {
        try c.execute("""
            UPDATE dispatch.parcels SET stranded_at = \(stranded ? "now()" : "NULL")
            WHERE id = ANY($1::uuid[]) AND status = 'awaiting_courier'
            """, [PostgresArray(ids)])
    }

    func expiredOffers(_ c: Connection, limit: Int) throws -> [UUID] {
        try c.rows("""
            SELECT id FROM dispatch.parcels WHERE status = 'offered' AND offer_expires_at < now()
            ORDER BY offer_expires_at LIMIT $1
            """, [limit]).map { try $0["id"] }
    }

    /// Parcels the courier has picked up and not yet moved off with.
    func pickedUp(_ c: Connection, courier: UUID) throws -> [UUID] {
        try c.rows("SELECT id FROM dispatch.parcels WHERE courier_id = $1 AND status = 'picked_up'", [courier]).map { try $0["id"] }
    }

    func list(_ c: Connection, user: UUID, role: String, status: String?, after: UUID?, limit: Int) throws -> [ParcelRecord] {
        let column = role == "sender" ? "sender_id" : role == "recipient" ? "recipient_user_id" : "courier_id"
        let offered = role == "courier" ? " OR (offered_to = $1 AND status = 'offered')" : ""
        return try c.rows("""
            SELECT *, \(ParcelRecord.photoMetaSQL) FROM dispatch.parcels WHERE (\(column) = $1\(offered)) AND ($2::text IS NULL OR status = $2)
              AND ($3::uuid IS NULL OR id < $3::uuid) ORDER BY id DESC LIMIT $4
            """, [user, status, after, limit]).map(ParcelRecord.init)
    }
}

/// Fixes as announced on `DispatchStorage.positionsChannel`: the announcing instance's id (16 bytes: it skips its
/// own), then 40 bytes a fix (the courier's id; latitude and longitude as IEEE doubles; the fix's time in whole
/// microseconds since 1970; little-endian), in base64, at most 140 a notification (a payload must stay under 8,000
/// bytes).
enum PositionNotice {
    static let perPayload = 140
    static let width = 40

    static func payloads(_ fixes: [Fix], origin: UUID) -> [String] {
        stride(from: 0, to: fixes.count, by: perPayload).map { start in
            var bytes: [UInt8] = []
            bytes.reserveCapacity(16 + min(perPayload, fixes.count - start) * width)
            withUnsafeBytes(of: origin.uuid) { bytes.append(contentsOf: $0) }
            for fix in fixes[start..<min(start + perPayload, fixes.count)] {
                withUnsafeBytes(of: fix.courier.uuid) { bytes.append(contentsOf: $0) }
                for word in [fix.point.lat.bitPattern, fix.point.lon.bitPattern,
                             UInt64(bitPattern: Int64((fix.time.timeIntervalSince1970 * 1_000_000).rounded()))] {
                    withUnsafeBytes(of: word.littleEndian) { bytes.append(contentsOf: $0) }
                }
            }
            return Data(bytes).base64EncodedString()
        }
    }

    /// The fixes of a payload, unless `origin` announced them; none when it is not one (another program's
    /// notification on the channel).
    static func decode(_ payload: String, skipping origin: UUID) -> [(courier: UUID, point: GeoPoint, at: Date)] {
        guard let data = Data(base64Encoded: payload), data.count >= 16, (data.count - 16) % width == 0 else { return [] }
        return data.withUnsafeBytes { raw in
            guard UUID(uuid: raw.loadUnaligned(as: uuid_t.self)) != origin else { return [] }
            return stride(from: 16, to: raw.count, by: width).compactMap { offset in
                let id = UUID(uuid: raw.loadUnaligned(fromByteOffset: offset, as: uuid_t.self))
                let word = { (i: Int) in UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 16 + 8 * i, as: UInt64.self)) }
                let point = GeoPoint(lat: Double(bitPattern: word(0)), lon: Double(bitPattern: word(1)))
                guard point.isValid else { return nil }
                return (id, point, Date(timeIntervalSince1970: Double(Int64(bitPattern: word(2))) / 1_000_000))
            }
        }
    }
}
