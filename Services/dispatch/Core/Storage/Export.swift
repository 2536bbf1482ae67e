import Features
import Foundation
import Postgres

extension DispatchStorage {
    /// What dispatch holds of `user`, for their export: their courier record with their last position, the parcels
    /// they sent, received or carried, what they paid, its receipts and what they were refunded, what they earned
    /// delivering, their application to deliver and its decisions, and their photos (not an identity document's, which
    /// only operators read: the application says whether it is kept).
    func export(_ c: Connection, _ user: UUID, media: MediaStore) throws -> [String: Any] {
        try Export.document(c, """
            SELECT json_build_object(
                'courier', (SELECT json_build_object('vehicle', vehicle, 'capacity', capacity, 'online', online, 'createdAt', created_at,
                                'lastFix', CASE WHEN p.lat IS NOT NULL THEN json_build_object('lat', p.lat, 'lon', p.lon,
                                    'headingDegrees', p.heading, 'speedMps', p.speed_mps, 'at', p.fix_at) END)
                            FROM dispatch.couriers c JOIN dispatch.courier_positions p USING (user_id) WHERE user_id = \(user)),
                'courierApplication', (SELECT json_build_object('status', c.vetting, 'legalName', a.legal_name, 'phone', a.phone,
                                'vehicle', a.vehicle, 'consentedAt', a.consented_at, 'decidedAt', a.decided_at,
                                'identityPhotoKept', a.identity_media_id IS NOT NULL, 'createdAt', a.created_at,
                                'decisions', (SELECT coalesce(json_agg(json_build_object('decision', h.decision, 'reason', h.reason, 'at', h.at)
                                                                       ORDER BY h.id), '[]'::json)
                                              FROM dispatch.courier_vetting_history h WHERE h.user_id = \(user)))
                            FROM dispatch.courier_applications a JOIN dispatch.couriers c USING (user_id) WHERE a.user_id = \(user)),
                'parcels', (SELECT coalesce(json_agg(json_build_object('id', id,
                                'role', CASE WHEN sender_id = \(user) THEN 'sender' WHEN recipient_user_id = \(user) THEN 'recipient' ELSE 'courier' END,
                                'status', status, 'service', service, 'pickupAddress', pickup_address, 'dropoffAddress', dropoff_address,
                                'recipientName', recipient_name, 'recipientPhone', recipient_phone, 'recipientEmail', recipient_email,
                                'description', description, 'amountMinor', amount_minor, 'currency', currency, 'createdAt', created_at)
                                ORDER BY created_at), '[]'::json)
                            FROM dispatch.parcels WHERE sender_id = \(user) OR recipient_user_id = \(user) OR courier_id = \(user)),
                'payments', (SELECT coalesce(json_agg(json_build_object('id', id, 'parcelId', parcel_id, 'method', method, 'status', status,
                                'amountMinor', amount_minor, 'currency', currency, 'createdAt', created_at) ORDER BY created_at), '[]'::json)
                             FROM dispatch.payments WHERE payer_id = \(user)),
                'refunds', (SELECT coalesce(json_agg(json_build_object('id', id, 'parcelId', parcel_id, 'to', destination, 'status', status,
                                'amountMinor', amount_minor, 'currency', currency, 'reason', reason, 'createdAt', created_at)
                                ORDER BY created_at), '[]'::json) FROM dispatch.refunds WHERE payer_id = \(user)),
                'earnings', (SELECT coalesce(json_agg(json_build_object('parcelId', parcel_id, 'priceMinor', price_minor,
                                'shareMinor', amount_minor, 'currency', currency, 'at', at) ORDER BY at), '[]'::json)
                             FROM dispatch.courier_earnings WHERE courier_id = \(user)),
                'loyalty', (SELECT coalesce(json_agg(json_build_object('entry', entry, 'points', points, 'parcelId', parcel_id, 'at', at)
                                ORDER BY id), '[]'::json) FROM dispatch.loyalty_ledger WHERE user_id = \(user)),
                'wallet', (SELECT coalesce(json_agg(json_build_object('entry', entry, 'amountMinor', amount_minor, 'currency', currency,
                                'parcelId', parcel_id, 'at', at) ORDER BY id), '[]'::json) FROM dispatch.wallet_ledger WHERE user_id = \(user)),
                'plans', (SELECT coalesce(json_agg(json_build_object('entry', entry, 'planId', plan_id, 'amountMinor', amount_minor,
                                'currency', currency, 'periodEnd', period_end, 'at', at) ORDER BY id), '[]'::json)
                          FROM dispatch.plan_ledger WHERE user_id = \(user)),
                'receipts', (SELECT coalesce(json_agg(json_build_object('number', number, 'purpose', purpose, 'parcelId', parcel_id,
                                'currency', currency, 'totalMinor', total_minor, 'taxMinor', tax_minor, 'lines', lines, 'issuedAt', issued_at)
                                ORDER BY issued_at), '[]'::json) FROM dispatch.receipts WHERE payer_id = \(user)),
                'images', (SELECT coalesce(json_agg(json_build_object('id', id, 'contentType', content_type, 'size', size, 'createdAt', created_at)
                                                    ORDER BY created_at), '[]'::json)
                           FROM dispatch.media WHERE owner_id = \(user) AND purpose <> \(Vetting.identityPurpose))
            )::text AS export
            """, media: media)
    }
}
