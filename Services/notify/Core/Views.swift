import Foundation
import Web

/// A notification as its person sees it in their list: what, by which channel, to where, and how it went.
struct DeliveryView: View {
    let delivery: DeliveryRecord
    init(_ d: DeliveryRecord) { delivery = d }

    static let kinds = ["email_verification", "password_reset", "newsletter", "reminder", "parcel_offer", "parcel_step", "chat_message", "chat_mention",
                        "newsletter_ready", "story_comment", "group_stories_digest", "payment_action", "payment_receipt"]

    /// A notice in the app's list: what it says, and where a tap leads (nil for the other channels).
    private var notice: [String: Any]? {
        guard delivery.channel == "app", let text = delivery.bodyText else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
    }

    static let fields: [ViewField<Self>] = [
        .field("id", \.delivery.id), .field("kind", \.delivery.kind, .oneOf(kinds)),
        .field("channel", \.delivery.channel, .oneOf(["email", "push", "app"])), .field("address", \.delivery.address),
        .field("subject", \.delivery.subject), .field("status", \.delivery.status, .oneOf(["pending", "sending", "sent", "failed"])),
        .field("attempts", \.delivery.attempts, .integer(0...Int.max)), .field("createdAt", \.delivery.createdAt),
        .field("updatedAt", \.delivery.updatedAt), .nullable("sentAt", \.delivery.sentAt), .nullable("readAt", \.delivery.readAt),
        .nullable("body", { $0.notice?["body"] as? String }), .nullable("url", { $0.notice?["url"] as? String }),
    ]
}

/// A push subscription of mine: where it goes, and until when.
struct SubscriptionView: View {
    let subscription: SubscriptionRecord
    init(_ s: SubscriptionRecord) { subscription = s }

    static let fields: [ViewField<Self>] = [
        .field("id", \.subscription.id), .field("endpoint", \.subscription.endpoint),
        .nullable("expiresAt", \.subscription.expiresAt), .field("createdAt", \.subscription.createdAt),
        .field("updatedAt", \.subscription.updatedAt),
    ]
}

/// A device of mine registered for native push.
struct DeviceView: View {
    let device: DeviceRecord
    init(_ d: DeviceRecord) { device = d }

    static let fields: [ViewField<Self>] = [
        .field("id", \.device.id), .field("platform", \.device.platform, .oneOf(["apns", "fcm"])), .field("token", \.device.token),
        .field("app", \.device.app, .oneOf(Apps.all)), .nullable("environment", \.device.environment, .oneOf(["production", "sandbox"])),
        .nullable("locale", \.device.locale), .nullable("timeZone", \.device.timeZone), .field("createdAt", \.device.createdAt),
        .field("updatedAt", \.device.updatedAt),
    ]
}

/// The VAPID public key to subscribe with (`applicationServerKey`).
struct PushKeyView: View {
    let publicKey: String
    static let fields: [ViewField<Self>] = [.field("publicKey", \.publicKey)]
}

/// Whether I get one kind of notification by one channel.
struct PreferenceView: View {
    let kind: String
    let channel: String
    let enabled: Bool
    static let fields: [ViewField<Self>] = [
        .field("kind", \.kind, .oneOf(Preferences.kinds)), .field("channel", \.channel, .oneOf(["email", "push", "app"])),
        .field("enabled", \.enabled),
    ]
}

/// My quiet hours: pushes wait from `from` to `to` (`HH:MM`) in `timeZone`, but for a courier's offers.
struct QuietHoursView: View {
    let from: String
    let to: String
    let timeZone: String
    static let fields: [ViewField<Self>] = [.field("from", \.from), .field("to", \.to), .field("timeZone", \.timeZone)]
}
