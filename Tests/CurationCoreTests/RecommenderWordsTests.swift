@testable import CurationCore
import XCTest

/// The words recommendations compare videos by: what a title says, not how it is written.
final class RecommenderWordsTests: XCTestCase {
    func testCommonWordsAndCaseAndPluralsDoNotCount() {
        XCTAssertEqual(Recommender.tokens("An Introduction to the Fractions of Numbers"), ["fraction", "number"])
        XCTAssertEqual(Recommender.tokens("Class glass: gas laws"), ["class", "glass", "gas", "law"])
    }

    func testDigitsAndLettersOfOtherScriptsAreWordsAndPunctuationSplits() {
        XCTAssertEqual(Recommender.tokens("x²+y² = r², cercle/círculo"), ["x²", "y²", "r²", "cercle", "círculo"])
        XCTAssertEqual(Recommender.tokens("Year 10 maths; 2024 exam"), ["year", "10", "math", "2024", "exam"])
    }
}
