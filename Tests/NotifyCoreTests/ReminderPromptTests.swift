@testable import NotifyCore
import Foundation
import Models
import XCTest

/// A reminder that carries its group's prompt shows the prompt's text, in the member's language when it is written
/// in it, else in English; one from before prompts says what it always said.
final class ReminderPromptTests: XCTestCase {
    let notices = Notices(offerSeconds: 30)

    func reminder(_ prompt: Prompt?) -> ReminderDue {
        ReminderDue(userId: UUID(), groupId: UUID(), reason: .noStoryInPeriod, periodStart: Date().addingTimeInterval(-3600),
                    periodEnd: Date().addingTimeInterval(7200), prompt: prompt)
    }

    func testTheReminderShowsThePromptInTheMembersLanguage() {
        let prompt = Prompt.named("window-view")!
        XCTAssertEqual(notices.reminder(reminder(prompt), language: "fr-FR").body, "Montre-nous la vue depuis ta fenêtre.")
        XCTAssertEqual(notices.reminder(reminder(prompt), language: "ja").body, "Show us the view from your window.")
        XCTAssertEqual(notices.reminder(reminder(prompt), language: nil).body, "Show us the view from your window.")
        XCTAssertEqual(notices.reminder(reminder(prompt), language: "de").data["promptId"], "window-view")
        let before = notices.reminder(reminder(nil), language: "fr")
        XCTAssertTrue(before.body.hasPrefix("You have not posted this period yet"))
        XCTAssertNil(before.data["promptId"])
    }

    /// A native push shows the prompt as it is (already in the member's language), not the app's own reminder text.
    func testANativePushShowsThePromptNotTheAppsOwnText() throws {
        func payload(_ notice: Notice) throws -> NativePush.Payload {
            NativePush.Payload(try JSONSerialization.jsonObject(with: Data(notice.payload.utf8)) as? [String: Any] ?? [:])
        }
        let prompted = try payload(notices.reminder(reminder(Prompt.named("walk")!), language: "es"))
        let alert = (prompted.apns["aps"] as? [String: Any])?["alert"] as? [String: Any] ?? [:]
        XCTAssertEqual(alert["body"] as? String, "¿Adónde te llevaron tus pies esta semana?")
        XCTAssertNil(alert["loc-key"])
        XCTAssertEqual(alert["title-loc-key"] as? String, "reminder.title")
        let android = (prompted.fcm(token: "t", ttl: 60, high: false, collapse: nil)["android"] as? [String: Any])?["notification"] as? [String: Any]
        XCTAssertNil(android?["body_loc_key"])
        let plain = try payload(notices.reminder(reminder(nil)))
        XCTAssertEqual(((plain.apns["aps"] as? [String: Any])?["alert"] as? [String: Any])?["loc-key"] as? String, "reminder.body")
    }
}

/// Which of a parcel's steps its sender and recipient hear of.
final class ParcelStepTests: XCTestCase {
    let notices = Notices(offerSeconds: 30)

    func step(_ from: ParcelStatus, _ to: ParcelStatus, by actor: ParcelActor) -> Notice? {
        notices.parcelStep(ParcelStatusChanged(parcelId: UUID(), from: from, to: to, actor: actor, actorId: nil, courierId: nil, place: nil, at: Date()))
    }

    func testBackToWaitingIsNewsOnlyWhenACentreTookItInOrItsCourierWasTakenOffIt() {
        XCTAssertEqual(step(.assigned, .awaitingCourier, by: .system)?.title, "Finding another courier")
        XCTAssertEqual(step(.awaitingDropOff, .awaitingCourier, by: .staff)?.title, "Your parcel was taken in")
        XCTAssertNil(step(.offered, .awaitingCourier, by: .courier), "a declined offer")
        XCTAssertNil(step(.offered, .awaitingCourier, by: .system), "an offer that expired")
        XCTAssertEqual(step(.offered, .assigned, by: .courier)?.title, "A courier is on the way")
    }
}
