import Foundation
import Models
import Postgres
import Web

/// Prompts for a quiet group: each period of a group's schedule offers one prompt of `Prompt.catalogue`, the same to
/// every member. It is chosen the first time the period's prompt is asked for (the reminder, the app, a story that
/// answers it) by `Prompt.choose` from the group and the period's start, leaving out the group's last
/// `Prompt.noRepeatWithin` prompts, and kept (`group_prompts`) so that the period keeps it whatever comes later.
struct GroupPrompts: Sendable {
    let storage: StoriesStorage

    /// The prompt of the period of `group` that contains `now`, and that period.
    func current(_ c: Connection, group: GroupRecord, now: Date = Date()) throws -> (prompt: Prompt, start: Date, end: Date) {
        let period = try Newsletters.schedule(group).period(containing: now)
        return (try offered(c, group: group.id, periodStart: period.start), period.start, period.end)
    }

    /// The prompt of `group` for the period that starts at `periodStart`, chosen and kept if it was not yet.
    func offered(_ c: Connection, group: UUID, periodStart: Date) throws -> Prompt {
        if let id = try storage.offeredPrompt(c, group: group, periodStart: periodStart), let prompt = Prompt.named(id) { return prompt }
        let recent = try storage.earlierPrompts(c, group: group, before: periodStart, limit: Prompt.noRepeatWithin)
        let chosen = Prompt.choose(group: group, periodStart: periodStart, recent: recent)
        try storage.recordPrompt(c, group: group, periodStart: periodStart, prompt: chosen.id)
        // Another transaction may have kept its choice first: the kept one is the group's.
        return try storage.offeredPrompt(c, group: group, periodStart: periodStart).flatMap(Prompt.named) ?? chosen
    }

    /// Refuses a story's `promptId` unless it is the current prompt of at least one of `groups` (the author's).
    func requireAnswerable(_ c: Connection, _ promptId: String, groups: [GroupRecord], now: Date = Date()) throws {
        guard Prompt.named(promptId) != nil else { throw PromptError.unknown(promptId) }
        for group in groups where try current(c, group: group, now: now).prompt.id == promptId { return }
        throw PromptError.notCurrent(promptId)
    }
}

/// A story's `promptId` that it cannot answer.
enum PromptError: DomainError, Equatable {
    /// No prompt has the id.
    case unknown(String)
    /// A prompt, but none of the story's groups is offered it in its current period.
    case notCurrent(String)

    var refusal: Refusal { .invalid }
    var message: String {
        switch self {
        case .unknown(let id): return "promptId \(id.debugDescription) is not a prompt."
        case .notCurrent: return "promptId must be the current prompt of one of the story's groups."
        }
    }
    var field: String? { "promptId" }
}
