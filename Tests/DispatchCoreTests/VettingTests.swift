import Foundation
@testable import DispatchCore
import Models
import XCTest

/// The vetting rules without a database: which decision applies from where, and what a refusal says.
final class VettingTests: XCTestCase {
    func testEachDecisionAppliesOnlyFromWhereTheCourierStands() {
        let expected: [CourierVettingDecision: (Set<VettingStatus>, VettingStatus)] = [
            .applied: ([.unvetted, .pending, .rejected], .pending), .approved: ([.pending], .approved),
            .rejected: ([.pending], .rejected), .suspended: ([.approved], .suspended), .reinstated: ([.suspended], .approved),
        ]
        for decision in CourierVettingDecision.allCases {
            let (from, to) = Vetting.transition(decision)
            XCTAssertEqual(from, expected[decision]?.0, "\(decision)")
            XCTAssertEqual(to, expected[decision]?.1, "\(decision)")
        }
        // Only approval and reinstatement lead to approved, and nothing reaches it from rejected or unvetted directly.
        let toApproved = CourierVettingDecision.allCases.filter { Vetting.transition($0).to == .approved }
        XCTAssertEqual(Set(toApproved), [.approved, .reinstated])
        XCTAssertTrue(toApproved.allSatisfy { Vetting.transition($0).from.isDisjoint(with: [.unvetted, .rejected]) })
    }

    func testRefusalsSayWhyWithTheirStatusAndField() {
        XCTAssertEqual(VettingError.notApproved(.suspended).refusal, .forbidden)
        XCTAssertTrue(VettingError.notApproved(.suspended).message.contains("suspended"))
        XCTAssertTrue(VettingError.notApproved(.rejected).message.contains("apply again"))
        XCTAssertEqual(VettingError.notNow(.approved, .approved).refusal, .conflict)
        XCTAssertEqual(VettingError.consentMissing.field, "consent")
        XCTAssertEqual(VettingError.notYourImage(field: "identityPhotoMediaId", purpose: "identity").field, "identityPhotoMediaId")
        XCTAssertEqual(VettingError.reasonMissing.refusal, .invalid)
    }
}
