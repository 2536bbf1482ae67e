import Foundation

/// What the run observed, shared by its threads.
///
/// `@unchecked Sendable`: every member is guarded by `lock`.
final class Stats: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var errors: [String: Int] = [:]
    private(set) var fixesSent = 0
    private(set) var fixesApplied = 0
    private(set) var parcels: [CreatedParcel] = []
    private(set) var accepted: [String: [String]] = [:]  // parcel → couriers whose accept got 200
    /// When the drive began: the seconds of the series count from it.
    private var start = Date()
    /// Per second of the drive: what happened, and the round trips of that second.
    private(set) var seconds: [Int: Bucket] = [:]

    struct Bucket {
        var created = 0, assigned = 0, fixes = 0, errors = 0
        var ms: [String: [Double]] = [:]
    }

    struct CreatedParcel: Sendable {
        let id: String
        let sender: Int
        let pickup: (lat: Double, lon: Double)
        let express: Bool
        /// The second of the drive it was created in.
        let second: Int
    }

    func with<T>(_ body: (Stats) -> T) -> T { lock.lock(); defer { lock.unlock() }; return body(self) }

    /// The drive begins now.
    func begin() { lock.lock(); start = Date(); lock.unlock() }
    /// The second of the drive now (call with the lock held).
    private var now: Int { max(0, Int(Date().timeIntervalSince(start))) }
    var second: Int { lock.lock(); defer { lock.unlock() }; return now }

    /// Round trips of the whole run, from the seconds' (read inside `with`): creations, couriers' own fixes,
    /// operator batches of fixes, accepts.
    var createMs: [Double] { samples("create") }
    var fixMs: [Double] { samples("fix") }
    var batchMs: [Double] { samples("batch") }
    var acceptMs: [Double] { samples("accept") }
    private func samples(_ kind: String) -> [Double] { seconds.values.flatMap { $0.ms[kind] ?? [] } }

    /// Counts what happened in this second of the drive, and the round trip of `kind`.
    private func tick(_ kind: String? = nil, ms: Double = 0, _ change: (inout Bucket) -> Void) {
        let t = now
        change(&seconds[t, default: .init()])
        if let kind { seconds[t, default: .init()].ms[kind, default: []].append(ms) }
    }

    func error(_ kind: String) { lock.lock(); errors[kind, default: 0] += 1; tick { $0.errors += 1 }; lock.unlock() }
    func created(_ parcel: CreatedParcel, ms: Double) {
        lock.lock(); parcels.append(parcel); tick("create", ms: ms) { $0.created += 1 }; lock.unlock()
    }
    func fix(ms: Double, applied: Bool) {
        lock.lock(); fixesSent += 1; if applied { fixesApplied += 1 }; tick("fix", ms: ms) { $0.fixes += 1 }; lock.unlock()
    }
    func batch(ms: Double, sent: Int, applied: Int) {
        lock.lock(); fixesSent += sent; fixesApplied += applied; tick("batch", ms: ms) { $0.fixes += sent }; lock.unlock()
    }
    func accept(_ parcel: String, by courier: String, ms: Double) {
        lock.lock(); accepted[parcel, default: []].append(courier); tick("accept", ms: ms) { $0.assigned += 1 }; lock.unlock()
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
    let p95: Double?
    let p99: Double
    let max: Double
    let mean: Double

    init(_ values: [Double]) {
        let s = values.sorted()
        count = s.count
        func rank(_ q: Double) -> Double { s.isEmpty ? 0 : s[Swift.max(0, Int((q * Double(s.count)).rounded(.up)) - 1)] }
        p50 = rank(0.5); p90 = rank(0.9); p95 = rank(0.95); p99 = rank(0.99); max = s.last ?? 0
        mean = s.isEmpty ? 0 : s.reduce(0, +) / Double(s.count)
    }

    /// One of its figures by name (`p50`, `p90`, `p95`, `p99`, `max`, `mean`, `count`).
    func figure(_ name: String) -> Double? {
        switch name {
        case "p50": return p50
        case "p90": return p90
        case "p95": return p95 ?? p99
        case "p99": return p99
        case "max": return max
        case "mean": return mean
        case "count": return Double(count)
        default: return nil
        }
    }
}

/// One second of the drive, as the report's time series gives it: what happened in it, and the percentiles of the
/// round trips made in it (`offered`, `assigned`: of the parcels created in it, on the service's clock).
struct SecondOfRun: Codable {
    struct Percentiles: Codable {
        let count: Int
        let p50: Double
        let p95: Double
        let p99: Double
        init(_ d: Distribution) { count = d.count; p50 = d.p50; p95 = d.p95 ?? d.p99; p99 = d.p99 }
    }
    let t: Int
    let created: Int
    let assigned: Int
    let fixes: Int
    let errors: Int
    let latencyMs: [String: Percentiles]
}
