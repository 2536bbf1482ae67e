import Foundation

/// What a run measured and found, as the terminal summary, a JSON file and a self-contained HTML page.
struct Report: Codable {
    struct Invariant: Codable { let name: String; let ok: Bool; let detail: String }
    struct ParcelRow: Codable {
        let id: String
        let lat: Double
        let lon: Double
        let express: Bool
        let status: String
        let offeredMs: Double?
        let assignedMs: Double?
    }

    let startedAt: String
    let settings: [String: String]
    let setupSeconds: Double
    let createSeconds: Double
    let driveSeconds: Double
    let parcelsCreated: Int
    let parcelsAssigned: Int
    let parcelsPerSecond: Double
    let assignedPerSecond: Double
    let fixesSent: Int
    let fixesApplied: Int
    let fixesPerSecond: Double
    /// Parcel created → offered to a courier, on the service's clock.
    let dispatchOfferedMs: Distribution
    /// Parcel created → accepted by a courier (includes the simulated courier's reaction, ~50–100 ms of polling).
    let dispatchAssignedMs: Distribution
    let createMs: Distribution
    /// One courier's own `PUT /v1/couriers/me/location`, round trip.
    let courierFixMs: Distribution
    /// One operator batch of fixes, round trip.
    let fleetBatchMs: Distribution
    let acceptMs: Distribution
    let errors: [String: Int]
    let invariants: [Invariant]
    let parcels: [ParcelRow]
    let couriersSample: [[Double]]
    /// The run second by second.
    let series: [SecondOfRun]?
    var thresholds: [ThresholdResult]?

    /// An earlier run to show beside this one: its file's name, and its report.
    typealias Earlier = (name: String, report: Report)

    func write(to path: String, beside earlier: Earlier? = nil) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        // NaN (a threshold on a figure the run has none of) is not JSON.
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        try encoder.encode(self).write(to: URL(fileURLWithPath: path + ".json"))
        try Data(html(beside: earlier).utf8).write(to: URL(fileURLWithPath: path + ".html"))
    }

    static func read(_ path: String) throws -> Report {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return try decoder.decode(Report.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// The figures a comparison shows: name, this run's, and how to read it off a report.
    static let compared: [(String, @Sendable (Report) -> Double)] = [
        ("parcels created /s", { $0.parcelsPerSecond }), ("parcels assigned /s", { $0.assignedPerSecond }),
        ("location fixes /s", { $0.fixesPerSecond }),
        ("errors", { Double($0.errors.values.reduce(0, +)) }),
        ("created → offered p50 ms", { $0.dispatchOfferedMs.p50 }), ("created → offered p99 ms", { $0.dispatchOfferedMs.p99 }),
        ("created → assigned p50 ms", { $0.dispatchAssignedMs.p50 }), ("created → assigned p99 ms", { $0.dispatchAssignedMs.p99 }),
        ("POST /v1/parcels p99 ms", { $0.createMs.p99 }), ("accept p99 ms", { $0.acceptMs.p99 }), ("fix p99 ms", { $0.courierFixMs.p99 }),
        ("fix batch p99 ms", { $0.fleetBatchMs.p99 }),
    ]

    /// This run's figures beside `earlier`'s: name, this, earlier, this ÷ earlier.
    func comparison(_ earlier: Report) -> [(String, Double, Double, String)] {
        Self.compared.map { name, figure in
            let (a, b) = (figure(self), figure(earlier))
            return (name, a, b, b == 0 ? (a == 0 ? "1.00" : "—") : String(format: "%.2f", a / b))
        }
    }

    // MARK: - Terminal

    func summary(_ o: Options, beside earlier: Earlier? = nil) -> String {
        func row(_ name: String, _ d: Distribution) -> String {
            "  " + name.padding(toLength: 38, withPad: " ", startingAt: 0)
                + String(format: "%7d %9.1f %9.1f %9.1f %9.1f", d.count, d.p50, d.p90, d.p99, d.max)
        }
        var lines = [
            "",
            "dispatch-load: \(o.couriers) couriers (\(o.actingCouriers) acting for themselves), \(parcelsCreated) parcels",
            String(format: "  set-up %.1f s, parcels created for %.1f s, run %.1f s", setupSeconds, createSeconds, driveSeconds),
            "",
            "Throughput",
            String(format: "  parcels created   %8.1f /s (asked %.1f /s)", parcelsPerSecond, o.parcelRate),
            String(format: "  parcels assigned  %8.1f /s (%d of %d)", assignedPerSecond, parcelsAssigned, parcelsCreated),
            String(format: "  location fixes    %8.0f /s (asked %.0f /s; %d sent, %d applied)", fixesPerSecond, o.fixRate, fixesSent, fixesApplied),
            "",
            "Latency (ms)                              count       p50       p90       p99       max",
            row("dispatch: created → offered", dispatchOfferedMs),
            row("dispatch: created → assigned", dispatchAssignedMs),
            row("POST /v1/parcels", createMs),
            row("PUT /v1/couriers/me/location", courierFixMs),
            row("POST /v1/operator/locations (batch)", fleetBatchMs),
            row("accept", acceptMs),
            "",
            "Errors" + (errors.isEmpty ? ": none" : ""),
        ]
        lines += errors.sorted { $0.value > $1.value }.map { "  \($0.value)× \($0.key)" }
        lines += ["", "Invariants"] + invariants.map { "  \($0.ok ? "ok  " : "FAIL") \($0.name): \($0.detail)" }
        if let thresholds, !thresholds.isEmpty {
            lines += ["", "Thresholds"] + thresholds.map { "  \($0.ok ? "ok  " : "FAIL") \($0.expression) (was \(String(format: "%.2f", $0.actual)))" }
        }
        if let earlier {
            lines += ["", "Beside \(earlier.name)                    this run     earlier     ratio"]
            lines += comparison(earlier.report).map { name, a, b, r in
                "  " + name.padding(toLength: 32, withPad: " ", startingAt: 0) + String(format: "%12.1f %11.1f", a, b) + String(repeating: " ", count: max(1, 10 - r.count)) + r
            }
        }
        return lines.joined(separator: "\n")
    }

    // MARK: - HTML

    private static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }

    /// Two latency series as overlaid histograms.
    private func histogram() -> String {
        let offered = parcels.compactMap(\.offeredMs), assigned = parcels.compactMap(\.assignedMs)
        let top = max(1, Distribution(offered + assigned).p99 * 1.1)
        let bins = 40, width = 720.0, height = 240.0, left = 50.0, bottom = 30.0
        func counts(_ values: [Double]) -> [Int] {
            var c = Array(repeating: 0, count: bins)
            for v in values { c[min(bins - 1, max(0, Int(v / top * Double(bins))))] += 1 }
            return c
        }
        let a = counts(offered), b = counts(assigned)
        let peak = Double(max(1, (a + b).max() ?? 1))
        let bw = (width - left) / Double(bins)
        var svg = "<svg viewBox=\"0 0 \(Int(width)) \(Int(height + bottom))\" role=\"img\" aria-label=\"Dispatch latency histogram\">"
        for (series, color) in [(a, "#2b6cb0"), (b, "#dd6b20")] {
            for (i, n) in series.enumerated() where n > 0 {
                let h = Double(n) / peak * (height - 10)
                svg += String(format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%@\" fill-opacity=\"0.6\"><title>%d parcels</title></rect>",
                              left + Double(i) * bw, height - h, bw - 1, h, color, n)
            }
        }
        svg += "<line x1=\"\(left)\" y1=\"\(height)\" x2=\"\(width)\" y2=\"\(height)\" stroke=\"#444\"/>"
        for t in 0...4 {
            let x = left + (width - left) * Double(t) / 4
            svg += String(format: "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"middle\">%.0f ms</text>", x, height + 18, top * Double(t) / 4)
        }
        svg += "<text x=\"\(left)\" y=\"12\" font-size=\"11\">peak \(Int(peak)) parcels per bin; last bin holds everything slower</text></svg>"
        return svg
    }

    /// Lines over the run's seconds: each series a name, a colour and one value a second (nil: none that second).
    private func timeChart(_ label: String, unit: String, _ lines: [(String, String, [Double?])]) -> String {
        let width = 720.0, height = 200.0, left = 50.0, bottom = 24.0
        let count = max(1, lines.map(\.2.count).max() ?? 1)
        let top = max(1, lines.flatMap { $0.2.compactMap { $0 } }.max() ?? 1) * 1.1
        func x(_ i: Int) -> Double { left + (width - left - 20) * Double(i) / Double(max(1, count - 1)) }
        func y(_ v: Double) -> Double { height - v / top * (height - 10) }
        var svg = "<svg class=\"series\" viewBox=\"0 0 \(Int(width)) \(Int(height + bottom))\" role=\"img\" aria-label=\"\(Self.escape(label))\">"
        svg += "<line x1=\"\(left)\" y1=\"\(height)\" x2=\"\(width)\" y2=\"\(height)\" stroke=\"#444\"/>"
        for t in 0...4 {
            let v = top * Double(t) / 4
            svg += String(format: "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\" text-anchor=\"end\">%@</text>", left - 4, y(v) + 3,
                          v >= 100 ? String(format: "%.0f", v) : String(format: "%.1f", v))
        }
        for t in stride(from: 0, to: count, by: max(1, count / 8)) {
            svg += String(format: "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\" text-anchor=\"middle\">%d s</text>", x(t), height + 16, t)
        }
        for (name, color, values) in lines {
            // A gap where a second had none.
            var runs: [[String]] = [[]]
            for (i, v) in values.enumerated() {
                if let v { runs[runs.count - 1].append(String(format: "%.1f,%.1f", x(i), y(v))) } else if !(runs.last ?? []).isEmpty { runs.append([]) }
            }
            for points in runs where !points.isEmpty {
                svg += "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"1.5\" points=\"\(points.joined(separator: " "))\"><title>\(Self.escape(name))</title></polyline>"
            }
        }
        let legend = lines.map { "<span style=\"background:\($0.1)\"></span>\(Self.escape($0.0))" }.joined()
        return "<h3>\(Self.escape(label)) (\(unit))</h3><p class=\"legend\">\(legend)</p>" + svg + "</svg>"
    }

    /// The run over time: throughput, dispatch latency and the requests' latency, second by second.
    private func seriesCharts() -> String {
        guard let series, !series.isEmpty else { return "<p>No series in this report.</p>" }
        func count(_ f: (SecondOfRun) -> Int) -> [Double?] { series.map { Double(f($0)) } }
        func latency(_ name: String, _ figure: KeyPath<SecondOfRun.Percentiles, Double>) -> [Double?] {
            series.map { $0.latencyMs[name].map { $0[keyPath: figure] } }
        }
        return timeChart("Parcels per second", unit: "per second", [("created", "#2b6cb0", count(\.created)), ("assigned", "#2f855a", count(\.assigned)),
                                                                    ("errors", "#c53030", count(\.errors))])
            + timeChart("Location fixes per second", unit: "per second", [("fixes", "#6b46c1", count(\.fixes))])
            + timeChart("Dispatch: created → offered, by the second a parcel was created", unit: "ms",
                        [("p50", "#2b6cb0", latency("offered", \.p50)), ("p95", "#d69e2e", latency("offered", \.p95)),
                         ("p99", "#c53030", latency("offered", \.p99))])
            + timeChart("Requests, p99", unit: "ms", [("POST /v1/parcels", "#2b6cb0", latency("create", \.p99)),
                                                      ("accept", "#2f855a", latency("accept", \.p99)),
                                                      ("fix", "#6b46c1", latency("fix", \.p99)), ("fix batch", "#dd6b20", latency("batch", \.p99))])
    }

    /// Couriers (a sample) and pickups, coloured by what became of the parcel.
    private func scatter() -> String {
        let points = couriersSample + parcels.map { [$0.lat, $0.lon] }
        guard let minLat = points.map({ $0[0] }).min(), let maxLat = points.map({ $0[0] }).max(),
              let minLon = points.map({ $0[1] }).min(), let maxLon = points.map({ $0[1] }).max() else { return "<p>No points.</p>" }
        let size = 560.0
        let span = max(maxLat - minLat, (maxLon - minLon) * cos((minLat + maxLat) / 2 * .pi / 180), 1e-9)
        func xy(_ lat: Double, _ lon: Double) -> (Double, Double) {
            (10 + (lon - minLon) * cos((minLat + maxLat) / 2 * .pi / 180) / span * size, 10 + (maxLat - lat) / span * size)
        }
        var svg = "<svg viewBox=\"0 0 \(Int(size + 20)) \(Int(size + 20))\" role=\"img\" aria-label=\"Couriers and pickups\"><rect width=\"100%\" height=\"100%\" fill=\"#f7f7f2\"/>"
        for c in couriersSample {
            let (x, y) = xy(c[0], c[1])
            svg += String(format: "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"1.2\" fill=\"#999\"/>", x, y)
        }
        for p in parcels {
            let (x, y) = xy(p.lat, p.lon)
            let color = p.status == "assigned" ? "#2f855a" : p.status == "offered" ? "#d69e2e" : "#c53030"
            svg += String(format: "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%@\"><title>%@ %@</title></circle>", x, y, color,
                          p.status, p.assignedMs.map { String(format: "assigned after %.0f ms", $0) } ?? "")
        }
        return svg + "</svg>"
    }

    func html(beside earlier: Earlier? = nil) -> String {
        func row(_ name: String, _ d: Distribution) -> String {
            String(format: "<tr><td>%@</td><td>%d</td><td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td></tr>", name, d.count, d.p50, d.p90, d.p99, d.max)
        }
        let settingsRows = settings.sorted { $0.key < $1.key }.map { "<tr><td>\(Self.escape($0.key))</td><td>\(Self.escape($0.value))</td></tr>" }.joined()
        let errorRows = errors.isEmpty ? "<tr><td colspan=\"2\">none</td></tr>"
            : errors.sorted { $0.value > $1.value }.map { "<tr><td>\($0.value)</td><td>\(Self.escape($0.key))</td></tr>" }.joined()
        let invariantRows = invariants.map {
            "<tr class=\"\($0.ok ? "ok" : "fail")\"><td>\($0.ok ? "ok" : "FAIL")</td><td>\(Self.escape($0.name))</td><td>\(Self.escape($0.detail))</td></tr>"
        }.joined()
        let thresholdRows = (thresholds ?? []).map {
            "<tr class=\"\($0.ok ? "ok" : "fail")\"><td>\($0.ok ? "ok" : "FAIL")</td><td>\(Self.escape($0.expression))</td><td>\(String(format: "%.2f", $0.actual))</td></tr>"
        }.joined()
        let thresholdTable = thresholdRows.isEmpty ? "" : "<h2>Thresholds</h2><table><tr><th></th><th>threshold</th><th>was</th></tr>\(thresholdRows)</table>"
        let comparisonTable = earlier.map { earlier in
            "<h2>Beside \(Self.escape(earlier.name))</h2><table><tr><th></th><th>this run</th><th>earlier</th><th>ratio</th></tr>"
                + comparison(earlier.report).map { String(format: "<tr><td>%@</td><td>%.1f</td><td>%.1f</td><td>%@</td></tr>", Self.escape($0.0), $0.1, $0.2, $0.3) }.joined()
                + "</table>"
        } ?? ""
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>dispatch-load report</title>
            <style>
            body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:960px;color:#222;padding:0 1rem}
            table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{padding:.25rem .7rem;border-bottom:1px solid #ddd;text-align:left}
            td:not(:first-child){font-variant-numeric:tabular-nums}.ok td:first-child{color:#2f855a}.fail td:first-child{color:#c53030;font-weight:bold}
            .legend span{display:inline-block;width:.8em;height:.8em;margin:0 .3em 0 1em;vertical-align:middle}
            svg{width:100%;height:auto;max-width:760px}
            </style></head><body>
            <h1>dispatch-load</h1>
            <p>Started \(startedAt). \(parcelsCreated) parcels created in \(String(format: "%.1f", createSeconds)) s
            (\(String(format: "%.1f", parcelsPerSecond))/s), \(parcelsAssigned) assigned; \(fixesSent) location fixes
            (\(String(format: "%.0f", fixesPerSecond))/s). Set-up took \(String(format: "%.1f", setupSeconds)) s.</p>
            <h2>Invariants</h2><table>\(invariantRows)</table>
            \(thresholdTable)\(comparisonTable)
            <h2>Over time</h2>
            \(seriesCharts())
            <h2>Latency (ms)</h2>
            <table><tr><th></th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>
            \(row("dispatch: created → offered", dispatchOfferedMs))\(row("dispatch: created → assigned", dispatchAssignedMs))
            \(row("POST /v1/parcels", createMs))\(row("PUT /v1/couriers/me/location", courierFixMs))
            \(row("POST /v1/operator/locations (batch)", fleetBatchMs))\(row("accept", acceptMs))</table>
            <p class="legend">Dispatch latency<span style="background:#2b6cb0"></span>created → offered<span style="background:#dd6b20"></span>created → assigned</p>
            \(histogram())
            <h2>Couriers and pickups</h2>
            <p class="legend"><span style="background:#999"></span>courier (sample, final position)<span style="background:#2f855a"></span>pickup, assigned<span style="background:#d69e2e"></span>offered<span style="background:#c53030"></span>waiting</p>
            \(scatter())
            <h2>Errors</h2><table>\(errorRows)</table>
            <h2>Settings</h2><table>\(settingsRows)</table>
            </body></html>
            """
    }
}
