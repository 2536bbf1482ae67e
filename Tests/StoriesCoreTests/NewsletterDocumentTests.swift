@testable import StoriesCore
import Foundation
import Web
import XCTest

/// The newsletter is written by hand for speed and read back (stored newsletters as HTML) by `Decodable`: the two
/// must agree on every field, and leave out what is nil as the rest of the API does.
final class NewsletterDocumentTests: XCTestCase {
    func testTheWrittenDocumentReadsBackAsTheSameDocument() throws {
        typealias D = NewsletterDocument
        let story = D.Story(id: "s1", text: "quote \" backslash \\ newline \n tab \t bell \u{07} é 😀 </script>",
                            backgroundColor: "#AABBCC", media: [.init(id: "m1", url: "/v1/media/m1"), .init(id: "m2", url: "/v1/media/m2")],
                            commentCount: 3, createdAt: "2026-11-30T12:00:00.000Z", updatedAt: "2026-11-30T12:05:00.000Z")
        let plain = D.Story(id: "s2", text: "", backgroundColor: nil, media: [], commentCount: 0, createdAt: "2026-11-30T13:00:00.000Z",
                            updatedAt: "2026-11-30T13:00:00.000Z")
        let doc = D(groupId: "g", groupName: "Family \"B\"", period: .init(from: "a", to: "b", timeZone: "Europe/Berlin"), storyCount: 2,
                    members: [
                        .init(id: "u1", fullName: "Ann", avatarMediaId: "m9", isMember: true,
                              days: [.init(date: "2026-11-30", stories: [story, plain]), .init(date: "2026-12-01", stories: [])]),
                        .init(id: "u2", fullName: nil, avatarMediaId: nil, isMember: false, days: []),
                    ])
        let bytes = JSON.encode(doc)
        XCTAssertEqual(try JSONDecoder().decode(D.self, from: Data(bytes)), doc)
        XCTAssertNotNil(try JSONSerialization.jsonObject(with: Data(bytes)), "valid JSON")

        let empty = D(groupId: "g", groupName: "n", period: .init(from: "a", to: "b", timeZone: "UTC"), storyCount: 0,
                      members: [.init(id: "u", fullName: nil, avatarMediaId: nil, isMember: true, days: [])])
        XCTAssertEqual(String(decoding: JSON.encode(empty), as: UTF8.self), #"""
            {"groupId":"g","groupName":"n","period":{"from":"a","to":"b","timeZone":"UTC"},"storyCount":0,"members":[{"id":"u","isMember":true,"days":[]}]}
            """#, "keys in the API's order, nil fields left out, no spaces")

        let stored = #"{"id":"s3","text":"t","media":[],"commentCount":0,"createdAt":"2026-11-30T14:00:00.000Z"}"#
        let old = try JSONDecoder().decode(D.Story.self, from: Data(stored.utf8))
        XCTAssertEqual(String(decoding: JSON.encode(old), as: UTF8.self), #"""
            {"id":"s3","text":"t","media":[],"commentCount":0,"createdAt":"2026-11-30T14:00:00.000Z","updatedAt":"2026-11-30T14:00:00.000Z"}
            """#, "a story stored before its updatedAt was kept shows its creation")
    }
}
