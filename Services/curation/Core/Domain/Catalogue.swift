import Foundation
import Models
import Postgres

/// Imports a catalogue file: one JSON object a line (`youtubeId`, `title`, `description`, `durationSeconds`,
/// `channel`, `subject`, `topic`, `subtopic`, `path`, and optionally `partnerContent`, `parentDescription`,
/// `captions`, `sourceUrl`, `license`), in curriculum order: a video's place in its topic is its order among the
/// topic's lines. Re-importing updates what changed and never duplicates (the YouTube id is the key). A line that
/// is not a valid video is reported with its number and skipped; the rest is imported.
struct Catalogue: Sendable {
    let pool: Pool
    let storage: CurationStorage

    struct Report: Sendable {
        var lines = 0
        var added = 0
        var updated = 0
        var unchanged = 0
        var skipped: [(line: Int, reason: String)] = []
    }

    /// Imports `file`, 500 lines a transaction; `progress` is told every batch.
    func importFile(_ file: URL, progress: (Report) -> Void = { _ in }) throws -> Report {
        let data = try Data(contentsOf: file)
        var report = Report()
        var subjects: [String: UUID] = [:], topics: [String: UUID] = [:], positions: [UUID: Int] = [:]
        var batch: [(Int, CatalogueEntry)] = []
        func flush() throws {
            guard !batch.isEmpty else { return }
            try pool.withTransaction { c in
                for (_, e) in batch {
                    let subject = try subjects[e.subject] ?? storage.upsertSubject(c, name: e.subject, position: subjects.count + 1)
                    subjects[e.subject] = subject
                    let key = e.subject + "\u{1F}" + e.topic
                    let topic = try topics[key] ?? storage.upsertTopic(c, subject: subject, name: e.topic, position: topics.count + 1)
                    topics[key] = topic
                    positions[topic, default: 0] += 1
                    switch try storage.upsertVideo(c, e, topic: topic, position: positions[topic]!) {
                    case true?: report.added += 1
                    case false?: report.updated += 1
                    case nil: report.unchanged += 1
                    }
                }
            }
            batch.removeAll()
            progress(report)
        }
        let decoder = JSONDecoder()
        for (index, line) in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            guard !line.allSatisfy({ $0 == 32 || $0 == 13 || $0 == 9 }) else { continue }
            report.lines += 1
            do {
                let entry = try decoder.decode(CatalogueEntry.self, from: Data(line))
                if let problem = Self.problem(entry) { report.skipped.append((number, problem)); continue }
                batch.append((number, entry))
            } catch {
                report.skipped.append((number, "not a catalogue entry (\(Self.describe(error)))"))
            }
            if batch.count == 500 { try flush() }
        }
        try flush()
        return report
    }

    /// What is wrong with an entry that parsed, if anything.
    static func problem(_ e: CatalogueEntry) -> String? {
        if e.youtubeId.utf8.count != 11 || !e.youtubeId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) {
            return "youtubeId must be 11 characters of A-Z a-z 0-9 - _"
        }
        for (name, value, max) in [("title", e.title, 300), ("subject", e.subject, 100), ("topic", e.topic, 100), ("subtopic", e.subtopic, 200)]
            where value.trimmingCharacters(in: .whitespaces).isEmpty || value.count > max {
            return "\(name) must be 1 to \(max) characters"
        }
        if e.description.count > 20_000 || (e.parentDescription?.count ?? 0) > 20_000 || (e.captions?.count ?? 0) > 1_000_000 {
            return "a text is too long"
        }
        if !(0...86_400).contains(e.durationSeconds) { return "durationSeconds must be 0 to 86400" }
        if e.path.isEmpty || e.path.count > 10 { return "path must have 1 to 10 entries" }
        return nil
    }

    private static func describe(_ error: Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): return "\(key.stringValue) is missing"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "\(context.codingPath.map(\.stringValue).joined(separator: ".")) has the wrong type"
        default: return "not JSON"
        }
    }
}
