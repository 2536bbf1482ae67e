import Foundation
import HTTP
import Synchronization

/// Prometheus metrics: request duration histograms by route and status, counters, and gauges read at scrape time.
///
public final class Metrics: Sendable {
    /// Histogram bucket bounds in seconds.
    public static let buckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    private struct Histogram {
        var counts = [Int](repeating: 0, count: Metrics.buckets.count)
        var sum = 0.0
        var count = 0

        mutating func record(_ seconds: Double) {
            for (i, bound) in Metrics.buckets.enumerated() where seconds <= bound { counts[i] += 1 }
            sum += seconds
            count += 1
        }

        mutating func add(_ other: Histogram) {
            for i in counts.indices { counts[i] += other.counts[i] }
            sum += other.sum
            count += other.count
        }
    }

    private struct State {
        var counters: [String: [String: Double]] = [:]
        var help: [String: String] = [:]
        var gauges: [@Sendable () -> [(name: String, labels: String, value: Double)]] = []
    }
    private let state = Mutex(State())
    /// Request histograms, in 16 shards picked by the recording thread: every request records one, from all the
    /// server's threads at once, and one shared lock made them queue (a fifth of `GET /healthz`'s CPU).
    private let histograms = Sharded<[RequestKind: Histogram]>(count: 16) { [:] }

    /// What a request histogram is kept for; its label text is written only when scraped.
    private struct RequestKind: Hashable {
        let method: String, route: String, status: Int
        var labels: String { "method=\"\(method)\",route=\"\(Metrics.escape(route))\",status=\"\(status)\"" }
    }

    private var currentShard: Int {
        var h = UInt64(pthread_self())
        h = (h ^ (h >> 33)) &* 0xff51_afd7_ed55_8ccd
        return Int(truncatingIfNeeded: h ^ (h >> 33))
    }

    public init() {}

    /// Records one served request (`http_server_request_duration_seconds`, whose `_count` is the request count).
    public func observeRequest(method: String, route: String, status: Int, seconds: Double) {
        histograms.withLock(currentShard) { $0[RequestKind(method: method, route: route, status: status), default: Histogram()].record(seconds) }
    }

    /// Adds to a counter; `labels` is Prometheus label text such as `topic="user.registered"`.
    public func increment(_ name: String, labels: String = "", by value: Double = 1, help text: String = "") {
        state.withLock { s in
            s.counters[name, default: [:]][labels, default: 0] += value
            if !text.isEmpty { s.help[name] = text }
        }
    }

    /// Registers a gauge source read at every scrape; `help`: each gauge's description (`# HELP`, which
    /// `promtool check metrics` asks of every metric).
    public func addGauges(help: [String: String], _ source: @escaping @Sendable () -> [(name: String, labels: String, value: Double)]) {
        state.withLock { s in
            s.gauges.append(source)
            s.help.merge(help) { $1 }
        }
    }

    /// The Prometheus text exposition.
    public func render() -> String {
        let (counters, help, gauges) = state.withLock { ($0.counters, $0.help, $0.gauges) }
        var histograms: [String: Histogram] = [:]
        for shard in self.histograms.values {
            for (kind, h) in shard { histograms[kind.labels, default: Histogram()].add(h) }
        }
        var out = "# HELP http_server_request_duration_seconds Duration of HTTP requests by route and status.\n"
        out += "# TYPE http_server_request_duration_seconds histogram\n"
        for labels in histograms.keys.sorted() {
            let h = histograms[labels]!
            for (i, bound) in Self.buckets.enumerated() {
                out += "http_server_request_duration_seconds_bucket{\(labels),le=\"\(bound)\"} \(h.counts[i])\n"
            }
            out += "http_server_request_duration_seconds_bucket{\(labels),le=\"+Inf\"} \(h.count)\n"
            out += "http_server_request_duration_seconds_sum{\(labels)} \(h.sum)\n"
            out += "http_server_request_duration_seconds_count{\(labels)} \(h.count)\n"
        }
        for name in counters.keys.sorted() {
            if let text = help[name] { out += "# HELP \(name) \(text)\n" }
            out += "# TYPE \(name) counter\n"
            for (labels, value) in counters[name]!.sorted(by: { $0.key < $1.key }) {
                out += labels.isEmpty ? "\(name) \(value)\n" : "\(name){\(labels)} \(value)\n"
            }
        }
        var seen = Set<String>()
        for source in gauges {
            for g in source() {
                if seen.insert(g.name).inserted {
                    if let text = help[g.name] { out += "# HELP \(g.name) \(text)\n" }
                    out += "# TYPE \(g.name) gauge\n"
                }
                out += g.labels.isEmpty ? "\(g.name) \(g.value)\n" : "\(g.name){\(g.labels)} \(g.value)\n"
            }
        }
        return out
    }

    /// A label value as the text format writes it: backslash, double quote and line feed escaped.
    public static func escape(_ s: String) -> String {
        guard s.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\n") }) else { return s }
        return s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}
