import Foundation

/// A pass/fail condition on a run's figures, as k6 has them: `offered.p99<50ms`, `created.rate>=9.5`,
/// `errors.count<1`. Latencies (`offered`, `assigned`, `create`, `fix`, `batch`, `accept`) take `p50`, `p90`,
/// `p95`, `p99`, `max`, `mean` or `count`, in milliseconds; `created`, `assigned` and `fixes` take `rate` (per
/// second); `errors` takes `count`.
struct Threshold: Codable, Sendable {
    let expression: String
    let metric: String
    let figure: String
    let op: String
    let value: Double

    static let latencies = ["offered", "assigned", "create", "fix", "batch", "accept"]

    init(_ text: String) throws {
        let compact = text.replacingOccurrences(of: " ", with: "")
        guard let op = ["<=", ">=", "<", ">"].first(where: { compact.contains($0) }), let at = compact.range(of: op) else {
            throw UsageError("--threshold \"\(text)\" needs a comparison: <, <=, > or >=, as in offered.p99<50ms")
        }
        let left = compact[..<at.lowerBound].split(separator: ".").map(String.init)
        var right = String(compact[at.upperBound...])
        for unit in ["ms", "/s"] where right.hasSuffix(unit) { right.removeLast(unit.count) }
        guard left.count == 2, let value = Double(right), value.isFinite else {
            throw UsageError("--threshold \"\(text)\" must read metric.figure, a comparison and a number, as in offered.p99<50ms")
        }
        let (metric, figure) = (left[0], left[1])
        let known = Self.latencies.contains(metric) && ["p50", "p90", "p95", "p99", "max", "mean", "count"].contains(figure)
            || ["created", "assigned", "fixes"].contains(metric) && figure == "rate" || metric == "errors" && figure == "count"
        guard known else {
            throw UsageError("--threshold \"\(text)\": no figure \(metric).\(figure) (latencies \(Self.latencies.joined(separator: ", ")) "
                             + "take p50, p90, p95, p99, max, mean, count; created, assigned, fixes take rate; errors takes count)")
        }
        expression = compact; self.metric = metric; self.figure = figure; self.op = op; self.value = value
    }

    /// What the run measured for it.
    func actual(in r: Report) -> Double {
        switch (metric, figure) {
        case ("created", "rate"): return r.parcelsPerSecond
        case ("assigned", "rate"): return r.assignedPerSecond
        case ("fixes", "rate"): return r.fixesPerSecond
        case ("errors", _): return Double(r.errors.values.reduce(0, +))
        default: return r.latency(metric)?.figure(figure) ?? .nan
        }
    }

    func holds(_ actual: Double) -> Bool {
        switch op {
        case "<": return actual < value
        case "<=": return actual <= value
        case ">": return actual > value
        default: return actual >= value
        }
    }
}

/// A threshold and how the run fared against it.
struct ThresholdResult: Codable {
    let expression: String
    let actual: Double
    let ok: Bool
}

extension Report {
    /// The latency distribution a threshold or a comparison names.
    func latency(_ name: String) -> Distribution? {
        switch name {
        case "offered": return dispatchOfferedMs
        case "assigned": return dispatchAssignedMs
        case "create": return createMs
        case "fix": return courierFixMs
        case "batch": return fleetBatchMs
        case "accept": return acceptMs
        default: return nil
        }
    }
}
