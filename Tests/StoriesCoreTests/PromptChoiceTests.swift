@testable import Models
@testable import StoriesCore
import Foundation
import Web
import XCTest

/// The prompt a quiet group is offered: one per group and period, the same for every member, none again within
/// `Prompt.noRepeatWithin` periods, in the reader's language or else English; the newsletter groups the answers.
final class PromptChoiceTests: XCTestCase {
    let group = UUID(uuidString: "0193a0c4-7b1e-7c3d-9f00-1234567890ab")!
    let monday = Date(timeIntervalSince1970: 1_796_338_800)

    func testTheCatalogueHasUniqueIdsAndEveryLanguage() {
        XCTAssertGreaterThanOrEqual(Prompt.catalogue.count, 30)
        XCTAssertEqual(Set(Prompt.catalogue.map(\.id)).count, Prompt.catalogue.count)
        for prompt in Prompt.catalogue {
            XCTAssertEqual(Set(prompt.texts.keys), Set(Prompt.languages), prompt.id)
            XCTAssertNotNil(prompt.id.range(of: "^[a-z0-9-]{1,64}$", options: .regularExpression), prompt.id)
            XCTAssertFalse(prompt.texts.values.contains { $0.isEmpty }, prompt.id)
        }
    }

    func testEveryMemberIsOfferedTheSamePromptForAPeriod() {
        // What each member's request computes from the same group, period and history: one prompt, every time.
        let recent = ["best-moment", "walk"]
        let offers = (0..<10).map { _ in Prompt.choose(group: group, periodStart: monday, recent: recent).id }
        XCTAssertEqual(Set(offers).count, 1)
        XCTAssertEqual(Prompt.seed(group: group, periodStart: monday), Prompt.seed(group: group, periodStart: monday.addingTimeInterval(0.4)),
                       "a period's start in whole seconds")
        // Other groups are not all offered the same one.
        let others = Set((0..<20).map { _ in Prompt.choose(group: UUID(), periodStart: monday, recent: []).id })
        XCTAssertGreaterThan(others.count, 1)
    }

    func testNoPromptComesBackWithinTheStatedNumberOfPeriods() {
        for start in [monday, monday.addingTimeInterval(3 * 86_400)] {
            var history: [String] = []  // latest first, as `group_prompts` gives it
            for week in 0..<120 {
                let prompt = Prompt.choose(group: group, periodStart: start.addingTimeInterval(Double(week) * 7 * 86_400), recent: history)
                XCTAssertFalse(history.prefix(Prompt.noRepeatWithin).contains(prompt.id), "week \(week): \(prompt.id) again too soon")
                history.insert(prompt.id, at: 0)
            }
            XCTAssertEqual(Set(history).count, Prompt.catalogue.count, "every prompt comes round in time")
        }
        // A history that left out everything (a catalogue made smaller) still gives a prompt.
        XCTAssertNotNil(Prompt.choose(group: group, periodStart: monday, recent: Prompt.catalogue.map(\.id)).id)
    }

    func testTheTextIsInTheReadersLanguageElseEnglish() {
        let prompt = Prompt.named("best-moment")!
        XCTAssertEqual(prompt.text(in: "fr-FR"), "Quel a été le meilleur moment de ta semaine ?")
        XCTAssertEqual(prompt.text(in: "ro"), "Care a fost cel mai frumos moment al săptămânii tale?")
        XCTAssertEqual(prompt.text(in: "DE_at"), "Was war der schönste Moment deiner Woche?")
        XCTAssertEqual(prompt.text(in: "es-419"), "¿Cuál fue el mejor momento de tu semana?")
        XCTAssertEqual(prompt.text(in: "ja-JP"), "What was the best moment of your week?")
        XCTAssertEqual(prompt.text(in: nil), "What was the best moment of your week?")
        XCTAssertEqual(prompt.text(in: ""), "What was the best moment of your week?")
        let view = PromptView(prompt, language: "pt-BR", periodStart: monday, periodEnd: monday)
        XCTAssertEqual(view.language, "en")
        XCTAssertEqual(PromptView(prompt, language: "fr-CA", periodStart: monday, periodEnd: monday).language, "fr")
        XCTAssertNil(Prompt.named("no-such-prompt"))
    }

    func testTheNewsletterShowsTheAnswersTogetherUnderThePrompt() throws {
        typealias D = NewsletterDocument
        let ann = UUID().lowercased, ben = UUID().lowercased
        func story(_ id: String, _ text: String, prompt: String?) -> D.Story {
            D.Story(id: id, text: text, backgroundColor: nil, media: [], commentCount: 0, createdAt: "2026-12-01T10:00:00.000Z",
                    updatedAt: "2026-12-01T10:00:00.000Z", promptId: prompt)
        }
        let s1 = UUID().lowercased, s2 = UUID().lowercased, s3 = UUID().lowercased
        let doc = D(groupId: "g", groupName: "Family",
                    period: .init(from: "2026-11-30T18:00:00.000Z", to: "2026-12-07T18:00:00.000Z", timeZone: "UTC"), storyCount: 3,
                    members: [.init(id: ann, fullName: "Ann", avatarMediaId: nil, isMember: true,
                                    days: [.init(date: "2026-12-01", stories: [story(s1, "The <sea>", prompt: "window-view"),
                                                                               story(s2, "Just a day", prompt: nil)])]),
                              .init(id: ben, fullName: "Ben", avatarMediaId: nil, isMember: true,
                                    days: [.init(date: "2026-12-02", stories: [story(s3, "Roofs", prompt: "window-view")])])])
        XCTAssertEqual(doc.answers, [.init(promptId: "window-view", text: "Show us the view from your window.",
                                           stories: [.init(memberId: ann, storyId: s1), .init(memberId: ben, storyId: s3)])])
        let back = try JSONDecoder().decode(D.self, from: Data(JSON.encode(doc)))
        XCTAssertEqual(back, doc, "a stored newsletter keeps which prompt each story answers")
        XCTAssertEqual(doc.without(story: UUID(uuidString: s1)!).answers.first?.stories.map(\.storyId), [s3])
        XCTAssertEqual(doc.without([UUID(uuidString: ann)!, UUID(uuidString: ben)!]).answers, [])
        let html = NewsletterHTML.render(doc), text = NewsletterHTML.text(doc)
        XCTAssertTrue(html.contains("Show us the view from your window.</h2>"))
        XCTAssertTrue(html.contains("<strong>Ann</strong>: The &lt;sea&gt;"))
        XCTAssertTrue(text.contains("Prompt: Show us the view from your window.\n  Ann: The <sea>\n  Ben: Roofs\n"), text)
    }
}
