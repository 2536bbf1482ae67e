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
}
