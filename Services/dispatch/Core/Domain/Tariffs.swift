import Foundation
import Models
import Postgres
import Synchronization
import Web

/// A tariff: a base fare and a rate per kilometre, express costing `expressBasisPoints` / 10,000 of the standard
/// price, insurance a flat fee; in force from `effectiveFrom` until the next tariff's. Operators set tariffs as data
/// (`dispatch.tariffs`); `Tariff()` is the one migration 24 seeds, in force until an operator sets another.
///
/// Money stays exact: the distance is charged by the whole metre (the `distanceMeters` the quote shows), the price
/// is computed in integers and rounded up to a whole minor unit once, before insurance (itself whole) is added.
public struct Tariff: Sendable, Equatable {
    /// Its row (nil for the unsaved default).
    public var id: UUID?
    public var currency = "EUR"
    public var baseMinor = 300
    public var perKmMinor = 80
    /// Express's price as basis points of the standard price: 15,000 is half as much again.
    public var expressBasisPoints = 15_000
    public var insuranceMinor = 150
    public var effectiveFrom = Date(timeIntervalSince1970: 0)

    /// Average courier speed in town, metres per second: an estimate of arrival, not a price, so not in the table.
    public static let speedMps = 6.0
    /// Time to get a courier to the pickup (express is dispatched sooner).
    public static let dispatchSeconds: [ParcelService: Int] = [.express: 600, .standard: 1800]

    public init() {}

    public init(id: UUID?, currency: String, baseMinor: Int, perKmMinor: Int, expressBasisPoints: Int, insuranceMinor: Int,
                effectiveFrom: Date) {
        self.id = id; self.currency = currency; self.baseMinor = baseMinor; self.perKmMinor = perKmMinor
        self.expressBasisPoints = expressBasisPoints; self.insuranceMinor = insuranceMinor; self.effectiveFrom = effectiveFrom
    }

    /// The price of `meters`, in minor units: base + meters × perKm / 1,000, times the express factor, rounded up,
    /// plus insurance. Within the limits a tariff's body allows, no product overflows.
    public func priceMinor(meters: Int, service: ParcelService, insured: Bool, benefits: [PlanBenefit] = []) -> Int {
        var numerator = baseMinor * 1_000 + max(0, meters) * perKmMinor, denominator = 1_000
        if service == .express && !benefits.contains(.expressAtStandardPrice) {
            numerator *= expressBasisPoints
            denominator *= 10_000
        }
        let amount = (numerator + denominator - 1) / denominator
        return insured && !benefits.contains(.insuranceIncluded) ? amount + insuranceMinor : amount
    }

    /// The parts of `priceMinor`'s price, adding up to it: the base fare, the distance, express's supplement, insurance
    /// (a part a plan's benefit made free shows at 0). Nil when no set of benefits gives `amountMinor` (a price this
    /// tariff did not make).
    public func parts(of amountMinor: Int, meters: Int, service: ParcelService, insured: Bool) -> [ReceiptLine]? {
        let km = String(format: "%.1f", Double(meters) / 1000)
        let standard = priceMinor(meters: meters, service: .standard, insured: false)
        for benefits in [[], [PlanBenefit.expressAtStandardPrice], [.insuranceIncluded], [.expressAtStandardPrice, .insuranceIncluded]]
        where priceMinor(meters: meters, service: service, insured: insured, benefits: benefits) == amountMinor {
            var lines = [ReceiptLine(description: "Base fare", amountMinor: baseMinor),
                         ReceiptLine(description: "Distance, \(km) km", amountMinor: standard - baseMinor)]
            if service == .express {
                let express = priceMinor(meters: meters, service: service, insured: false, benefits: benefits) - standard
                let free = benefits.contains(.expressAtStandardPrice)
                lines.append(ReceiptLine(description: free ? "Express, at the standard price with the plan" : "Express", amountMinor: express))
            }
            if insured {
                let included = benefits.contains(.insuranceIncluded)
                lines.append(ReceiptLine(description: included ? "Insurance, included in the plan" : "Insurance",
                                         amountMinor: included ? 0 : insuranceMinor))
            }
            return lines
        }
        return nil
    }

    /// The quote for `meters` of great-circle distance; `plan`: the sender's plan, whose benefits apply.
    public func quote(meters: Double, service: ParcelService, insured: Bool, plan: (id: String, benefits: [PlanBenefit])? = nil) -> Quote {
        let distance = Int(max(0, meters).rounded())
        // Streets are longer than the great circle: about 1.3 times in a city.
        let travel = Int((max(0, meters) * 1.3 / Self.speedMps).rounded(.up))
        let full = priceMinor(meters: distance, service: service, insured: insured)
        var quote = Quote(currency: currency, amountMinor: priceMinor(meters: distance, service: service, insured: insured, benefits: plan?.benefits ?? []),
                          etaSeconds: (Self.dispatchSeconds[service] ?? 1800) + travel, distanceMeters: distance)
        quote.tariffId = id
        if let plan, quote.amountMinor < full {
            quote.planId = plan.id
            quote.planSavingMinor = full - quote.amountMinor
        }
        return quote
    }
}

/// The tariffs, and which one prices what. A quote names its tariff (`tariffId`); a booking that names it again is
/// priced by it while it is in force, and for `quoteValidity` after the next tariff took its place, so a quote made
/// just before a change keeps its price that long (its `validUntil`; a booking naming nothing, or a tariff replaced
/// longer ago, is priced by the tariff in force). Nothing about a quote is stored: a client naming an older tariff
/// gets no more than a quote made in its last minutes would have given.
///
/// Every instance keeps the list in memory and reads it again when it is a second old (the table is a few rows; a
/// quote does not query it): an instance other than the operator's learns of a new tariff within a second.
final class TariffBook: Sendable {
    /// How long a quote's price is kept after its tariff is replaced.
    static let quoteValidity: TimeInterval = 15 * 60
    static let freshFor: TimeInterval = 1

    private let cached = Mutex<(tariffs: [Tariff], at: Date)?>(nil)

    enum Refused: DomainError, Equatable {
        case unknown, expired, retroactive, sameTime
        var refusal: Refusal { self == .unknown || self == .retroactive ? .invalid : .conflict }
        var field: String? { self == .unknown || self == .expired ? "tariffId" : "effectiveFrom" }
        var message: String {
            switch self {
            case .unknown: return "tariffId names no tariff a quote was made with."
            case .expired: return "The quote's tariff was replaced more than 15 minutes ago: ask for a new quote."
            case .retroactive: return "effectiveFrom is in the past: a price never applies retroactively."
            case .sameTime: return "Another tariff (or price of this plan) takes effect at that very time."
            }
        }
    }

    /// Every tariff, the earliest effective first.
    func all(_ c: Connection, fresh: Bool = false) throws -> [Tariff] {
        let now = Date()
        if !fresh, let cached = cached.withLock({ $0 }), now.timeIntervalSince(cached.at) < Self.freshFor { return cached.tariffs }
        let tariffs = try DispatchStorage().tariffs(c)
        cached.withLock { $0 = (tariffs, now) }
        return tariffs
    }

    /// Read the table again at the next quote (this instance just changed it).
    func forget() { cached.withLock { $0 = nil } }

    /// The tariff in force at `time`: the one effective last at or before it.
    func inForce(_ c: Connection, at time: Date = Date()) throws -> Tariff {
        try Self.inForce(all(c), at: time)
    }

    static func inForce(_ tariffs: [Tariff], at time: Date) -> Tariff {
        tariffs.last { $0.effectiveFrom <= time } ?? Tariff()
    }

    /// The tariff a booking at `time` is priced by: the one its quote named (`id`) while that quote holds, else the
    /// one in force.
    func forBooking(_ c: Connection, quoted id: UUID?, at time: Date = Date()) throws -> Tariff {
        guard let id else { return try inForce(c, at: time) }
        var tariffs = try all(c)
        if !tariffs.contains(where: { $0.id == id }) { tariffs = try all(c, fresh: true) }  // set on another instance just now
        return try Self.forBooking(tariffs, quoted: id, at: time)
    }

    static func forBooking(_ tariffs: [Tariff], quoted id: UUID, at time: Date) throws -> Tariff {
        guard let i = tariffs.firstIndex(where: { $0.id == id }), tariffs[i].effectiveFrom <= time else { throw Refused.unknown }
        if i + 1 < tariffs.count, tariffs[i + 1].effectiveFrom <= time.addingTimeInterval(-quoteValidity) { throw Refused.expired }
        return tariffs[i]
    }
}
