import Foundation

/// What the run observed, shared by its threads.
///
/// `@unchecked Sendable`: every member is guarded by `lock`.
final class Stats: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var errors: [String: Int] = [:]
    private(set) var createMs: [Double] = []
    private(set) var fixMs: [Double] = []        // one courier's own fix, round trip
    private(set) var batchMs: [Double] = []      // an operator batch, round trip
    private(set) var acceptMs: [Double] = []
    private(set) var fixesSent = 0
    private(set) var fixesApplied = 0
    private(set) var parcels: [CreatedParcel] = []
    private(set) var accepted: [String: [String]] = [:]  // parcel → couriers whose accept got 200

    struct CreatedParcel: Sendable {
        let id: String
        let sender: Int
        let pickup: (lat: Double, lon: Double)
        let express: Bool
    }

    func with<T>(_ body: (Stats) -> T) -> T { lock.lock(); defer { lock.unlock() }; return body(self) }

    func error(_ kind: String) { lock.lock(); errors[kind, default: 0] += 1; lock.unlock() }
    func created(_ parcel: CreatedParcel, ms: Double) { lock.lock(); parcels.append(parcel); createMs.append(ms); lock.unlock() }
    func fix(ms: Double, applied: Bool) {
        lock.lock(); fixMs.append(ms); fixesSent += 1; if applied { fixesApplied += 1 }; lock.unlock()
    }
    func batch(ms: Double, sent: Int, applied: Int) {
        lock.lock(); batchMs.append(ms); fixesSent += sent; fixesApplied += applied; lock.unlock()
    }
    func accept(_ parcel: String, by courier: String, ms: Double) {
        lock.lock(); accepted[parcel, default: []].append(courier); acceptMs.append(ms); lock.unlock()
    }

    var parcelCount: Int { lock.lock(); defer { lock.unlock() }; return parcels.count }
    var acceptedCount: Int { lock.lock(); defer { lock.unlock() }; return accepted.count }
    var fixCount: Int { lock.lock(); defer { lock.unlock() }; return fixesSent }
    var errorCount: Int { lock.lock(); defer { lock.unlock() }; return errors.values.reduce(0, +) }
}

/// Percentiles by nearest rank.
struct Distribution: Codable {
    let count: Int
    let p50: Double
    let p90: Double
    let p99: Double
    let max: Double
    let mean: Double

    init(_ values: [Double]) {
        let s = values.sorted()
        count = s.count
        func rank(_ q: Double) -> Double { s.isEmpty ? 0 : s[Swift.max(0, Int((q * Double(s.count)).rounded(.up)) - 1)] }
        p50 = rank(0.5); p90 = rank(0.9); p99 = rank(0.99); max = s.last ?? 0
        mean = s.isEmpty ? 0 : s.reduce(0, +) / Double(s.count)
    }
}
