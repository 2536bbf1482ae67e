import Foundation
import Geo
import XCTest

/// The spatial index against a brute-force scan on random data, including the poles and the antimeridian.
final class GeoIndexTests: XCTestCase {
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    func brute(_ points: [Int: GeoPoint], _ center: GeoPoint, _ meters: Double) -> [(Int, Double)] {
        points.map { ($0.key, greatCircleMeters(center, $0.value)) }.filter { $0.1 <= meters }.sorted { $0.1 < $1.1 }
    }

    func check(_ index: GeoIndex<Int>, _ points: [Int: GeoPoint], _ center: GeoPoint, _ meters: Double, k: Int,
               file: StaticString = #filePath, line: UInt = #line) {
        let expected = brute(points, center, meters)
        let found = index.within(meters, of: center)
        XCTAssertEqual(Set(found.map(\.id)), Set(expected.map(\.0)), "radius \(meters) at \(center)", file: file, line: line)
        let nearest = index.nearest(to: center, k: k, maxMeters: meters)
        XCTAssertEqual(nearest.map(\.meters), expected.prefix(k).map(\.1), "nearest \(k) at \(center)", file: file, line: line)
    }

    func testRandomCityPointsMatchBruteForceThroughMovesAndRemovals() {
        var rng = Seeded(state: 42)
        let index = GeoIndex<Int>()
        var points: [Int: GeoPoint] = [:]
        // A 20 km square around Bucharest.
        func random() -> GeoPoint { GeoPoint(lat: 44.35 + Double.random(in: 0..<0.18, using: &rng), lon: 26.0 + Double.random(in: 0..<0.25, using: &rng)) }
        for id in 0..<3000 { let p = random(); points[id] = p; index.upsert(id, at: p) }
        for round in 0..<40 {
            for _ in 0..<200 {  // moves
                let id = Int.random(in: 0..<3000, using: &rng)
                let p = random(); points[id] = p; index.upsert(id, at: p)
            }
            for _ in 0..<20 {  // removals
                let id = Int.random(in: 0..<3000, using: &rng)
                points[id] = nil; index.remove(id)
            }
            check(index, points, random(), [200, 1000, 5000, 30_000][round % 4], k: [1, 3, 10][round % 3])
        }
        XCTAssertEqual(index.count, points.count)
    }

    func testADenseCityWithAFilterMatchesBruteForce() {
        // Hundreds of points a cell: the search starts at the radius the centre's density suggests, and doubles when
        // the filter leaves too few inside it.
        var rng = Seeded(state: 3)
        let index = GeoIndex<Int>()
        var points: [Int: GeoPoint] = [:]
        for id in 0..<20_000 {
            let p = GeoPoint(lat: 44.42 + Double.random(in: 0..<0.02, using: &rng), lon: 26.09 + Double.random(in: 0..<0.025, using: &rng))
            points[id] = p
            index.upsert(id, at: p)
        }
        for round in 0..<50 {
            let center = GeoPoint(lat: 44.41 + Double.random(in: 0..<0.04, using: &rng), lon: 26.08 + Double.random(in: 0..<0.045, using: &rng))
            let k = [1, 10, 25][round % 3], keep = [1, 2, 500][round % 3]  // every point, every other one, one in 500
            let expected = brute(points.filter { $0.key % keep == 0 }, center, 5_000).prefix(k)
            let found = index.nearest(to: center, k: k, maxMeters: 5_000, where: { $0 % keep == 0 })
            XCTAssertEqual(found.map(\.id), expected.map(\.0), "round \(round)")
            XCTAssertEqual(found.map(\.meters), expected.map(\.1), "round \(round)")
        }
    }

    func testPolesAntimeridianAndTheWholeGlobe() {
        var rng = Seeded(state: 7)
        let index = GeoIndex<Int>(cellDegrees: 0.5)
        var points: [Int: GeoPoint] = [:]
        for id in 0..<4000 {
            let p: GeoPoint
            switch id % 4 {
            case 0: p = GeoPoint(lat: Double.random(in: 85...90, using: &rng), lon: Double.random(in: -180...180, using: &rng))
            case 1: p = GeoPoint(lat: Double.random(in: -90 ... -85, using: &rng), lon: Double.random(in: -180...180, using: &rng))
            case 2: p = GeoPoint(lat: Double.random(in: -60...60, using: &rng),
                                 lon: Bool.random(using: &rng) ? Double.random(in: 178...180, using: &rng) : Double.random(in: -180 ... -178, using: &rng))
            default: p = GeoPoint(lat: Double.random(in: -90...90, using: &rng), lon: Double.random(in: -180...180, using: &rng))
            }
            points[id] = p
            index.upsert(id, at: p)
        }
        let centers = [GeoPoint(lat: 90, lon: 0), GeoPoint(lat: 89.9, lon: 179.9), GeoPoint(lat: -89.5, lon: -45),
                       GeoPoint(lat: 10, lon: 179.99), GeoPoint(lat: -20, lon: -179.99), GeoPoint(lat: 0, lon: 180), GeoPoint(lat: 45, lon: 0)]
        for center in centers {
            for meters in [50_000.0, 300_000, 2_000_000, 25_000_000] { check(index, points, center, meters, k: 5) }
        }
    }

    func testFiltersAndEdgeCases() {
        let index = GeoIndex<Int>()
        XCTAssertTrue(index.nearest(to: GeoPoint(lat: 0, lon: 0), k: 3, maxMeters: 1000).isEmpty)
        index.upsert(1, at: GeoPoint(lat: 44.43, lon: 26.10))
        index.upsert(2, at: GeoPoint(lat: 44.431, lon: 26.10))
        index.upsert(2, at: GeoPoint(lat: 44.50, lon: 26.10))  // moved away
        XCTAssertEqual(index.nearest(to: GeoPoint(lat: 44.431, lon: 26.10), k: 1, maxMeters: 50_000).map(\.id), [1])
        XCTAssertEqual(index.nearest(to: GeoPoint(lat: 44.431, lon: 26.10), k: 1, maxMeters: 50_000, where: { $0 != 1 }).map(\.id), [2])
        XCTAssertEqual(index.nearest(to: GeoPoint(lat: 44.431, lon: 26.10), k: 5, maxMeters: 200).count, 1, "bounded by the radius (111 m in, 7.7 km out)")
        // Far from everyone: nothing within 50 km, both within 120 km (the empty regions are skipped, not missed).
        XCTAssertTrue(index.nearest(to: GeoPoint(lat: 45.5, lon: 26.10), k: 2, maxMeters: 50_000).isEmpty)
        XCTAssertEqual(index.nearest(to: GeoPoint(lat: 45.5, lon: 26.10), k: 2, maxMeters: 120_000).map(\.id), [2, 1])
        index.remove(1); index.remove(1)
        XCTAssertNil(index.point(of: 1))
        XCTAssertEqual(index.count, 1)
        XCTAssertFalse(GeoPoint(lat: .nan, lon: 0).isValid)
        XCTAssertFalse(GeoPoint(lat: 91, lon: 0).isValid)
        XCTAssertEqual(greatCircleMeters(GeoPoint(lat: 0, lon: 179.5), GeoPoint(lat: 0, lon: -179.5)), 111_195, accuracy: 5)
    }
}
