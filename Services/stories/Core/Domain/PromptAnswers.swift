import Foundation
import Models
import Web

/// The answers to prompts in a period: the stories that name a prompt, together under its text (in English, the
/// newsletter's language), prompt by prompt in the order they were first answered, each prompt's stories in the
/// document's order (member by member, in time). Read from the document's own stories, like the trips, so a document
/// without someone or without a story has its answers right.
extension NewsletterDocument {
    struct Answers: Equatable, View {
        let promptId: String
        let text: String
        /// Each answer: whose, and which story.
        let stories: [Answer]
        static let fields: [ViewField<Self>] = [
            .field("promptId", \.promptId, promptIdSchema), .field("text", \.text), .field("stories", \.stories),
        ]
    }
    struct Answer: Equatable, View {
        let memberId: String
        let storyId: String
        static let fields: [ViewField<Self>] = [.field("memberId", \.memberId, .uuid), .field("storyId", \.storyId, .uuid)]
    }

    /// The period's answers, one entry per prompt answered (a prompt no longer in the catalogue is left out).
    var answers: [Answers] {
        var order: [String] = []
        var byPrompt: [String: [Answer]] = [:]
        for member in members {
            for day in member.days {
                for story in day.stories {
                    guard let id = story.promptId, Prompt.named(id) != nil else { continue }
                    if byPrompt[id] == nil { order.append(id) }
                    byPrompt[id, default: []].append(Answer(memberId: member.id, storyId: story.id))
                }
            }
        }
        return order.map { Answers(promptId: $0, text: Prompt.named($0)!.text(in: "en"), stories: byPrompt[$0]!) }
    }

    /// The story an answer names and its author's name, for the HTML and the mail text; nil when either is gone.
    func answered(_ answer: Answer) -> (who: String, story: Story)? {
        guard let member = members.first(where: { $0.id == answer.memberId }),
              let story = member.days.lazy.flatMap(\.stories).first(where: { $0.id == answer.storyId }) else { return nil }
        return (member.fullName ?? "A member", story)
    }
}
