@testable import ChatCore
import XCTest

/// Who a message names, and so who is told of it: `@name` at a word's start, once each, never an address.
final class MentionTests: XCTestCase {
    func testEachNameOnceLowerCasedWithoutTrailingDots() {
        XCTAssertEqual(Messages.mentions(in: "@Ana and @bob. Thanks @ana!"), ["ana", "bob"])
        XCTAssertEqual(Messages.mentions(in: "(@carla) @d-e_f.g"), ["carla", "d-e_f.g"])
    }

    func testAnAddressOrADoubleAtNamesNobody() {
        XCTAssertEqual(Messages.mentions(in: "mail ana@example.com or @@bob"), [])
        XCTAssertEqual(Messages.mentions(in: "@"), [])
    }

    func testAtMostTwentyNamesAreTold() {
        let text = (0..<30).map { "@user\($0)" }.joined(separator: " ")
        XCTAssertEqual(Messages.mentions(in: text), (0..<20).map { "user\($0)" })
    }
}
