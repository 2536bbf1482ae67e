@testable import CurationCore
import Foundation
import XCTest

/// What a catalogue entry must be to be imported, and the durations YouTube gives.
final class CatalogueRulesTests: XCTestCase {
    func entry(_ changes: [String: Any] = [:]) throws -> CatalogueEntry {
        var fields: [String: Any] = ["youtubeId": "dQw4w9WgXcQ", "title": "Fractions", "description": "Halves and quarters", "durationSeconds": 600,
                                     "channel": "Maths", "subject": "Maths", "topic": "Numbers", "subtopic": "Fractions",
                                     "path": ["Maths", "Numbers", "Fractions"]]
        fields.merge(changes) { $1 }
        return try JSONDecoder().decode(CatalogueEntry.self, from: try JSONSerialization.data(withJSONObject: fields))
    }

    func testAGoodEntryHasNoProblem() throws {
        XCTAssertNil(Catalogue.problem(try entry()))
        XCTAssertNil(Catalogue.problem(try entry(["youtubeId": "a-b_c-D_9z0", "durationSeconds": 0, "path": ["One"]])))
    }

    func testEachRuleNamesItsField() throws {
        let cases: [([String: Any], String)] = [
            (["youtubeId": "dQw4w9WgXc"], "youtubeId must be 11 characters of A-Z a-z 0-9 - _"),
            (["youtubeId": "dQw4w9WgXc!"], "youtubeId must be 11 characters of A-Z a-z 0-9 - _"),
            (["youtubeId": "dQw4w9WgXcé"], "youtubeId must be 11 characters of A-Z a-z 0-9 - _"),
            (["title": "   "], "title must be 1 to 300 characters"),
            (["title": String(repeating: "t", count: 301)], "title must be 1 to 300 characters"),
            (["subject": String(repeating: "s", count: 101)], "subject must be 1 to 100 characters"),
            (["topic": ""], "topic must be 1 to 100 characters"),
            (["subtopic": String(repeating: "s", count: 201)], "subtopic must be 1 to 200 characters"),
            (["description": String(repeating: "d", count: 20_001)], "a text is too long"),
            (["captions": String(repeating: "c", count: 1_000_001)], "a text is too long"),
            (["durationSeconds": -1], "durationSeconds must be 0 to 86400"),
            (["durationSeconds": 86_401], "durationSeconds must be 0 to 86400"),
            (["path": []], "path must have 1 to 10 entries"),
            (["path": Array(repeating: "p", count: 11)], "path must have 1 to 10 entries"),
        ]
        for (change, problem) in cases {
            XCTAssertEqual(Catalogue.problem(try entry(change)), problem, "\(change.keys.sorted())")
        }
    }

    func testDurationsAsYouTubeWritesThem() {
        XCTAssertEqual(YouTubeImport.seconds("PT1H2M3S"), 3723)
        XCTAssertEqual(YouTubeImport.seconds("PT45S"), 45)
        XCTAssertEqual(YouTubeImport.seconds("PT10M"), 600, "M after T is minutes")
        XCTAssertEqual(YouTubeImport.seconds("P1DT2H"), 93_600)
        XCTAssertEqual(YouTubeImport.seconds("P1W"), 604_800)
        XCTAssertEqual(YouTubeImport.seconds("P1M"), 2_592_000, "M before T is a month of 30 days")
        XCTAssertNil(YouTubeImport.seconds("1H"))
        XCTAssertNil(YouTubeImport.seconds("PT1.5S"))
        XCTAssertNil(YouTubeImport.seconds(""))
    }
}
