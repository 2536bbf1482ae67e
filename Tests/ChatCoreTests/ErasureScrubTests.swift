@testable import ChatCore
import Foundation
import XCTest

/// What a stream replays of an erased account: their person objects lose name and face, and their id is nobody's.
final class ErasureScrubTests: XCTestCase {
    let nobody = "00000000-0000-0000-0000-000000000000"

    func testTheErasedPersonIsNobodyAndOthersStayAsTheyWere() {
        let user = UUID(), other = UUID().uuidString.lowercased()
        let body = """
            {"author":{"id":"\(user.uuidString)","name":"Ann","avatarUrl":"https://x/a.jpg","avatarMediaId":"m1"},\
            "mentions":["\(user.uuidString.lowercased())","\(other)"],"text":"hi \(user.uuidString.lowercased())",\
            "by":{"id":"\(other)","name":"Ben","avatarUrl":"https://x/b.jpg"}}
            """
        XCTAssertEqual(AccountErasure.scrub(body, user), """
            {"author":{"avatarMediaId":null,"avatarUrl":null,"id":"\(nobody)","name":null},\
            "by":{"avatarUrl":"https://x/b.jpg","id":"\(other)","name":"Ben"},"mentions":["\(nobody)","\(other)"],\
            "text":"hi \(user.uuidString.lowercased())"}
            """, "an id is replaced where it is a value, not inside a text")
    }

    func testWhatIsNotJSONBecomesAnEmptyObject() {
        XCTAssertEqual(AccountErasure.scrub("not json", UUID()), "{}")
        XCTAssertEqual(AccountErasure.scrub(#"{"seq":3}"#, UUID()), #"{"seq":3}"#)
    }
}
