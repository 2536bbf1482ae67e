import Foundation
import Postgres

/// The square the couriers and pickups are in.
struct Area: Sendable {
    let center: (lat: Double, lon: Double)
    let halfLat: Double
    let halfLon: Double

    init(center: (lat: Double, lon: Double), sideKm: Double) {
        self.center = center
        halfLat = sideKm / 2 / 111.32
        halfLon = sideKm / 2 / (111.32 * cos(center.lat * .pi / 180))
    }

    func random() -> (lat: Double, lon: Double) {
        (center.lat + .random(in: -halfLat...halfLat), center.lon + .random(in: -halfLon...halfLon))
    }

    /// Moves a point up to `meters` along `heading` (degrees), turning back at the edges.
    func step(_ p: (lat: Double, lon: Double), heading: inout Double, meters: Double) -> (lat: Double, lon: Double) {
        heading = (heading + .random(in: -30...30)).truncatingRemainder(dividingBy: 360)
        if heading < 0 { heading += 360 }
        var lat = p.lat + meters * cos(heading * .pi / 180) / 111_320
        var lon = p.lon + meters * sin(heading * .pi / 180) / (111_320 * cos(p.lat * .pi / 180))
        if abs(lat - center.lat) > halfLat { lat = p.lat; heading = (heading + 180).truncatingRemainder(dividingBy: 360) }
        if abs(lon - center.lon) > halfLon { lon = p.lon; heading = (heading + 180).truncatingRemainder(dividingBy: 360) }
        return (lat, lon)
    }
}

/// The seeded couriers' positions; each fix thread moves only its own slice.
///
/// `@unchecked Sendable`: threads write disjoint index ranges of fixed buffers; readers read after they stopped.
final class Fleet: @unchecked Sendable {
    let ids: [String]
    let lat: UnsafeMutableBufferPointer<Double>
    let lon: UnsafeMutableBufferPointer<Double>
    let heading: UnsafeMutableBufferPointer<Double>

    init(count: Int, area: Area) {
        ids = (0..<count).map { _ in UUID().uuidString.lowercased() }
        lat = .allocate(capacity: count); lon = .allocate(capacity: count); heading = .allocate(capacity: count)
        for i in 0..<count {
            let p = area.random()
            lat[i] = p.lat; lon[i] = p.lon; heading[i] = .random(in: 0..<360)
        }
    }
}

enum LoadTest {
    static func main() {
        let options: Options
        do {
            options = try Options.parse(Array(CommandLine.arguments.dropFirst()))
        } catch let e as UsageError where e.description.isEmpty {
            print(Options.help)
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("dispatch-load: \(error)\nTry dispatch-load --help.\n".utf8))
            exit(64)
        }
        let earlier: Report?
        do {
            earlier = options.compare.isEmpty ? nil : try Report.read(options.compare)
        } catch {
            FileHandle.standardError.write(Data("dispatch-load: --compare \(options.compare): \(error)\n".utf8))
            exit(64)
        }
        do {
            let run = Run(options)
            // The first Ctrl-C ends the run early but still reports and takes the couriers offline; a second one quits.
            signal(SIGINT, SIG_IGN)
            let interruption = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
            interruption.setEventHandler {
                run.interrupt()
                interruption.cancel()
                signal(SIGINT, SIG_DFL)
            }
            interruption.resume()
            var report = try { () throws -> Report in
                // A run that fails still takes its couriers offline: left online, they would be offered every later
                // parcel in reach and never answer.
                defer { run.tearDown() }
                try run.setUp()
                run.drive()
                return try run.verify()
            }()
            report.thresholds = options.thresholds.map { t in
                let actual = t.actual(in: report)
                return ThresholdResult(expression: t.expression, actual: actual, ok: t.holds(actual))
            }
            try report.write(to: options.out, beside: earlier.map { (options.compare, $0) })
            print(report.summary(options, beside: earlier.map { (options.compare, $0) }))
            print("Reports: \(options.out).json, \(options.out).html")
            // Like k6: a run that breaks an invariant or misses a threshold fails.
            exit(report.invariants.allSatisfy(\.ok) && (report.thresholds ?? []).allSatisfy(\.ok) ? 0 : 1)
        } catch {
            FileHandle.standardError.write(Data("dispatch-load: \(explained(error))\n".utf8))
            exit(1)
        }
    }
}

/// An error with the database server's own words, when it is the database's: this tool's user needs them, and its
/// output is no service's log.
func explained(_ error: Error) -> String {
    guard let e = error as? PostgresError, !e.serverMessage.isEmpty else { return "\(error)" }
    return "\(e): \(e.serverMessage.trimmingCharacters(in: .whitespacesAndNewlines))"
}

struct RunError: Error, CustomStringConvertible {
    let description: String
    init(_ text: String) { description = text }
}
