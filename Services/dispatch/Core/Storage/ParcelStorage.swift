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

extension DispatchStorage {
    /// Offers open now, the oldest first.
    func openOffers(_ c: Connection, limit: Int) throws -> [ParcelRecord] {
        try c.rows("SELECT * FROM dispatch.parcels WHERE status = 'offered' ORDER BY offer_expires_at LIMIT $1", [limit])
            .map(ParcelRecord.init)
    }

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
        try c.one(MediaRecord.self, """
            SELECT \(MediaRecord.columns) FROM dispatch.media m WHERE m.id = \(id) AND (
                m.owner_id = \(reader)
                OR EXISTS (SELECT 1 FROM dispatch.parcels p  -- the reader's parcels, each by its own index
                           WHERE (p.sender_id = \(reader) OR p.recipient_user_id = \(reader) OR p.courier_id = \(reader))
                             AND m.id IN (p.document_photo_media_id, p.delivery_photo_media_id, p.receipt_photo_media_id)))
            """)
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
