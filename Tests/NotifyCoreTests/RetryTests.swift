@testable import NotifyCore
import XCTest

/// How long a delivery that failed waits before it is tried again, and when it is given up.
final class RetryTests: XCTestCase {
    func testTheWaitDoublesFromHalfAMinuteUpToAnHour() {
        XCTAssertEqual(Deliveries.retryDelay(after: 1), 30)
        XCTAssertEqual(Deliveries.retryDelay(after: 2), 60)
        XCTAssertEqual(Deliveries.retryDelay(after: 3), 120)
        XCTAssertEqual(Deliveries.retryDelay(after: 0), 30, "no try yet counts as the first")
        let last = Deliveries.maxAttempts - 1
        XCTAssertLessThanOrEqual(Deliveries.retryDelay(after: last) ?? .infinity, 3600)
    }

    func testADeliveryIsGivenUpAfterItsLastAttempt() {
        XCTAssertNil(Deliveries.retryDelay(after: Deliveries.maxAttempts))
        XCTAssertNil(Deliveries.retryDelay(after: Deliveries.maxAttempts + 5))
    }
}
