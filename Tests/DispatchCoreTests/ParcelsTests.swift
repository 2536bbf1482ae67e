import Foundation
@testable import DispatchCore
import Models
import XCTest

final class ParcelLifecycleTests: XCTestCase {
    /// Every pair of status and action: exactly these transitions exist.
    func testEveryAllowedAndForbiddenTransition() {
        let allowed: [ParcelStatus: [ParcelAction: ParcelStatus]] = [
            .awaitingPayment: [.paymentAuthorised: .awaitingCourier, .paymentDeclined: .cancelled, .cancel: .cancelled],
            .awaitingDropOff: [.checkIn: .awaitingCourier, .paymentDeclined: .cancelled, .cancel: .cancelled],
            .awaitingCourier: [.offer: .offered, .cancel: .cancelled],
            .offered: [.accept: .assigned, .decline: .awaitingCourier, .expire: .awaitingCourier, .cancel: .cancelled],
            .assigned: [.pickup: .pickedUp, .fail: .failed, .cancel: .cancelled],
            .pickedUp: [.depart: .inTransit, .deliver: .delivered, .handOver: .received, .leaveAtCentre: .readyForCollection, .fail: .failed],
            .inTransit: [.deliver: .delivered, .handOver: .received, .leaveAtCentre: .readyForCollection, .fail: .failed],
            .delivered: [.confirm: .received], .readyForCollection: [.collect: .received],
            .received: [:], .cancelled: [:], .failed: [:],
        ]
        for status in ParcelStatus.allCases {
            for action in ParcelAction.allCases {
                XCTAssertEqual(ParcelLifecycle.next(from: status, on: action), allowed[status]?[action], "\(status) + \(action)")
            }
        }
        XCTAssertEqual(ParcelStatus.allCases.filter(ParcelLifecycle.isFinal), [.received, .cancelled, .failed])
    }

    func testEachActionBelongsToOneKindOfActor() {
        XCTAssertEqual(ParcelAction.allCases.filter { $0.actor == .courier }, [.accept, .decline, .pickup, .deliver, .handOver, .fail, .leaveAtCentre])
        XCTAssertEqual(ParcelAction.allCases.filter { $0.actor == .staff }, [.checkIn, .collect])
        XCTAssertEqual(ParcelAction.allCases.filter { $0.actor == .system }, [.paymentAuthorised, .paymentDeclined, .offer, .expire, .depart])
        XCTAssertEqual(ParcelAction.cancel.actor, .sender)
        XCTAssertEqual(ParcelAction.confirm.actor, .recipient)
    }

    func testCancellingIsPossibleOnlyBeforePickup() {
        let beforePickup: Set<ParcelStatus> = [.awaitingPayment, .awaitingDropOff, .awaitingCourier, .offered, .assigned]
        for status in ParcelStatus.allCases {
            XCTAssertEqual(ParcelLifecycle.next(from: status, on: .cancel) != nil, beforePickup.contains(status), "\(status)")
        }
    }
}

final class TariffTests: XCTestCase {
    func testPricesGrowWithDistanceServiceAndInsurance() {
        let t = Tariff()
        let standard = t.quote(meters: 10_000, service: .standard, insured: false)
        XCTAssertEqual(standard.amountMinor, 300 + 800)
        XCTAssertEqual(standard.currency, "EUR")
        XCTAssertEqual(standard.distanceMeters, 10_000)
        let express = t.quote(meters: 10_000, service: .express, insured: false)
        XCTAssertEqual(express.amountMinor, 1650)
        XCTAssertLessThan(express.etaSeconds, standard.etaSeconds, "express is dispatched sooner")
        XCTAssertEqual(t.quote(meters: 10_000, service: .express, insured: true).amountMinor, 1800)
        XCTAssertEqual(t.quote(meters: 0, service: .standard, insured: false).amountMinor, 300)
        XCTAssertEqual(t.quote(meters: 1, service: .standard, insured: false).amountMinor, 301, "rounded up to a whole cent")
        XCTAssertGreaterThan(t.quote(meters: 20_000, service: .standard, insured: false).etaSeconds, standard.etaSeconds)
    }
}
