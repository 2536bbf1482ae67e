import Features
import Foundation
import Models
import Postgres

/// A courier's vetting as stored: their status (on their courier row), what they submitted (none for a courier
/// approved without an application: one registered before vetting existed, or one an operator seeded), and the
/// latest decision's reason.
struct ApplicationRecord: PostgresRecord {
    let userId: UUID
    let status: VettingStatus
    let legalName: String?
    let phone: String?
    let vehicle: String
    let identityMediaId: UUID?
    let vehicleMediaId: UUID?
    let consentedAt: Date?
    let decidedAt: Date?
    let documentsErasedAt: Date?
    /// Why the latest rejection or suspension was made (nil once approved or reinstated since).
    let reason: String?
    let createdAt: Date
    let updatedAt: Date

    init(_ r: Row) throws {
        userId = try r["user_id"]
        status = try r["vetting"]
        legalName = try r["legal_name", as: String?.self]; phone = try r["phone", as: String?.self]
        vehicle = try r["vehicle"]
        identityMediaId = try r["identity_media_id", as: UUID?.self]; vehicleMediaId = try r["vehicle_media_id", as: UUID?.self]
        consentedAt = try r["consented_at", as: Date?.self]; decidedAt = try r["decided_at", as: Date?.self]
        documentsErasedAt = try r["documents_erased_at", as: Date?.self]
        reason = try r["reason", as: String?.self]
        createdAt = try r["created_at"]; updatedAt = try r["updated_at"]
    }

    /// The columns, from the couriers' table as `c` and the applications' as `a` (joined on the left).
    static let columns: SQL = """
        c.user_id, c.vetting, a.legal_name, a.phone, coalesce(a.vehicle, c.vehicle) AS vehicle, a.identity_media_id,
        a.vehicle_media_id, a.consented_at, a.decided_at, a.documents_erased_at,
        (SELECT h.reason FROM dispatch.courier_vetting_history h WHERE h.user_id = c.user_id ORDER BY h.id DESC LIMIT 1) AS reason,
        coalesce(a.created_at, c.created_at) AS created_at, GREATEST(a.updated_at, c.updated_at) AS updated_at
        """
}

/// One step of a courier's vetting, for the operators.
struct VettingStep: PostgresRecord {
    let decision: CourierVettingDecision
    let reason: String?
    let operatorName: String?
    let at: Date

    init(_ r: Row) throws {
        decision = try r["decision"]
        reason = try r["reason", as: String?.self]; operatorName = try r["operator_name", as: String?.self]; at = try r["at"]
    }

    static let columns: SQL = "h.decision, h.reason, h.operator_name, h.at"
}

/// What a courier submits to be vetted, checked.
struct NewApplication {
    let user: UUID
    let legalName: String
    let phone: String
    let vehicle: String
    let identityMediaId: UUID
    let vehicleMediaId: UUID
}

extension DispatchStorage {
    private static let applicationFrom: SQL = "dispatch.couriers c LEFT JOIN dispatch.courier_applications a USING (user_id)"

    func application(_ c: Connection, _ user: UUID, lock: Bool = false) throws -> ApplicationRecord? {
        try c.one(ApplicationRecord.self, """
            SELECT \(ApplicationRecord.columns) FROM \(Self.applicationFrom) WHERE c.user_id = \(user)\(unescaped: lock ? " FOR UPDATE OF c" : "")
            """)
    }

    /// The applications in `status`, the longest-waiting first.
    func applications(_ c: Connection, status: VettingStatus, limit: Int) throws -> [ApplicationRecord] {
        try c.all(ApplicationRecord.self, """
            SELECT \(ApplicationRecord.columns) FROM \(Self.applicationFrom)
            WHERE c.vetting = \(status) ORDER BY c.updated_at, c.user_id LIMIT \(limit)
            """)
    }

    /// Stores `application` as the courier's (registering them with its vehicle, one parcel at a time, when they were
    /// not yet a courier), now pending; returns the identity photo it replaced, if another one.
    /// Stores the application; returns the photos of the one it replaces that it no longer names.
    func submit(_ c: Connection, _ application: NewApplication) throws -> [UUID] {
        try c.execute("""
            INSERT INTO dispatch.couriers AS c (user_id, vehicle, capacity, vetting) VALUES (\(application.user), \(application.vehicle), 1, 'pending')
            ON CONFLICT (user_id) DO UPDATE SET vehicle = EXCLUDED.vehicle, vetting = 'pending', online = false, updated_at = clock_timestamp()
            """)
        try c.execute("INSERT INTO dispatch.courier_positions (user_id) VALUES (\(application.user)) ON CONFLICT DO NOTHING")
        let previous = try c.first("""
            SELECT identity_media_id, vehicle_media_id FROM dispatch.courier_applications WHERE user_id = \(application.user) FOR UPDATE
            """).map { try $0.decode(UUID?.self, UUID?.self) }
        try c.execute("""
            INSERT INTO dispatch.courier_applications (user_id, legal_name, phone, vehicle, identity_media_id, vehicle_media_id, consented_at)
            VALUES (\(application.user), \(application.legalName), \(application.phone), \(application.vehicle), \(application.identityMediaId),
                    \(application.vehicleMediaId), now())
            ON CONFLICT (user_id) DO UPDATE SET legal_name = EXCLUDED.legal_name, phone = EXCLUDED.phone, vehicle = EXCLUDED.vehicle,
                identity_media_id = EXCLUDED.identity_media_id, vehicle_media_id = EXCLUDED.vehicle_media_id,
                consented_at = EXCLUDED.consented_at, decided_at = NULL, documents_erased_at = NULL, updated_at = now()
            """)
        guard let (identity, vehicle) = previous else { return [] }
        return [identity, vehicle].compactMap { $0 }.filter { $0 != application.identityMediaId && $0 != application.vehicleMediaId }
    }

    /// Moves the courier to `status` (going offline unless approved), noting when an application was decided, and
    /// records the step. Returns the courier as they are now.
    func decide(_ c: Connection, _ user: UUID, to status: VettingStatus, _ decision: CourierVettingDecision, reason: String?,
                operatorName: String?) throws -> (courier: CourierRecord, at: Date) {
        let courier = try c.one(CourierRecord.self, """
            WITH c AS (UPDATE dispatch.couriers c SET vetting = \(status), online = c.online AND \(status == .approved),
                           updated_at = clock_timestamp()
                       WHERE user_id = \(user) RETURNING \(CourierRecord.courierColumns))
            SELECT \(CourierRecord.columns) FROM c JOIN dispatch.courier_positions p USING (user_id)
            """)!
        if decision == .approved || decision == .rejected {
            try c.execute("UPDATE dispatch.courier_applications SET decided_at = now(), updated_at = now() WHERE user_id = \(user)")
        }
        let at: Date = try c.first("""
            INSERT INTO dispatch.courier_vetting_history (user_id, decision, reason, operator_name)
            VALUES (\(user), \(decision), \(reason), \(operatorName)) RETURNING at
            """)!["at"]
        return (courier, at)
    }

    func vettingHistory(_ c: Connection, _ user: UUID) throws -> [VettingStep] {
        try c.all(VettingStep.self, "SELECT \(VettingStep.columns) FROM dispatch.courier_vetting_history h WHERE h.user_id = \(user) ORDER BY h.id")
    }

    /// Erases the identity photos of applications decided before `cutoff` (their images go, and so their objects),
    /// up to `limit`; returns how many.
    @discardableResult
    func eraseIdentityPhotos(_ c: Connection, decidedBefore cutoff: Date, limit: Int = 500) throws -> Int {
        try c.first("""
            WITH due AS (SELECT user_id, identity_media_id FROM dispatch.courier_applications
                         WHERE identity_media_id IS NOT NULL AND decided_at < \(cutoff) ORDER BY decided_at LIMIT \(limit) FOR UPDATE SKIP LOCKED),
            gone AS (DELETE FROM dispatch.media WHERE id IN (SELECT identity_media_id FROM due)),
            done AS (UPDATE dispatch.courier_applications a SET identity_media_id = NULL, documents_erased_at = now()
                     FROM due WHERE a.user_id = due.user_id RETURNING 1)
            SELECT count(*)::int AS n FROM done
            """)!["n"]
    }

    /// The image of the courier's identity document, while it is kept.
    func identityPhoto(_ c: Connection, of user: UUID) throws -> MediaRecord? {
        try c.one(MediaRecord.self, """
            SELECT \(MediaRecord.columns) FROM dispatch.courier_applications a JOIN dispatch.media m ON m.id = a.identity_media_id
            WHERE a.user_id = \(user)
            """)
    }

    /// The parcels offered or assigned to `courier` that they have not picked up, locked (all of them before the
    /// courier's row, as every parcel's step locks its parcel before its courier).
    func notPickedUp(_ c: Connection, by courier: UUID) throws -> [UUID] {
        try c.rows("""
            SELECT id FROM dispatch.parcels
            WHERE (offered_to = \(courier) AND status = 'offered') OR (courier_id = \(courier) AND status = 'assigned')
            ORDER BY id FOR UPDATE
            """).map { try $0["id"] }
    }

    /// Deletes image `id` (its object follows, `MediaStore.sweepRemoved`).
    func deleteMedia(_ c: Connection, _ id: UUID) throws {
        try c.execute("DELETE FROM dispatch.media WHERE id = \(id)")
    }

    /// Image `id`, unless it is an identity document's, which only operators read (by their own route).
    func mediaByURL(_ c: Connection, _ id: UUID) throws -> MediaRecord? {
        try c.one(MediaRecord.self, "SELECT \(MediaRecord.columns) FROM dispatch.media m WHERE m.id = \(id) AND m.purpose <> \(Vetting.identityPurpose)")
    }
}
