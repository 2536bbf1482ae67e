import Foundation
import Postgres

extension StoriesStorage {
    /// The prompt `group` was offered for the period starting at `periodStart`; nil when none was yet.
    func offeredPrompt(_ c: Connection, group: UUID, periodStart: Date) throws -> String? {
        try c.rows("""
            SELECT prompt_id FROM stories.group_prompts WHERE group_id = \(group) AND period_start = \(periodStart)
            """).first.map { try $0["prompt_id"] }
    }

    /// The prompts `group` was offered for periods before `periodStart`, latest first.
    func earlierPrompts(_ c: Connection, group: UUID, before periodStart: Date, limit: Int) throws -> [String] {
        try c.rows("""
            SELECT prompt_id FROM stories.group_prompts WHERE group_id = \(group) AND period_start < \(periodStart)
            ORDER BY period_start DESC LIMIT \(limit)
            """).map { try $0["prompt_id"] }
    }

    /// Keeps the prompt offered for a period, unless another transaction kept one first (it then waits for that one).
    func recordPrompt(_ c: Connection, group: UUID, periodStart: Date, prompt: String) throws {
        try c.execute("""
            INSERT INTO stories.group_prompts (group_id, period_start, prompt_id) VALUES (\(group), \(periodStart), \(prompt))
            ON CONFLICT (group_id, period_start) DO NOTHING
            """)
    }
}
