import Foundation
import Models
import Web

/// One push notification: what the device shows (`title`, `body`, and where a tap leads, `url`, a path of the app),
/// and how the push service is to keep it (RFC 8030: `ttl`, `urgency`, and `topic`, under which a newer notice
/// replaces an older one not yet delivered).
struct Notice: Encodable {
    let kind: String
    let title: String
    let body: String
    let url: String
    let data: [String: String]
    let ttl: Int
    let urgency: String
    let topic: String?
    /// Not worth delivering after.
    let expiresAt: Date

    /// The JSON the device decrypts: `{kind, title, body, url, data}`.
    var payload: String { String(decoding: (try? JSON.encode(self)) ?? [], as: UTF8.self) }

    private enum CodingKeys: String, CodingKey { case kind, title, body, url, data }
}

/// What each kind of push says.
struct Notices: Sendable {
    /// How long an offer stands (dispatch's `OFFER_TIMEOUT_SECONDS`): an offer notice is not worth more.
    let offerSeconds: Int

    /// A Tapestry member who has not posted in a period that is about to close: with the group's prompt, its text (in
    /// the `language` of the member's latest device when the prompt is written in it, else in English) is the body,
    /// and a tap opens it to be answered.
    func reminder(_ e: ReminderDue, language: String? = nil) -> Notice {
        let closes = e.periodEnd, group = e.groupId.lowercased
        var data = ["groupId": group, "periodEnd": Timestamp.format(e.periodEnd)]
        let prompt = e.promptId.flatMap { id in Prompt.named(id)?.text(in: language) ?? e.promptText }
        if let prompt, let id = e.promptId { data["promptId"] = id; data["prompt"] = prompt }
        return Notice(kind: "reminder", title: "Your group is waiting for your story",
                      body: prompt ?? "You have not posted this period yet: share a moment before the newsletter is put together.",
                      url: "/groups/\(group)", data: data,
                      ttl: max(60, min(86_400, Int(closes.timeIntervalSinceNow))), urgency: "normal",
                      topic: "reminder" + group.replacingOccurrences(of: "-", with: "").prefix(24), expiresAt: closes)
    }

    /// A member commented on the person's story.
    func comment(_ e: StoryCommented) -> Notice {
        Notice(kind: "story_comment", title: "A new comment on your story", body: "A member of your group commented on your story.",
               url: "/stories/\(e.storyId.lowercased)", data: ["storyId": e.storyId.lowercased, "commentId": e.commentId.lowercased],
               ttl: 86_400, urgency: "normal", topic: nil, expiresAt: e.createdAt.addingTimeInterval(7 * 86_400))
    }

    /// A group's newsletter was put together: a newer one replaces an older one not yet delivered.
    func newsletterReady(_ e: NewsletterCompiled) -> Notice {
        let group = e.groupId.lowercased, newsletter = e.newsletterId.lowercased
        return Notice(kind: "newsletter_ready", title: "Your group's newsletter is ready",
                      body: e.storyCount == 1 ? "1 story from this period, together." : "\(e.storyCount) stories from this period, together.",
                      url: "/groups/\(group)/newsletters/\(newsletter)", data: ["groupId": group, "newsletterId": newsletter, "stories": String(e.storyCount)],
                      ttl: 86_400, urgency: "normal", topic: "newsletter" + group.replacingOccurrences(of: "-", with: "").prefix(22),
                      expiresAt: e.compiledAt.addingTimeInterval(Deliveries.newsletterLifetime))
    }

    /// The stories others posted in a group during a digest window, told once it closed (`closes`).
    static func digest(group: String, name: String, stories: Int, closes: Date) -> Notice {
        Notice(kind: "group_stories_digest", title: name.isEmpty ? "New stories in your group" : "New stories in \(name)",
               body: stories == 1 ? "1 new story to read." : "\(stories) new stories to read.", url: "/groups/\(group)",
               data: ["groupId": group, "stories": String(stories)], ttl: 86_400, urgency: "very-low",
               topic: "digest" + group.replacingOccurrences(of: "-", with: "").prefix(26), expiresAt: closes.addingTimeInterval(86_400))
    }

    /// A courier offered a parcel: at once, and not after the offer lapsed.
    func offer(_ e: ParcelStatusChanged) -> Notice {
        let parcel = e.parcelId.lowercased
        return Notice(kind: "parcel_offer", title: "A delivery for you", body: "A parcel near you waits for a courier: accept it in the app.",
                      url: "/courier/offers/\(parcel)", data: ["parcelId": parcel], ttl: offerSeconds, urgency: "high",
                      topic: "offer" + parcel.replacingOccurrences(of: "-", with: "").prefix(27),
                      expiresAt: e.at.addingTimeInterval(TimeInterval(offerSeconds)))
    }

    /// A step of a parcel its sender and recipient hear of; nil for the steps that are dispatch's own business.
    func parcelStep(_ e: ParcelStatusChanged) -> Notice? {
        let text: [ParcelStatus: (String, String)] = [
            .assigned: ("A courier is on the way", "A courier took your parcel and is heading to the pickup."),
            .pickedUp: ("Your parcel was picked up", "The courier has your parcel."),
            .inTransit: ("Your parcel is on its way", "The courier is taking your parcel to the drop-off."),
            .delivered: ("Your parcel was delivered", "The courier handed your parcel over."),
            .awaitingCourier: ("Your parcel was taken in", "The reception centre has your parcel; a courier will collect it."),
            .readyForCollection: ("Ready for collection", "The parcel waits at the reception centre: show its code and your PIN there."),
            .received: ("Delivery confirmed", "The recipient confirmed they received the parcel."),
            .cancelled: ("The delivery was cancelled", "The parcel will not be delivered."),
            .failed: ("The delivery failed", "The courier could not deliver the parcel."),
        ]
        // Waiting for a courier is news when a centre's staff took the parcel in, or when its courier was taken off it
        // (suspended, or gone) before the pickup; not after an offer declined or expired, which nobody saw.
        let withdrawn = e.to == .awaitingCourier && e.from == .assigned
        guard let (title, body) = withdrawn ? ("Finding another courier", "Your courier can no longer take the parcel: another one will.")
                                            : text[e.to], e.to != .awaitingCourier || e.actor == .staff || withdrawn else { return nil }
        let parcel = e.parcelId.lowercased
        return Notice(kind: "parcel_step", title: title, body: body, url: "/parcels/\(parcel)",
                      data: ["parcelId": parcel, "status": e.to.rawValue], ttl: 86_400,
                      urgency: [.delivered, .readyForCollection, .failed].contains(e.to) ? "high" : "normal",
                      topic: "parcel" + parcel.replacingOccurrences(of: "-", with: "").prefix(26), expiresAt: e.at.addingTimeInterval(86_400))
    }

    /// A plan's renewal their bank wants them to confirm (3-D Secure): the link opens the plan, where the app
    /// completes it; not worth telling once the payment is given up.
    func paymentAction(_ e: PaymentActionRequired) -> Notice {
        let payment = e.paymentId.lowercased, by = e.authenticateBy
        var data = ["paymentId": payment, "authenticateBy": Timestamp.format(by)]
        data["subscriptionId"] = e.subscriptionId?.lowercased
        return Notice(kind: "payment_action", title: "Confirm your plan's renewal",
                      body: "Your bank asks you to confirm this month's payment: open the app to keep your plan.",
                      url: "/plans/subscription", data: data, ttl: max(60, min(4 * 86_400, Int(by.timeIntervalSinceNow))), urgency: "high",
                      topic: "payment" + payment.replacingOccurrences(of: "-", with: "").prefix(25), expiresAt: by)
    }

    /// Someone named the member in a room's message: at once.
    func mention(_ e: ChatMessageCreated) -> Notice {
        Notice(kind: "chat_mention", title: "You were mentioned", body: "Someone mentioned you in a conversation.",
               url: "/rooms/\(e.roomId.lowercased)", data: ["roomId": e.roomId.lowercased, "messageId": e.messageId.lowercased], ttl: 86_400,
               urgency: "normal", topic: nil, expiresAt: e.createdAt.addingTimeInterval(86_400))
    }

    /// The messages a member has not read in a room, told once its window closed (`title`, `unread` from chat).
    static func unread(room: String, title: String, unread: Int) -> Notice {
        Notice(kind: "chat_message", title: title.isEmpty ? "New messages" : title,
               body: unread == 0 ? "New messages" : unread == 1 ? "1 new message" : "\(unread) new messages", url: "/rooms/\(room)",
               data: ["roomId": room, "unread": String(unread)], ttl: 86_400, urgency: "normal", topic: nil, expiresAt: Date().addingTimeInterval(86_400))
    }
}
