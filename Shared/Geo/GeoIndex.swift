import Foundation

/// A point on the Earth in degrees.
public struct GeoPoint: Sendable, Equatable {
    /// Latitude, −90…90.
    public var lat: Double
    /// Longitude, −180…180.
    public var lon: Double

    public init(lat: Double, lon: Double) { self.lat = lat; self.lon = lon }

    /// Whether both coordinates are finite and in range.
    public var isValid: Bool { lat.isFinite && lon.isFinite && (-90...90).contains(lat) && (-180...180).contains(lon) }
}

/// The mean Earth radius in metres (IUGG).
public let earthRadiusMeters = 6_371_008.8

/// Great-circle distance in metres (haversine).
public func greatCircleMeters(_ a: GeoPoint, _ b: GeoPoint) -> Double {
    let φ1 = a.lat * .pi / 180, φ2 = b.lat * .pi / 180
    let dφ = φ2 - φ1, dλ = (b.lon - a.lon) * .pi / 180
    let h = sin(dφ / 2) * sin(dφ / 2) + cos(φ1) * cos(φ2) * sin(dλ / 2) * sin(dλ / 2)
    return 2 * earthRadiusMeters * asin(min(1, sqrt(h)))
}

/// An in-memory spatial index of moving points on a latitude/longitude grid. Queries look only at the cells
/// that can hold an answer (the longitude span widens towards the poles and wraps at the antimeridian) and
/// check every candidate with the exact great-circle distance, so results equal a brute-force scan.
///
/// `@unchecked Sendable`: all state is guarded by `lock`.
public final class GeoIndex<ID: Hashable & Sendable>: @unchecked Sendable {
    private struct Cell: Hashable { let lat: Int; let lon: Int }

    /// Cell size in degrees.
    public let cellDegrees: Double
    private let lonCells: Int
    private let latCells: Int
    private let lock = NSLock()
    private var points: [ID: GeoPoint] = [:]
    private var cellOf: [ID: Cell] = [:]
    private var cells: [Cell: Set<ID>] = [:]

    /// An empty index; 0.01° cells are about 1.1 km north–south.
    public init(cellDegrees: Double = 0.01) {
        self.cellDegrees = cellDegrees
        lonCells = Int((360 / cellDegrees).rounded(.up))
        latCells = Int((180 / cellDegrees).rounded(.up))
    }

    /// How many points the index holds.
    public var count: Int { lock.lock(); defer { lock.unlock() }; return points.count }

    /// Where `id` is, if indexed.
    public func point(of id: ID) -> GeoPoint? { lock.lock(); defer { lock.unlock() }; return points[id] }

    private func cell(_ p: GeoPoint) -> Cell {
        let lat = min(latCells - 1, max(0, Int(((p.lat + 90) / cellDegrees).rounded(.down))))
        var lon = Int(((p.lon + 180) / cellDegrees).rounded(.down)) % lonCells
        if lon < 0 { lon += lonCells }
        return Cell(lat: lat, lon: lon)
    }

    /// Adds or moves `id` to `point` (which must be valid).
    public func upsert(_ id: ID, at point: GeoPoint) {
        precondition(point.isValid, "invalid coordinates")
        let c = cell(point)
        lock.lock(); defer { lock.unlock() }
        if let old = cellOf[id], old != c {
            cells[old]?.remove(id)
            if cells[old]?.isEmpty == true { cells[old] = nil }
        }
        points[id] = point
        cellOf[id] = c
        cells[c, default: []].insert(id)
    }

    /// Removes `id`; no effect when absent.
    public func remove(_ id: ID) {
        lock.lock(); defer { lock.unlock() }
        guard let c = cellOf.removeValue(forKey: id) else { return }
        points[id] = nil
        cells[c]?.remove(id)
        if cells[c]?.isEmpty == true { cells[c] = nil }
    }

    /// Every point within `meters` of `center`, nearest first, that passes `filter`.
    public func within(_ meters: Double, of center: GeoPoint, where filter: (ID) -> Bool = { _ in true }) -> [(id: ID, meters: Double)] {
        lock.lock(); defer { lock.unlock() }
        return unlockedWithin(meters, of: center, filter).sorted { $0.meters < $1.meters }
    }

    /// The `k` nearest points within `maxMeters` that pass `filter`, nearest first. The search radius starts at one
    /// cell and doubles, so a dense city is answered from a few cells.
    public func nearest(to center: GeoPoint, k: Int, maxMeters: Double, where filter: (ID) -> Bool = { _ in true }) -> [(id: ID, meters: Double)] {
        guard k > 0 else { return [] }
        lock.lock(); defer { lock.unlock() }
        var radius = min(maxMeters, cellDegrees * 111_320)
        while true {
            let found = unlockedWithin(radius, of: center, filter)
            // Everything within `radius` was seen, so once k are inside it they are the k nearest.
            if found.count >= k || radius >= maxMeters {
                return Array(found.sorted { $0.meters < $1.meters }.prefix(k))
            }
            radius = min(maxMeters, radius * 2)
        }
    }

    private func unlockedWithin(_ meters: Double, of center: GeoPoint, _ filter: (ID) -> Bool) -> [(id: ID, meters: Double)] {
        let latSpan = meters / 111_320 + cellDegrees
        let minLat = max(-90, center.lat - latSpan), maxLat = min(90, center.lat + latSpan)
        let extremeLat = max(abs(minLat), abs(maxLat))
        let cosine = cos(extremeLat * .pi / 180)
        // Near a pole (or for a radius beyond a quarter of the globe) every longitude may be in reach.
        let lonSpan = cosine < 1e-6 || meters > earthRadiusMeters * .pi / 2 ? 360 : meters / (111_320 * cosine) + cellDegrees
        let lat0 = cell(GeoPoint(lat: minLat, lon: 0)).lat, lat1 = cell(GeoPoint(lat: maxLat, lon: 0)).lat
        var lonIndexes: [Int]
        if lonSpan >= 180 {
            lonIndexes = Array(0..<lonCells)
        } else {
            let first = Int(((center.lon - lonSpan + 180) / cellDegrees).rounded(.down))
            let last = Int(((center.lon + lonSpan + 180) / cellDegrees).rounded(.down))
            lonIndexes = (first...last).map { (($0 % lonCells) + lonCells) % lonCells }
        }
        var out: [(id: ID, meters: Double)] = []
        let cellCount = (lat1 - lat0 + 1) * lonIndexes.count
        if cellCount > cells.count {
            // Fewer occupied cells than cells in the box: walk the occupied ones instead.
            let lonSet = Set(lonIndexes)
            for (c, ids) in cells where c.lat >= lat0 && c.lat <= lat1 && lonSet.contains(c.lon) {
                collect(ids, center, meters, filter, &out)
            }
            return out
        }
        for lat in lat0...lat1 {
            for lon in lonIndexes {
                if let ids = cells[Cell(lat: lat, lon: lon)] { collect(ids, center, meters, filter, &out) }
            }
        }
        return out
    }

    private func collect(_ ids: Set<ID>, _ center: GeoPoint, _ meters: Double, _ filter: (ID) -> Bool,
                         _ out: inout [(id: ID, meters: Double)]) {
        for id in ids {
            guard let p = points[id] else { continue }
            let d = greatCircleMeters(center, p)
            if d <= meters && filter(id) { out.append((id, d)) }
        }
    }
}
