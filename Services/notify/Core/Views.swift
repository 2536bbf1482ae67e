import Foundation
import Web

/// A notification as its person sees it in their list: what, by which channel, to where, and how it went.
struct DeliveryView: View {
    let delivery: DeliveryRecord
    init(_ d: DeliveryRecord) { delivery = d }

    static let fields: [ViewField<Self>] = [
        .field("id", \.delivery.id), .field("kind", \.delivery.kind, .oneOf(["email_verification", "password_reset"])),
        .field("channel", \.delivery.channel, .oneOf(["email"])), .field("address", \.delivery.address),
        .field("subject", \.delivery.subject), .field("status", \.delivery.status, .oneOf(["pending", "sending", "sent", "failed"])),
        .field("attempts", \.delivery.attempts, .integer(0...Int.max)), .field("createdAt", \.delivery.createdAt),
        .nullable("sentAt", \.delivery.sentAt),
    ]
}
