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
/// check every candidate with the exact great-circle distance, so results equal a brute-force scan. Each cell keeps
/// its points inline (no lookup per candidate), candidates are ranked by the haversine term before any inverse
/// trigonometry, and readers share a read-write lock.
///
/// `@unchecked Sendable`: all state is guarded by `lock`.
public final class GeoIndex<ID: Hashable & Sendable>: @unchecked Sendable {
    // The grid and the scan use only non-generic types (points are numbered by slot; types nested here would be
    // generic too), so they run at full speed where the class itself is not specialised; IDs are touched only for
    // the few points that qualify.
    /// Cell size in degrees.
    public let cellDegrees: Double
    private let lonCells: Int
    private let latCells: Int
    private let lock = ReadWriteLock()
    private var slotOf: [ID: Int32] = [:]
    private var ids: [ID?] = []                 // by slot
    private var places: [(cell: Cell, index: Int)] = []  // by slot
    private var free: [Int32] = []
    private var cells: [Cell: [Entry]] = [:]
    /// Points per region of `regionCells` × `regionCells` cells (0.1° with the default cells): a query far from
    /// everyone (a parcel in a district with nobody online) is answered from a few regions instead of thousands of
    /// empty cells.
    private var regions: [Cell: Int32] = [:]
    private static var regionCells: Int32 { 40 }

    /// An empty index; 0.0025° cells are about 280 m north–south (a dense city puts a few dozen couriers in each).
    public init(cellDegrees: Double = 0.0025) {
        self.cellDegrees = cellDegrees
        lonCells = Int((360 / cellDegrees).rounded(.up))
        latCells = Int((180 / cellDegrees).rounded(.up))
    }

    /// How many points the index holds.
    public var count: Int { lock.read { slotOf.count } }

    /// Where `id` is, if indexed.
    public func point(of id: ID) -> GeoPoint? {
        lock.read {
            guard let slot = slotOf[id] else { return nil }
            let place = places[Int(slot)]
            let e = cells[place.cell]![place.index]
            return GeoPoint(lat: e.lat, lon: e.lon)
        }
    }

    private func cell(_ p: GeoPoint) -> Cell {
        let lat = min(latCells - 1, max(0, Int(((p.lat + 90) / cellDegrees).rounded(.down))))
        var lon = Int(((p.lon + 180) / cellDegrees).rounded(.down)) % lonCells
        if lon < 0 { lon += lonCells }
        return Cell(lat: Int32(lat), lon: Int32(lon))
    }

    /// Adds or moves `id` to `point` (which must be valid).
    public func upsert(_ id: ID, at point: GeoPoint) {
        precondition(point.isValid, "invalid coordinates")
        let c = cell(point)
        lock.write {
            let slot: Int32
            if let known = slotOf[id] {
                slot = known
                let place = places[Int(slot)]
                let entry = Entry(slot: slot, lat: point.lat, lon: point.lon, cosLat: cos(point.lat * .pi / 180))
                if place.cell == c { cells[c]![place.index] = entry; return }
                unlink(slot)
            } else if let reused = free.popLast() {
                slot = reused
                ids[Int(slot)] = id
                slotOf[id] = slot
            } else {
                slot = Int32(ids.count)
                ids.append(id)
                places.append((c, 0))
                slotOf[id] = slot
            }
            cells[c, default: []].append(Entry(slot: slot, lat: point.lat, lon: point.lon, cosLat: cos(point.lat * .pi / 180)))
            places[Int(slot)] = (c, cells[c]!.count - 1)
            regions[Self.region(c), default: 0] += 1
        }
    }

    /// Removes `id`; no effect when absent.
    public func remove(_ id: ID) {
        lock.write {
            guard let slot = slotOf.removeValue(forKey: id) else { return }
            unlink(slot)
            ids[Int(slot)] = nil
            free.append(slot)
        }
    }

    /// Takes a slot's entry out of its cell (the cell's last entry fills the gap).
    private func unlink(_ slot: Int32) {
        let place = places[Int(slot)]
        let region = Self.region(place.cell)
        if let n = regions[region], n > 1 { regions[region] = n - 1 } else { regions[region] = nil }
        var entries = cells.removeValue(forKey: place.cell) ?? []
        let last = entries.removeLast()
        if place.index < entries.count {
            entries[place.index] = last
            places[Int(last.slot)] = (place.cell, place.index)
        }
        if !entries.isEmpty { cells[place.cell] = entries }
    }

    /// Every point within `meters` of `center`, nearest first, that passes `filter`.
    public func within(_ meters: Double, of center: GeoPoint, where filter: (ID) -> Bool = { _ in true }) -> [(id: ID, meters: Double)] {
        lock.read {
            unlockedWithin(meters, of: center, filter).map { (ids[Int($0.entry.slot)]!, greatCircleMeters(center, GeoPoint(lat: $0.entry.lat, lon: $0.entry.lon))) }
        }.sorted { $0.meters < $1.meters }
    }

    /// The `k` nearest points within `maxMeters` that pass `filter`, nearest first. The search radius starts at
    /// 250 m and doubles, so a dense city is answered from a few cells.
    public func nearest(to center: GeoPoint, k: Int, maxMeters: Double, where filter: (ID) -> Bool = { _ in true }) -> [(id: ID, meters: Double)] {
        guard k > 0 else { return [] }
        return lock.read {
            guard unlockedMayHave(within: maxMeters, of: center) else { return [] }
            var radius = min(maxMeters, 250)
            while true {
                let found = unlockedWithin(radius, of: center, filter)
                // Everything within `radius` was seen, so once k are inside it they are the k nearest.
                if found.count >= k || radius >= maxMeters {
                    // Reported with the same formula as everywhere else, so equal points give equal distances.
                    return found.sorted { $0.h < $1.h }.prefix(k)
                        .map { (ids[Int($0.entry.slot)]!, greatCircleMeters(center, GeoPoint(lat: $0.entry.lat, lon: $0.entry.lon))) }
                        .sorted { $0.meters < $1.meters }
                }
                radius = min(maxMeters, radius * 2)
            }
        }
    }

    /// The haversine term of a distance: `meters` is monotonic in it, so candidates are compared by it.
    private static func h(forMeters m: Double) -> Double {
        let s = sin(min(m / earthRadiusMeters, .pi) / 2)
        return s * s
    }

    private static func region(_ c: Cell) -> Cell { Cell(lat: c.lat / regionCells, lon: c.lon / regionCells) }

    /// False when no point can be within `meters` of `center`: every region the search box touches is empty.
    private func unlockedMayHave(within meters: Double, of center: GeoPoint) -> Bool {
        let (lat0, lat1, lonIndexes) = box(meters, center)
        let lonRegions = Set(lonIndexes.map { $0 / Self.regionCells })
        for lat in (lat0 / Self.regionCells)...(lat1 / Self.regionCells) {
            for lon in lonRegions where regions[Cell(lat: lat, lon: lon)] != nil { return true }
        }
        return false
    }

    /// The cells a search within `meters` of `center` must look at: a range of latitude rows and the longitude
    /// columns (wrapped at the antimeridian; all of them near a pole).
    private func box(_ meters: Double, _ center: GeoPoint) -> (lat0: Int32, lat1: Int32, lonIndexes: [Int32]) {
        let latSpan = meters / 111_320 + cellDegrees
        let minLat = max(-90, center.lat - latSpan), maxLat = min(90, center.lat + latSpan)
        let extremeLat = max(abs(minLat), abs(maxLat))
        let cosine = cos(extremeLat * .pi / 180)
        // Near a pole (or for a radius beyond a quarter of the globe) every longitude may be in reach.
        let lonSpan = cosine < 1e-6 || meters > earthRadiusMeters * .pi / 2 ? 360 : meters / (111_320 * cosine) + cellDegrees
        let lat0 = cell(GeoPoint(lat: minLat, lon: 0)).lat, lat1 = cell(GeoPoint(lat: maxLat, lon: 0)).lat
        let lonIndexes: [Int32]
        if lonSpan >= 180 {
            lonIndexes = (0..<lonCells).map { Int32($0) }
        } else {
            let first = Int(((center.lon - lonSpan + 180) / cellDegrees).rounded(.down))
            let last = Int(((center.lon + lonSpan + 180) / cellDegrees).rounded(.down))
            lonIndexes = (first...last).map { Int32((($0 % lonCells) + lonCells) % lonCells) }
        }
        return (lat0, lat1, lonIndexes)
    }

    private func unlockedWithin(_ meters: Double, of center: GeoPoint, _ filter: (ID) -> Bool) -> [(entry: Entry, h: Double)] {
        let (lat0, lat1, lonIndexes) = box(meters, center)
        let probe = Probe(center: center, limit: Self.h(forMeters: meters))
        var candidates: [(entry: Entry, h: Double)] = []
        let cellCount = Int(lat1 - lat0 + 1) * lonIndexes.count
        if cellCount > cells.count {
            // Fewer occupied cells than cells in the box: walk the occupied ones instead.
            let lonSet = Set(lonIndexes)
            for (c, entries) in cells where c.lat >= lat0 && c.lat <= lat1 && lonSet.contains(c.lon) {
                probe.collect(entries, &candidates)
            }
        } else {
            for lat in lat0...lat1 {
                for lon in lonIndexes {
                    if let entries = cells[Cell(lat: lat, lon: lon)] { probe.collect(entries, &candidates) }
                }
            }
        }
        return candidates.filter { filter(ids[Int($0.entry.slot)]!) }
    }
}

private struct Cell: Hashable { let lat: Int32; let lon: Int32 }
private struct Entry { let slot: Int32; let lat: Double; let lon: Double; let cosLat: Double }

/// The query point, prepared once.
private struct Probe {
    let lat: Double, lon: Double, cosLat: Double, limit: Double
    init(center: GeoPoint, limit: Double) {
        lat = center.lat; lon = center.lon; cosLat = cos(center.lat * .pi / 180); self.limit = limit
    }

    func collect(_ entries: [Entry], _ out: inout [(entry: Entry, h: Double)]) {
        for e in entries {
            let dLat = sin((e.lat - lat) * .pi / 360)
            let dLatTerm = dLat * dLat
            if dLatTerm > limit { continue }  // too far north or south already
            let dLon = sin((e.lon - lon) * .pi / 360)
            let h = dLatTerm + cosLat * e.cosLat * dLon * dLon
            if h <= limit { out.append((e, h)) }
        }
    }
}
