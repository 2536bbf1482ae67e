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
/// that can hold an answer (the exact bounding box of the search circle: wider towards the poles, wrapped at the
/// antimeridian, every longitude around a pole) and check each candidate's exact distance, so results equal a
/// brute-force scan. Readers share a read-write lock.
///
/// `@unchecked Sendable`: all state is guarded by `lock`.
public final class GeoIndex<ID: Hashable & Sendable>: @unchecked Sendable {
    // Only the IDs are generic: points are numbered by slot and the grid is a non-generic type, so the scan runs
    // at full speed where this class is not specialised; IDs are touched only for the few points that qualify.
    /// Cell size in degrees.
    public var cellDegrees: Double { grid.cellDegrees }
    @usableFromInline let lock = ReadWriteLock()
    @usableFromInline let grid: Grid
    private var slotOf: [ID: Int32] = [:]
    @usableFromInline var ids: [ID] = []  // by slot (a free slot keeps its last ID)
    private var free: [Int32] = []

    /// An empty index; 0.0025° cells are about 280 m north–south (a dense city puts a few dozen couriers in each).
    public init(cellDegrees: Double = 0.0025) { grid = Grid(cellDegrees: cellDegrees) }

    /// How many points the index holds.
    public var count: Int { lock.read { slotOf.count } }

    /// Where `id` is, if indexed.
    public func point(of id: ID) -> GeoPoint? {
        lock.read { slotOf[id].map { grid.point(Int($0)) } }
    }

    /// Adds or moves `id` to `point` (which must be valid).
    public func upsert(_ id: ID, at point: GeoPoint) {
        precondition(point.isValid, "invalid coordinates")
        lock.write {
            if let slot = slotOf[id] { grid.move(slot, to: point); return }
            let slot: Int32
            if let reused = free.popLast() {
                slot = reused
                ids[Int(slot)] = id
            } else {
                slot = Int32(ids.count)
                ids.append(id)
            }
            slotOf[id] = slot
            grid.insert(slot, at: point)
        }
    }

    /// Removes `id`; no effect when absent.
    public func remove(_ id: ID) {
        lock.write {
            guard let slot = slotOf.removeValue(forKey: id) else { return }
            grid.remove(slot)
            free.append(slot)
        }
    }

    /// Every point within `meters` of `center`, nearest first, that passes `filter`.
    public func within(_ meters: Double, of center: GeoPoint, where filter: (ID) -> Bool = { _ in true }) -> [(id: ID, meters: Double)] {
        lock.read {
            grid.within(meters, of: center).compactMap { slot -> (id: ID, meters: Double)? in
                let id = ids[Int(slot)]
                return filter(id) ? (id, greatCircleMeters(center, grid.point(Int(slot)))) : nil
            }
        }.sorted { $0.meters < $1.meters }
    }

    /// The `k` nearest points within `maxMeters` that pass `filter` (all when nil), nearest first. The search
    /// radius starts where `k` points should be at the local density and doubles, so a dense city is answered from
    /// a few cells; `filter` is asked only about points near enough to be among the `k`.
    /// Inlinable, so that callers run it specialised for their `ID`.
    @inlinable
    public func nearest(to center: GeoPoint, k: Int, maxMeters: Double, where filter: ((ID) -> Bool)? = nil) -> [(id: ID, meters: Double)] {
        guard k > 0 else { return [] }
        let found: [(id: ID, meters: Double)] = lock.read {
            var accept: ((Int32) -> Bool)? = nil
            if let filter { accept = { slot in filter(self.ids[Int(slot)]) } }
            // Reported with the same formula as everywhere else, so equal points give equal distances.
            return grid.nearest(to: center, k: k, maxMeters: maxMeters, accept: accept)
                .map { slot in (ids[Int(slot)], greatCircleMeters(center, grid.point(Int(slot)))) }
        }
        return found.sorted { $0.meters < $1.meters }
    }
}

/// A point as stored in its cell: its unit vector (the squared chord between two of them orders distances as the
/// great circle does, with no trigonometry per candidate) and its slot.
private struct Entry { var x: Double, y: Double, z: Double; let slot: Int32 }

private func unitVector(_ p: GeoPoint) -> (x: Double, y: Double, z: Double) {
    let φ = p.lat * .pi / 180, λ = p.lon * .pi / 180
    return (cos(φ) * cos(λ), cos(φ) * sin(λ), sin(φ))
}

/// The squared chord of a great-circle distance (2 sin(θ/2))².
private func chord2(forMeters m: Double) -> Double {
    let s = 2 * sin(min(m / earthRadiusMeters, .pi) / 2)
    return s * s
}

/// A point found by `nearest`: its squared chord to the centre, and its slot.
private struct Candidate { let d: Double; let slot: Int32 }

/// The rows and columns of the cells a search must look at; columns are unwrapped (they may run past either end).
private struct Box { let row0: Int64, row1: Int64, col0: Int64, col1: Int64 }

/// The cells and their points, numbered by slot. Not locked: its `GeoIndex` guards it.
@usableFromInline final class Grid {
    let cellDegrees: Double
    private let lonCells: Int64
    private let latCells: Int64
    private var table = CellTable()
    private var places: [(cell: Int64, index: Int32)] = []  // by slot
    private var points: [GeoPoint] = []                     // by slot
    /// Where the point in `slot` is.
    @usableFromInline func point(_ slot: Int) -> GeoPoint { points[slot] }
    /// Points per region of `regionCells` × `regionCells` cells (0.1° with the default cells): a query far from
    /// everyone (a parcel in a district with nobody online) is answered from a few regions instead of thousands of
    /// empty cells.
    private var regions: [Int64: Int32] = [:]
    private static var regionCells: Int64 { 40 }

    init(cellDegrees: Double) {
        self.cellDegrees = cellDegrees
        lonCells = Int64((360 / cellDegrees).rounded(.up))
        latCells = Int64((180 / cellDegrees).rounded(.up))
    }

    deinit { table.deallocate() }

    private func row(_ lat: Double) -> Int64 { min(latCells - 1, max(0, Int64(((lat + 90) / cellDegrees).rounded(.down)))) }
    private func column(_ lon: Double) -> Int64 { Int64(((lon + 180) / cellDegrees).rounded(.down)) }
    private func wrap(_ column: Int64) -> Int64 { let c = column % lonCells; return c < 0 ? c + lonCells : c }
    private func cell(_ p: GeoPoint) -> Int64 { row(p.lat) * lonCells + wrap(column(p.lon)) }
    private func regionKey(_ regionRow: Int64, _ regionColumn: Int64) -> Int64 {
        regionRow * (lonCells / Self.regionCells + 1) + regionColumn
    }
    private func region(_ cell: Int64) -> Int64 {
        regionKey(cell / lonCells / Self.regionCells, cell % lonCells / Self.regionCells)
    }

    func insert(_ slot: Int32, at point: GeoPoint) {
        if Int(slot) == points.count { points.append(point); places.append((0, 0)) } else { points[Int(slot)] = point }
        link(slot, point)
    }

    func move(_ slot: Int32, to point: GeoPoint) {
        let place = places[Int(slot)]
        points[Int(slot)] = point
        if place.cell == cell(point) {
            let v = unitVector(point)
            table.update(place.cell, at: place.index, to: Entry(x: v.x, y: v.y, z: v.z, slot: slot))
        } else {
            unlink(slot)
            link(slot, point)
        }
    }

    func remove(_ slot: Int32) { unlink(slot) }

    private func link(_ slot: Int32, _ point: GeoPoint) {
        let c = cell(point), v = unitVector(point)
        places[Int(slot)] = (c, table.append(Entry(x: v.x, y: v.y, z: v.z, slot: slot), to: c))
        regions[region(c), default: 0] += 1
    }

    /// Takes a slot's entry out of its cell (the cell's last entry fills the gap).
    private func unlink(_ slot: Int32) {
        let place = places[Int(slot)]
        if let moved = table.remove(place.cell, at: place.index) { places[Int(moved)].index = place.index }
        let r = region(place.cell)
        if let n = regions[r], n > 1 { regions[r] = n - 1 } else { regions[r] = nil }
    }

    /// The slots within `meters` of `center`, in no order.
    func within(_ meters: Double, of center: GeoPoint) -> [Int32] {
        let v = unitVector(center), limit = chord2(forMeters: meters)
        var found: [Int32] = []
        forEachCell(in: box(meters, center)) { entries, count in
            for i in 0..<count {
                let e = entries[i], dx = e.x - v.x, dy = e.y - v.y, dz = e.z - v.z
                if dx * dx + dy * dy + dz * dz <= limit { found.append(e.slot) }
            }
        }
        return found
    }

    /// The `k` nearest slots within `maxMeters` that `accept` takes (all when nil), nearest first.
    @usableFromInline func nearest(to center: GeoPoint, k: Int, maxMeters: Double, accept: ((Int32) -> Bool)?) -> [Int32] {
        let v = unitVector(center)
        var best: [Candidate] = []  // ascending, at most k
        best.reserveCapacity(k + 1)
        var radius = min(maxMeters, firstRadius(center, k)), first = true
        while true {
            best.removeAll(keepingCapacity: true)
            let limit = chord2(forMeters: radius)
            forEachCell(in: box(radius, center)) { entries, count in
                for i in 0..<count {
                    let e = entries[i], dx = e.x - v.x, dy = e.y - v.y, dz = e.z - v.z
                    let d = dx * dx + dy * dy + dz * dz
                    if d > limit || (best.count == k && d >= best[k - 1].d) { continue }
                    if let accept, !accept(e.slot) { continue }
                    var j = best.count
                    while j > 0 && best[j - 1].d > d { j -= 1 }
                    best.insert(Candidate(d: d, slot: e.slot), at: j)
                    if best.count > k { best.removeLast() }
                }
            }
            // Everything within `radius` was seen, so once k are inside it they are the k nearest.
            if best.count == k || radius >= maxMeters { return best.map(\.slot) }
            if first && !mayHave(within: maxMeters, of: center) { return [] }
            first = false
            radius = min(maxMeters, radius * 2)
        }
    }

    /// Where a search for `k` starts: the radius that holds `k` points at the density of the centre's cell, with a
    /// margin, at most 250 m (250 m from an empty cell). A dense city is then answered from about four cells.
    private func firstRadius(_ center: GeoPoint, _ k: Int) -> Double {
        let here = table.count(of: cell(center))
        guard here > 0 else { return 250 }
        let side = cellDegrees * earthRadiusMeters * .pi / 180
        let area = side * side * max(0.01, cos(center.lat * .pi / 180))
        return min(250, max(20, 1.25 * (Double(k) * area / (.pi * Double(here))).squareRoot()))
    }

    /// The cells that can hold a point within `meters` of `center`: the latitudes within the angular radius, and
    /// the longitudes of the circle's tangent meridians (every longitude when a pole is in the circle).
    private func box(_ meters: Double, _ center: GeoPoint) -> Box {
        let δ = meters / earthRadiusMeters
        let margin = 1e-7  // degrees, about a centimetre: rounding never loses a point on the edge
        let minLat = center.lat - δ * 180 / .pi - margin, maxLat = center.lat + δ * 180 / .pi + margin
        let rows = (row(max(-90, minLat)), row(min(90, maxLat)))
        if minLat > -90 && maxLat < 90 {
            let s = sin(δ) / cos(center.lat * .pi / 180)
            if s < 1 {
                let dλ = asin(s) * 180 / .pi + margin
                let col0 = column(center.lon - dλ), col1 = column(center.lon + dλ)
                if col1 - col0 + 1 < lonCells { return Box(row0: rows.0, row1: rows.1, col0: col0, col1: col1) }
            }
        }
        return Box(row0: rows.0, row1: rows.1, col0: 0, col1: lonCells - 1)
    }

    /// Calls `body` with the entries of every occupied cell in `box`: cell by cell, or through the occupied cells
    /// when the box has more cells than are occupied.
    private func forEachCell(in box: Box, _ body: (UnsafePointer<Entry>, Int) -> Void) {
        let width = box.col1 - box.col0 + 1
        if (box.row1 - box.row0 + 1) * width > Int64(table.occupied) {
            table.forEach { cell, entries, count in
                let row = cell / lonCells
                guard row >= box.row0 && row <= box.row1, wrap(cell % lonCells - box.col0) < width else { return }
                body(entries, count)
            }
        } else {
            var row = box.row0
            while row <= box.row1 {  // while loops: a range of Int64 here went through generic witnesses
                var column = box.col0
                while column <= box.col1 {
                    table.withEntries(of: row * lonCells + wrap(column), body)
                    column += 1
                }
                row += 1
            }
        }
    }

    /// False when no point can be within `meters` of `center`: every region the search box touches is empty.
    private func mayHave(within meters: Double, of center: GeoPoint) -> Bool {
        let b = box(meters, center), size = Self.regionCells
        var regionColumns: [Int64] = []
        var column = b.col0
        while column <= b.col1 {  // a region at a time
            let c = wrap(column)
            regionColumns.append(c / size)
            column += size - c % size
        }
        for regionRow in (b.row0 / size)...(b.row1 / size) {
            for regionColumn in regionColumns where regions[regionKey(regionRow, regionColumn)] != nil { return true }
        }
        return false
    }
}

/// The occupied cells: open addressing with linear probing, keyed by cell number, each cell's entries in a
/// buffer of its own. Raw memory, so a query touches no reference counts (two threads reading the same cells
/// would otherwise fight over them).
private struct CellTable {
    private struct Bucket { var entries: UnsafeMutablePointer<Entry>; var count: Int32; var capacity: Int32 }
    private static var empty: Int64 { -1 }
    private var keys: UnsafeMutablePointer<Int64>
    private var buckets: UnsafeMutablePointer<Bucket>
    private var mask: Int
    /// How many cells hold at least one entry.
    private(set) var occupied = 0

    init() {
        mask = 63
        keys = .allocate(capacity: mask + 1)
        keys.initialize(repeating: Self.empty, count: mask + 1)
        buckets = .allocate(capacity: mask + 1)
    }

    func deallocate() {
        for i in 0...mask where keys[i] != Self.empty { buckets[i].entries.deallocate() }
        keys.deallocate()
        buckets.deallocate()
    }

    @inline(__always) private func home(_ key: Int64) -> Int {
        Int(truncatingIfNeeded: (UInt64(bitPattern: key) &* 0x9E37_79B9_7F4A_7C15) >> 32) & mask
    }

    @inline(__always) private func find(_ key: Int64) -> Int? {
        var i = home(key)
        while true {
            let k = keys[i]
            if k == key { return i }
            if k == Self.empty { return nil }
            i = (i + 1) & mask
        }
    }

    @inline(__always) func withEntries(of cell: Int64, _ body: (UnsafePointer<Entry>, Int) -> Void) {
        if let i = find(cell) { body(buckets[i].entries, Int(buckets[i].count)) }
    }

    func count(of cell: Int64) -> Int { find(cell).map { Int(buckets[$0].count) } ?? 0 }

    func forEach(_ body: (Int64, UnsafePointer<Entry>, Int) -> Void) {
        for i in 0...mask where keys[i] != Self.empty { body(keys[i], buckets[i].entries, Int(buckets[i].count)) }
    }

    mutating func update(_ cell: Int64, at index: Int32, to entry: Entry) {
        buckets[find(cell)!].entries[Int(index)] = entry
    }

    /// Adds `entry` to `cell`; returns its index there.
    mutating func append(_ entry: Entry, to cell: Int64) -> Int32 {
        if (occupied + 1) * 2 > mask + 1 { grow() }
        var i = home(cell)
        while keys[i] != cell && keys[i] != Self.empty { i = (i + 1) & mask }
        if keys[i] == Self.empty {
            keys[i] = cell
            buckets[i] = Bucket(entries: .allocate(capacity: 4), count: 0, capacity: 4)
            occupied += 1
        }
        var b = buckets[i]
        if b.count == b.capacity {
            let larger = UnsafeMutablePointer<Entry>.allocate(capacity: Int(b.capacity) * 2)
            larger.moveInitialize(from: b.entries, count: Int(b.count))
            b.entries.deallocate()
            b.entries = larger
            b.capacity *= 2
        }
        (b.entries + Int(b.count)).initialize(to: entry)
        b.count += 1
        buckets[i] = b
        return b.count - 1
    }

    /// Takes the entry at `index` out of `cell`, filling the gap with the cell's last entry; returns that entry's
    /// slot when it moved.
    mutating func remove(_ cell: Int64, at index: Int32) -> Int32? {
        let i = find(cell)!
        let b = buckets[i]
        let last = b.count - 1
        let moved: Int32? = index < last ? b.entries[Int(last)].slot : nil
        if index < last { b.entries[Int(index)] = b.entries[Int(last)] }
        buckets[i].count = last
        if last == 0 { b.entries.deallocate(); erase(i) }
        return moved
    }

    /// Empties position `i`, shifting back the entries after it that probed past it.
    private mutating func erase(_ position: Int) {
        var i = position, j = position
        keys[i] = Self.empty
        occupied -= 1
        while true {
            j = (j + 1) & mask
            if keys[j] == Self.empty { return }
            let h = home(keys[j])
            // The entry at j stays when its home lies cyclically in (i, j].
            if i <= j ? (i < h && h <= j) : (i < h || h <= j) { continue }
            keys[i] = keys[j]; buckets[i] = buckets[j]; keys[j] = Self.empty
            i = j
        }
    }

    private mutating func grow() {
        let oldKeys = keys, oldBuckets = buckets, oldMask = mask
        mask = (mask + 1) * 2 - 1
        keys = .allocate(capacity: mask + 1)
        keys.initialize(repeating: Self.empty, count: mask + 1)
        buckets = .allocate(capacity: mask + 1)
        for i in 0...oldMask where oldKeys[i] != Self.empty {
            var j = home(oldKeys[i])
            while keys[j] != Self.empty { j = (j + 1) & mask }
            keys[j] = oldKeys[i]
            buckets[j] = oldBuckets[i]
        }
        oldKeys.deallocate()
        oldBuckets.deallocate()
    }
}
