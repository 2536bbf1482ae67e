@testable import StoriesCore
import Foundation
import Web
import XCTest

/// Shared habits in a newsletter: stored and read back alike, gone with their member, shown escaped in the mail.
final class HabitNewsletterTests: XCTestCase {
    typealias D = NewsletterDocument
    let ann = UUID(), ben = UUID()

    var doc: D {
        D(groupId: "g", groupName: "Family", period: .init(from: "2026-11-30T18:00:00.000Z", to: "2026-12-07T18:00:00.000Z", timeZone: "UTC"),
          storyCount: 0,
          members: [.init(id: ann.lowercased, fullName: "Ann", avatarMediaId: nil, isMember: true, days: []),
                    .init(id: ben.lowercased, fullName: nil, avatarMediaId: nil, isMember: true, days: [])],
          habits: [.init(id: "h1", memberId: ann.lowercased, title: "Cook <b>dinner</b>", target: 2, per: "week", daysDone: 3,
                         currentStreak: 4, longestStreak: 6),
                   .init(id: "h2", memberId: ben.lowercased, title: "Run", target: 1, per: "day", daysDone: 1, currentStreak: 1, longestStreak: 1)])
    }

    func testSharedHabitsReadBackAndGoWithTheirMember() throws {
        XCTAssertEqual(try JSONDecoder().decode(D.self, from: Data(JSON.encode(doc))), doc)
        XCTAssertEqual(doc.without([ann]).habits?.map(\.id), ["h2"])
        let old = #"{"groupId":"g","groupName":"n","period":{"from":"a","to":"b","timeZone":"UTC"},"storyCount":0,"members":[]}"#
        let stored = try JSONDecoder().decode(D.self, from: Data(old.utf8))
        XCTAssertNil(stored.habits)
        XCTAssertEqual(String(decoding: JSON.encode(stored), as: UTF8.self), old, "one stored before habits reads as it was")
    }

    func testTheMailShowsEachSharedHabitsStreak() {
        let html = NewsletterHTML.render(doc), text = NewsletterHTML.text(doc)
        XCTAssertTrue(html.contains("<strong>Ann</strong>: Cook &lt;b&gt;dinner&lt;/b&gt; (2 days a week): a 4-week streak, the longest 6; done on 3 days this time"), html)
        XCTAssertTrue(html.contains("<strong>A member</strong>: Run (every day): a 1-day streak"), html)
        XCTAssertFalse(html.contains("<b>dinner"))
        XCTAssertTrue(text.contains("\nHabits\n  Ann: Cook <b>dinner</b> (2 days a week): a 4-week streak"), text)
        XCTAssertFalse(NewsletterHTML.render(doc.without([ann, ben])).contains("Habits"), "no section without habits")
    }
}
