import Foundation
import HTTP
import Models
import Postgres
import Web

// Prompts for a quiet group (`GroupPrompts`): the id a story's body may name, and the view of a period's prompt.

/// A prompt's id as a body or view carries it (`Prompt.catalogue`).
let promptIdSchema = Schema.string(max: 64, pattern: "^[a-z0-9-]{1,64}$", rule: "promptId is a prompt's id, such as best-moment.")

/// `?language=` of the prompt route: the language to give the text in, English when the prompt has none in it.
let promptLanguage = QueryParameter("language", .string(max: 35, pattern: "^[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})*$"),
                                    "A language tag such as fr-FR; the text is in English when the prompt is not written in it",
                                    default: "en")

/// The prompt a group is offered in its current period, in one language, with the period it belongs to.
struct PromptView: View {
    let id: String
    let text: String
    let language: String
    let periodStart: Date
    let periodEnd: Date

    init(_ prompt: Prompt, language: String?, periodStart: Date, periodEnd: Date) {
        id = prompt.id; text = prompt.text(in: language); self.periodStart = periodStart; self.periodEnd = periodEnd
        let code = language.map { String($0.lowercased().prefix { $0.isLetter }) }
        self.language = code.flatMap { prompt.texts[$0] == nil ? nil : $0 } ?? "en"
    }

    static let fields: [ViewField<Self>] = [
        .field("id", \.id, promptIdSchema), .field("text", \.text), .field("language", \.language, .oneOf(Prompt.languages)),
        .field("periodStart", \.periodStart), .field("periodEnd", \.periodEnd),
    ]
}

extension StoriesHandlers {
    func groupPrompt(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withTransaction { c in
            let group = try groups.member(c, id, context.caller.userId)
            let current = try GroupPrompts(storage: storage).current(c, group: group)
            return .json(PromptView(current.prompt, language: context.request.query["language"], periodStart: current.start,
                                    periodEnd: current.end))
        }
    }
}
