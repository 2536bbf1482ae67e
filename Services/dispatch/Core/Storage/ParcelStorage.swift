import Events
import Features
import Foundation
import Geo
import Models
import Postgres

/// A parcel row.
struct ParcelRecord: PostgresRecord {
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
    let paymentMethod: PaymentMethod
    let insured: Bool
    let description: String?
    let documentPhotoMediaId: UUID
    var deliveryPhotoMediaId: UUID?
    var receiptPhotoMediaId: UUID?
    /// The photos' sizes and placeholders, where the query read them (`photoMeta`; `ImageView`).
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
        service = try r["service"]; paymentMethod = try r["payment_method"]
        insured = try r["insured"]; description = try r.decode("description"); documentPhotoMediaId = try r["document_photo_media_id"]
        deliveryPhotoMediaId = try r.decode("delivery_photo_media_id"); receiptPhotoMediaId = try r.decode("receipt_photo_media_id")
        photoMeta = ImageMeta.parse((try? r.decode("photo_meta", as: String.self)) ?? nil)
        failureReason = try r.decode("failure_reason")
        quote = Quote(currency: try r["currency"], amountMinor: try r["amount_minor"], etaSeconds: try r["eta_seconds"],
                      distanceMeters: try r["distance_m"])
        status = try r["status"]
        courierId = try r.decode("courier_id"); offeredTo = try r.decode("offered_to"); offerExpiresAt = try r.decode("offer_expires_at")
        dropOffCentreId = try r.decode("drop_off_centre_id"); collectionCentreId = try r.decode("collection_centre_id")
        centreCode = try r.decode("centre_code"); pointsSpent = try r["points_spent"]
        createdAt = try r["created_at"]; updatedAt = try r["updated_at"]
    }

    static let columns: SQL = """
        id, sender_id, recipient_user_id, recipient_name, recipient_phone, recipient_username, recipient_email, claim_code,
        delivery_pin, pin_failures, pickup_lat, pickup_lon, pickup_address, dropoff_lat, dropoff_lon, dropoff_address, service,
        payment_method, insured, description, document_photo_media_id, delivery_photo_media_id, receipt_photo_media_id,
        failure_reason, amount_minor, currency, eta_seconds, distance_m, status, courier_id, offered_to, offer_expires_at,
        drop_off_centre_id, collection_centre_id, centre_code, points_spent, created_at, updated_at
        """

    /// The column of the photos' meta, for a query that shows the parcel (`SELECT \(columns), \(photoMeta) FROM dispatch.parcels`).
    static let photoMeta = ImageMeta.sql(
        ids: "ARRAY[document_photo_media_id, delivery_photo_media_id, receipt_photo_media_id]", schema: "dispatch") + " AS photo_meta"

    /// Whether `user` takes part in the parcel (and so may see it).
    func involves(_ user: UUID) -> Bool {
        user == senderId || user == recipientUserId || user == courierId || (status == .offered && user == offeredTo)
    }
}

struct HistoryEntry: PostgresRecord {
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

    static let columns: SQL = "at, from_status, to_status, actor, actor_id, lat, lon"
}

extension DispatchStorage {
    /// Offers open now, the oldest first.
    func openOffers(_ c: Connection, limit: Int) throws -> [ParcelRecord] {
        try c.all(ParcelRecord.self, """
            SELECT \(ParcelRecord.columns) FROM dispatch.parcels WHERE status = 'offered' ORDER BY offer_expires_at LIMIT \(limit)
            """)
    }

    func insertParcel(_ c: Connection, _ p: NewParcel) throws -> ParcelRecord {
        let route = p.route, quote = p.quote
        return try c.one(ParcelRecord.self, """
            INSERT INTO dispatch.parcels (id, sender_id, recipient_user_id, recipient_name, recipient_phone, recipient_username,
                recipient_email, claim_code, delivery_pin,
                pickup_lat, pickup_lon, pickup_address, dropoff_lat, dropoff_lon, dropoff_address, service, payment_method,
                insured, description, document_photo_media_id, amount_minor, currency, eta_seconds, distance_m, status,
                drop_off_centre_id, collection_centre_id, centre_code, points_spent, tariff_id)
            VALUES (\(p.id), \(p.sender), \(p.recipientUserId), \(p.recipientName), \(p.recipientPhone), \(p.recipientUsername),
                \(p.recipientEmail), \(p.claimCode), \(p.deliveryPin), \(route.pickup.lat), \(route.pickup.lon), \(route.pickupAddress),
                \(route.dropoff.lat), \(route.dropoff.lon), \(route.dropoffAddress), \(p.service), \(p.paymentMethod),
                \(p.insured), \(p.description), \(p.documentPhotoMediaId), \(quote.amountMinor), \(quote.currency), \(quote.etaSeconds),
                \(quote.distanceMeters), \(p.status), \(route.dropOffCentre?.id), \(route.collectionCentre?.id), \(p.centreCode),
                \(p.pointsSpent), \(quote.tariffId))
            RETURNING \(ParcelRecord.columns), \(ParcelRecord.photoMeta)
            """)!
    }

    func parcel(_ c: Connection, centreCode: String, lock: Bool) throws -> ParcelRecord? {
        try c.one(ParcelRecord.self, """
            SELECT \(ParcelRecord.columns) FROM dispatch.parcels WHERE centre_code = \(centreCode)\(unescaped: lock ? " FOR UPDATE" : "")
            """)
    }

    /// The parcel that claim code `code` (normalised) names, locked.
    func parcel(_ c: Connection, claimCode code: String) throws -> ParcelRecord? {
        try c.one(ParcelRecord.self, "SELECT \(ParcelRecord.columns) FROM dispatch.parcels WHERE claim_code = \(code) FOR UPDATE")
    }

    /// One more wrong PIN for a parcel; how many there have been.
    func countWrongPin(_ c: Connection, _ id: UUID) throws -> Int {
        try c.first("UPDATE dispatch.parcels SET pin_failures = pin_failures + 1 WHERE id = \(id) RETURNING pin_failures")!["pin_failures"]
    }

    /// Image `id` if `reader` uploaded it or it is a photo of a parcel that is theirs (its sender, recipient or
    /// courier: not a courier only offered it, who sees no document until they accept); never an identity document's.
    func visibleMedia(_ c: Connection, _ id: UUID, reader: UUID) throws -> MediaRecord? {
        try c.one(MediaRecord.self, """
            SELECT \(MediaRecord.columns) FROM dispatch.media m WHERE m.id = \(id) AND m.purpose <> \(Vetting.identityPurpose) AND (
                m.owner_id = \(reader)
                OR EXISTS (SELECT 1 FROM dispatch.parcels p  -- the reader's parcels, each by its own index
                           WHERE (p.sender_id = \(reader) OR p.recipient_user_id = \(reader) OR p.courier_id = \(reader))
                             AND m.id IN (p.document_photo_media_id, p.delivery_photo_media_id, p.receipt_photo_media_id)))
            """)
    }

    func parcel(_ c: Connection, _ id: UUID, lock: Bool = false, skipLocked: Bool = false) throws -> ParcelRecord? {
        let suffix = lock ? (skipLocked ? " FOR UPDATE SKIP LOCKED" : " FOR UPDATE") : ""
        // A read to show the parcel carries its photos' meta; one to change it does not need them.
        let meta: SQL = lock ? "" : ", \(ParcelRecord.photoMeta)"
        return try c.one(ParcelRecord.self, "SELECT \(ParcelRecord.columns)\(meta) FROM dispatch.parcels WHERE id = \(id)\(unescaped: suffix)")
    }

    /// When parcel `id` last moved (its latest history entry's time, which its event carries too).
    func lastTransition(_ c: Connection, _ id: UUID) throws -> Date? {
        try c.first("SELECT max(at) AS at FROM dispatch.parcel_history WHERE parcel_id = \(id)")?.decode("at")
    }

    func save(_ c: Connection, _ p: ParcelRecord) throws {
        try c.execute(Self.update(p))
    }

    /// The statement that writes `p`'s changeable columns.
    private static func update(_ p: ParcelRecord) -> SQL {
        """
        UPDATE dispatch.parcels SET status = \(p.status), courier_id = \(p.courierId), offered_to = \(p.offeredTo),
            offer_expires_at = \(p.offerExpiresAt), delivery_photo_media_id = \(p.deliveryPhotoMediaId),
            receipt_photo_media_id = \(p.receiptPhotoMediaId), failure_reason = \(p.failureReason),
            recipient_user_id = \(p.recipientUserId), claim_code = \(p.claimCode), updated_at = now()
        WHERE id = \(p.id)
        """
    }

    /// A parcel's move, in one statement: its history entry (`at`), its event, and its row as `saving` now is (none
    /// for a parcel just inserted).
    func record(_ c: Connection, parcel: UUID, saving p: ParcelRecord?, from: ParcelStatus?, to: ParcelStatus,
                actor: ParcelActor, actorId: UUID?, place: GeoPoint?, at: Date, event: OutboxRow) throws {
        let update: SQL = p.map { ", parcel AS (\(Self.update($0)))" } ?? ""
        try c.enqueue("""
            WITH history AS (INSERT INTO dispatch.parcel_history (parcel_id, from_status, to_status, actor, actor_id, lat, lon, at)
                             VALUES (\(parcel), \(from), \(to), \(actor.rawValue), \(actorId), \(place?.lat),
                                     \(place?.lon), \(at)))\(update)
            INSERT INTO dispatch.outbox (event_id, topic, key, payload) VALUES \(event.values)
            """)
    }

    /// What a parcel's view shows besides its row, read in one round trip: its history; its courier with their
    /// profile (nil before dispatch heard of them from auth), when it has one; its payment, when `withPayment`;
    /// its centres.
    func parcelDetails(_ c: Connection, _ p: ParcelRecord, withPayment: Bool) throws
        -> (history: [HistoryEntry], courier: (courier: CourierRecord, profile: ProfileRecord?)?, payment: PaymentRecord?,
            dropOffCentre: CentreRecord?, collectionCentre: CentreRecord?) {
        var reads: [SQL] = ["SELECT \(HistoryEntry.columns) FROM dispatch.parcel_history WHERE parcel_id = \(p.id) ORDER BY id"]
        func read(_ value: UUID?, _ sql: (UUID) -> SQL) -> Int? {
            guard let value else { return nil }
            reads.append(sql(value))
            return reads.count - 1
        }
        let courier = read(p.courierId) { """
            SELECT \(CourierRecord.columns), \(ProfileRecord.columns)
            FROM dispatch.couriers c JOIN dispatch.courier_positions p USING (user_id) LEFT JOIN dispatch.profiles f USING (user_id)
            WHERE user_id = \($0)
            """ }
        let payment = read(withPayment ? p.id : nil) { Self.paymentSQL(where: "parcel_id", $0, lock: false) }
        let dropOff = read(p.dropOffCentreId, Self.centreSQL), collection = read(p.collectionCentreId, Self.centreSQL)
        let rows = try c.rows(together: reads)
        func first(_ i: Int?) -> Row? { i.flatMap { rows[$0].first } }
        return (try rows[0].map(HistoryEntry.init),
                try first(courier).map { (try CourierRecord($0), try $0.decode("username") as String? == nil ? nil : try ProfileRecord($0)) },
                try first(payment).map(PaymentRecord.init), try first(dropOff).map(CentreRecord.init),
                try first(collection).map(CentreRecord.init))
    }

    func decline(_ c: Connection, parcel: UUID, courier: UUID) throws {
        try c.execute("INSERT INTO dispatch.parcel_declines (parcel_id, courier_id) VALUES (\(parcel), \(courier)) ON CONFLICT DO NOTHING")
    }

    /// A parcel to offer, locked unless another transaction holds it, with the couriers who declined it.
    func parcelToOffer(_ c: Connection, _ id: UUID) throws -> (parcel: ParcelRecord, declined: Set<UUID>)? {
        try c.first("""
            SELECT \(ParcelRecord.columns),
                array_to_string(ARRAY(SELECT courier_id FROM dispatch.parcel_declines d WHERE d.parcel_id = p.id), ',') AS declined
            FROM dispatch.parcels p WHERE p.id = \(id) FOR UPDATE OF p SKIP LOCKED
            """).map { r in
            (try ParcelRecord(r), Set((try r["declined"] as String).split(separator: ",").compactMap { UUID(uuidString: String($0)) }))
        }
    }

    /// Parcels waiting for a courier (express first, oldest first) with their pickups: those not marked stranded,
    /// or (`stranded`) those marked.
    func awaiting(_ c: Connection, stranded: Bool = false, limit: Int) throws -> [(id: UUID, pickup: GeoPoint)] {
        try c.rows("""
            SELECT id, pickup_lat, pickup_lon FROM dispatch.parcels
            WHERE status = 'awaiting_courier' AND stranded_at IS \(unescaped: stranded ? "NOT NULL" : "NULL")
            ORDER BY (service = 'express') DESC, created_at LIMIT \(limit)
            """).map { (try $0["id"], GeoPoint(lat: try $0["pickup_lat"], lon: try $0["pickup_lon"])) }
    }

    /// Whether another parcel waits to be offered a courier ahead of `parcel` (the matcher's order: express first,
    /// then the oldest; stranded ones wait for nobody in reach, so not ahead).
    func waitingAhead(_ c: Connection, of parcel: ParcelRecord) throws -> Bool {
        try c.first("""
            SELECT 1 AS ahead FROM dispatch.parcels
            WHERE status = 'awaiting_courier' AND stranded_at IS NULL AND id <> \(parcel.id)
              AND (service = 'express' OR NOT \(parcel.service == .express))
            LIMIT 1
            """) != nil
    }

    /// Marks a waiting parcel stranded (no courier within reach), or gives it back to matching.
    func setStranded(_ c: Connection, _ ids: [UUID], _ stranded: Bool) throws {
        try c.execute("""
            UPDATE dispatch.parcels SET stranded_at = \(unescaped: stranded ? "now()" : "NULL")
            WHERE id = ANY(\(PostgresArray(ids))::uuid[]) AND status = 'awaiting_courier'
            """)
    }

    func expiredOffers(_ c: Connection, limit: Int) throws -> [UUID] {
        try c.rows("""
            SELECT id FROM dispatch.parcels WHERE status = 'offered' AND offer_expires_at < now()
            ORDER BY offer_expires_at LIMIT \(limit)
            """).map { try $0["id"] }
    }

    /// Parcels the courier has picked up and not yet moved off with.
    func pickedUp(_ c: Connection, courier: UUID) throws -> [UUID] {
        try c.rows("SELECT id FROM dispatch.parcels WHERE courier_id = \(courier) AND status = 'picked_up'").map { try $0["id"] }
    }

    func list(_ c: Connection, user: UUID, role: String, status: String?, after: UUID?, limit: Int) throws -> [ParcelRecord] {
        let column = role == "sender" ? "sender_id" : role == "recipient" ? "recipient_user_id" : "courier_id"
        let offered: SQL = role == "courier" ? " OR (offered_to = \(user) AND status = 'offered')" : ""
        return try c.all(ParcelRecord.self, """
            SELECT \(ParcelRecord.columns), \(ParcelRecord.photoMeta) FROM dispatch.parcels
            WHERE (\(unescaped: column) = \(user)\(offered)) AND (\(status)::text IS NULL OR status = \(status))
              AND (\(after)::uuid IS NULL OR id < \(after)::uuid) ORDER BY id DESC LIMIT \(limit)
            """)
    }
}
