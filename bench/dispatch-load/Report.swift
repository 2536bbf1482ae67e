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

    func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(self).write(to: URL(fileURLWithPath: path + ".json"))
        try Data(html().utf8).write(to: URL(fileURLWithPath: path + ".html"))
    }

    // MARK: - Terminal

    func summary(_ o: Options) -> String {
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

    func html() -> String {
        func row(_ name: String, _ d: Distribution) -> String {
            String(format: "<tr><td>%@</td><td>%d</td><td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td></tr>", name, d.count, d.p50, d.p90, d.p99, d.max)
        }
        let settingsRows = settings.sorted { $0.key < $1.key }.map { "<tr><td>\(Self.escape($0.key))</td><td>\(Self.escape($0.value))</td></tr>" }.joined()
        let errorRows = errors.isEmpty ? "<tr><td colspan=\"2\">none</td></tr>"
            : errors.sorted { $0.value > $1.value }.map { "<tr><td>\($0.value)</td><td>\(Self.escape($0.key))</td></tr>" }.joined()
        let invariantRows = invariants.map {
            "<tr class=\"\($0.ok ? "ok" : "fail")\"><td>\($0.ok ? "ok" : "FAIL")</td><td>\(Self.escape($0.name))</td><td>\(Self.escape($0.detail))</td></tr>"
        }.joined()
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
