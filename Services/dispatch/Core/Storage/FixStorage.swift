import Foundation
import Geo
import Models
import Postgres

extension DispatchStorage {
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
        // The couriers' array is written once, bound in both places it is read.
        let couriers = PostgresArray(fixes.map(\.courier))
        // Rows name their fix by its place in the batch (`i`, from 1): a small number to read, where a courier's id
        // would be parsed from text and looked up.
        let rows = try c.rows("""
            WITH c AS (SELECT u.i, active, online AND active < capacity AS available, updated_at
                       FROM unnest(\(couriers)::uuid[]) WITH ORDINALITY AS u (id, i) JOIN dispatch.couriers ON user_id = u.id AND active > 0
                       UNION ALL
                       SELECT u.i, active, online AND active < capacity, updated_at
                       FROM unnest(\(PostgresArray(unknown.map { fixes[$0].courier }))::uuid[], \(PostgresArray(unknown.map { $0 + 1 }))::int8[])
                           AS u (id, i) JOIN dispatch.couriers ON user_id = u.id AND active = 0),
            b AS (INSERT INTO dispatch.fix_batches (couriers, lat, lon, heading, speed_mps, fix_at)
                  SELECT \(couriers)::uuid[], \(PostgresArray(fixes.map(\.point.lat)))::float8[], \(PostgresArray(fixes.map(\.point.lon)))::float8[],
                      \(PostgresArray(fixes.map(\.heading)))::float8[], \(PostgresArray(fixes.map(\.speed)))::float8[],
                      \(PostgresArray(fixes.map(\.time)))::timestamptz[]
                  WHERE \(known.contains(true)) OR EXISTS (SELECT 1 FROM c))
            SELECT i, active, available, updated_at FROM c
            """)
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
            try c.enqueue("SELECT pg_notify(\(Self.positionsChannel), p) FROM unnest(\(PostgresArray(texts: payloads))::text[]) p")
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
            try c.execute("SELECT pg_advisory_xact_lock(\(unescaped: Self.foldLock))")
        } else {
            guard try c.first("SELECT pg_try_advisory_xact_lock(\(unescaped: Self.foldLock)) AS locked")?["locked"] == true else { return 0 }
        }
        return try c.first("""
            WITH b AS (DELETE FROM dispatch.fix_batches WHERE id IN (SELECT id FROM dispatch.fix_batches ORDER BY id LIMIT \(Self.foldLimit))
                       RETURNING couriers, lat, lon, heading, speed_mps, fix_at),
            f AS (SELECT DISTINCT ON (u.id) u.id, u.lat, u.lon, u.heading, u.speed, u.at
                  FROM b, unnest(b.couriers, b.lat, b.lon, b.heading, b.speed_mps, b.fix_at) AS u (id, lat, lon, heading, speed, at)
                  ORDER BY u.id, u.at DESC),
            moved AS (UPDATE dispatch.courier_positions p SET lat = f.lat, lon = f.lon, heading = f.heading, speed_mps = f.speed,
                          fix_at = f.at
                      FROM f WHERE p.user_id = f.id AND (p.fix_at IS NULL OR p.fix_at < f.at))
            SELECT count(*)::int AS n FROM b
            """)?["n"] ?? 0
    }

    /// Folds every batch appended so far, `foldLimit` a transaction.
    func foldFixes(_ pool: Pool, wait: Bool = false) throws {
        while try pool.withTransaction({ try foldFixes($0, wait: wait) }) == Self.foldLimit {}
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
