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
            .assigned: [.pickup: .pickedUp, .withdraw: .awaitingCourier, .fail: .failed, .cancel: .cancelled],
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
        XCTAssertEqual(ParcelAction.allCases.filter { $0.actor == .system }, [.paymentAuthorised, .paymentDeclined, .offer, .expire, .withdraw, .depart])
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
    /// A receipt's parts of a price, as each combination of service, insurance and a plan's benefits makes it.
    func testAPricesPartsAddUpToItWhateverMadeIt() {
        let t = Tariff()  // 300 + 80 a km, express 1.5×, insurance 150
        let standard = t.priceMinor(meters: 3_217, service: .standard, insured: false)
        XCTAssertEqual(t.parts(of: standard, meters: 3_217, service: .standard, insured: false),
                       [ReceiptLine(description: "Base fare", amountMinor: 300), ReceiptLine(description: "Distance, 3.2 km", amountMinor: 258)])
        let express = t.priceMinor(meters: 3_217, service: .express, insured: true)
        XCTAssertEqual(t.parts(of: express, meters: 3_217, service: .express, insured: true)?.map(\.amountMinor), [300, 258, 279, 150])
        XCTAssertEqual(t.parts(of: express, meters: 3_217, service: .express, insured: true)?.reduce(0) { $0 + $1.amountMinor }, express)
        let withPlan = t.priceMinor(meters: 3_217, service: .express, insured: true, benefits: PlanBenefit.allCases)
        XCTAssertEqual(t.parts(of: withPlan, meters: 3_217, service: .express, insured: true),
                       [ReceiptLine(description: "Base fare", amountMinor: 300), ReceiptLine(description: "Distance, 3.2 km", amountMinor: 258),
                        ReceiptLine(description: "Express, at the standard price with the plan", amountMinor: 0),
                        ReceiptLine(description: "Insurance, included in the plan", amountMinor: 0)])
        XCTAssertNil(t.parts(of: standard + 1, meters: 3_217, service: .standard, insured: false), "a price the tariff did not make")
    }

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

    /// Integers throughout, one rounding up: a factor of 1.1 on 380 is 418, where floating point made it 419.
    func testPricesAreExactAndRoundedUpOnce() {
        let t = Tariff(id: nil, currency: "EUR", baseMinor: 380, perKmMinor: 0, expressBasisPoints: 11_000, insuranceMinor: 0, effectiveFrom: .distantPast)
        XCTAssertEqual(t.priceMinor(meters: 0, service: .express, insured: false), 418)
        XCTAssertEqual(Tariff().priceMinor(meters: 1, service: .express, insured: false), 451, "450.12 rounded up")
        XCTAssertEqual(Tariff().priceMinor(meters: 12_500, service: .standard, insured: false), 1_300, "a whole amount stays whole")
        XCTAssertEqual(Tariff().priceMinor(meters: 10_000, service: .express, insured: true, benefits: [.expressAtStandardPrice, .insuranceIncluded]), 1_100)
        XCTAssertEqual(Tariff().quote(meters: 999.6, service: .standard, insured: false).distanceMeters, 1_000, "charged by the whole metre")
        let planned = Tariff().quote(meters: 10_000, service: .express, insured: true, plan: ("pro", [.expressAtStandardPrice, .insuranceIncluded]))
        XCTAssertEqual([planned.amountMinor, planned.planSavingMinor], [1_100, 700])
    }

    /// The tariff in force is the one effective last; a quote's tariff holds for a quarter of an hour after it is
    /// replaced; a tariff not yet in force, or unknown, prices no booking.
    func testWhichTariffPricesWhat() throws {
        let now = Date()
        func tariff(_ base: Int, _ from: Date) -> Tariff {
            Tariff(id: UUID(), currency: "EUR", baseMinor: base, perKmMinor: 80, expressBasisPoints: 15_000, insuranceMinor: 150, effectiveFrom: from)
        }
        let list = [tariff(300, Date(timeIntervalSince1970: 0)), tariff(400, now.addingTimeInterval(-600)), tariff(500, now.addingTimeInterval(3600))]
        XCTAssertEqual(TariffBook.inForce(list, at: now).baseMinor, 400)
        XCTAssertEqual(TariffBook.inForce(list, at: now.addingTimeInterval(7200)).baseMinor, 500)
        XCTAssertEqual(TariffBook.inForce([], at: now), Tariff(), "the default until one is stored")
        XCTAssertEqual(try TariffBook.forBooking(list, quoted: list[0].id!, at: now).baseMinor, 300, "replaced 10 minutes ago")
        XCTAssertThrowsError(try TariffBook.forBooking(list, quoted: list[0].id!, at: now.addingTimeInterval(300))) {
            XCTAssertEqual($0 as? TariffBook.Refused, .expired)
        }
        XCTAssertEqual(try TariffBook.forBooking(list, quoted: list[1].id!, at: now.addingTimeInterval(3600 + 899)).baseMinor, 400)
        XCTAssertThrowsError(try TariffBook.forBooking(list, quoted: list[2].id!, at: now)) { XCTAssertEqual($0 as? TariffBook.Refused, .unknown) }
        XCTAssertThrowsError(try TariffBook.forBooking(list, quoted: UUID(), at: now)) { XCTAssertEqual($0 as? TariffBook.Refused, .unknown) }
    }
}
