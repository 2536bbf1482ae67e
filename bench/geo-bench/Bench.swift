import Foundation
import Geo
import Postgres

/// Reproducible points: SplitMix64.
struct SeededRandom {
    var state: UInt64
    mutating func next() -> Double {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Double((z ^ (z >> 31)) >> 11) / Double(1 << 53)
    }
}

/// A query engine under test: answers "the k nearest couriers to this point within r meters". Each instance is
/// used by one thread at a time (hence the unchecked conformances below).
protocol Engine: AnyObject, Sendable {
    var name: String { get }
    func nearest(_ p: GeoPoint, k: Int, meters: Double) throws -> [Int]
}

/// `@unchecked Sendable`: used by one thread at a time; the index locks itself.
final class IndexEngine: Engine, @unchecked Sendable {
    let name = "in-memory index"
    let index: GeoIndex<Int>
    init(_ index: GeoIndex<Int>) { self.index = index }
    func nearest(_ p: GeoPoint, k: Int, meters: Double) throws -> [Int] { index.nearest(to: p, k: k, maxMeters: meters).map(\.id) }
}

/// GEOSEARCH … BYRADIUS r m ASC COUNT k; `expanding` starts r at 250 m and doubles it until k are found, as the
/// index does (one radius of 10 km makes Redis gather and sort every courier in reach).
///
/// `@unchecked Sendable`: each thread has an engine, and so a Redis connection, of its own.
final class RedisEngine: Engine, @unchecked Sendable {
    let redis: Redis
    let expanding: Bool
    var name: String { expanding ? "Redis, expanding" : "Redis, 10 km" }
    init(_ redis: Redis, expanding: Bool) { self.redis = redis; self.expanding = expanding }
    func nearest(_ p: GeoPoint, k: Int, meters: Double) throws -> [Int] {
        var radius = expanding ? min(250, meters) : meters
        while true {
            guard case .array(let items?) = try redis.call(["GEOSEARCH", "bench:couriers", "FROMLONLAT", "\(p.lon)", "\(p.lat)",
                                                            "BYRADIUS", "\(radius)", "m", "ASC", "COUNT", "\(k)"]) else {
                throw Redis.Failure(description: "GEOSEARCH failed")
            }
            if items.count >= k || radius >= meters {
                return items.compactMap { if case .bulk(let b?) = $0 { return Int(String(decoding: b, as: UTF8.self)) } else { return nil } }
            }
            radius = min(meters, radius * 2)
        }
    }
}

/// `@unchecked Sendable`: each thread has an engine, and so a PostgreSQL connection, of its own.
final class PostGISEngine: Engine, @unchecked Sendable {
    let name = "PostGIS KNN"
    let connection: Connection
    init(_ connection: Connection) { self.connection = connection }
    func nearest(_ p: GeoPoint, k: Int, meters: Double) throws -> [Int] {
        // KNN on geography (true distances, as the others), GiST-assisted; the radius is checked on the k found.
        try connection.rows("""
            SELECT id FROM (SELECT id, geog <-> ST_MakePoint($1, $2)::geography AS d FROM geobench.couriers
                ORDER BY geog <-> ST_MakePoint($1, $2)::geography LIMIT $3) n WHERE d <= $4
            """, [p.lon, p.lat, k, meters]).map { try $0["id"] }
    }
}

enum GeoBench {
    static func main() {
        var args = CommandLine.arguments.dropFirst()
        var couriers = 10_000, seconds = 3.0, runs = 3, threads = 2, k = 10, meters = 10_000.0
        var redisPort = 6390, databaseURL = ProcessInfo.processInfo.environment["DATABASE_URL"] ?? ""
        var geoadd = false
        while let a = args.popFirst() {
            if a == "--geoadd" { geoadd = true; continue }
            guard let v = args.popFirst() else { usage("\(a) needs a value") }
            switch a {
            case "--couriers": couriers = Int(v) ?? 0
            case "--seconds": seconds = Double(v) ?? 0
            case "--runs": runs = Int(v) ?? 0
            case "--threads": threads = Int(v) ?? 0
            case "--k": k = Int(v) ?? 0
            case "--redis-port": redisPort = Int(v) ?? 0
            case "--database-url": databaseURL = v
            default: usage("unknown option \(a)")
            }
        }
        if geoadd {
            do { try geoaddRate(couriers: couriers, seconds: seconds, threads: threads, redisPort: redisPort) }
            catch { FileHandle.standardError.write(Data("geo-bench: \(error)\n".utf8)); exit(1) }
            return
        }
        guard couriers > 0, seconds > 0, runs > 0, threads > 0, k > 0, !databaseURL.isEmpty else { usage("bad option values") }
        do { try run(couriers: couriers, seconds: seconds, runs: runs, threads: threads, k: k, meters: meters,
                     redisPort: redisPort, databaseURL: databaseURL) }
        catch { FileHandle.standardError.write(Data("geo-bench: \(error)\n".utf8)); exit(1) }
    }

    static func usage(_ problem: String) -> Never {
        FileHandle.standardError.write(Data("""
            geo-bench: \(problem)
            Usage: geo-bench --database-url URL [--couriers N] [--seconds S] [--runs R] [--threads C] [--k K] [--redis-port P]
                   geo-bench --geoadd [--couriers N] [--seconds S] [--threads C] [--redis-port P]
                   (Redis GEOADD of location fixes of N couriers, 1,000 a command as dispatch's operator batches, from C
                   connections for S seconds; prints the fixes a second)
            Usually run through bench/geo.sh, which starts Redis and PostgreSQL with PostGIS.

            """.utf8))
        exit(64)
    }

    static func log(_ s: String) { FileHandle.standardError.write(Data("\(s)\n".utf8)) }

    static func run(couriers: Int, seconds: Double, runs: Int, threads: Int, k: Int, meters: Double, redisPort: Int,
                    databaseURL: String) throws {
        // Couriers and query points in a 20 km square around Bucharest.
        var random = SeededRandom(state: UInt64(couriers))
        let halfLat = 10.0 / 111.32, halfLon = 10.0 / (111.32 * cos(44.4268 * .pi / 180))
        func point() -> GeoPoint {
            GeoPoint(lat: 44.4268 + (random.next() * 2 - 1) * halfLat, lon: 26.1025 + (random.next() * 2 - 1) * halfLon)
        }
        let points = (0..<couriers).map { _ in point() }
        let queries = (0..<4096).map { _ in point() }

        log("loading \(couriers) couriers into the index, Redis and PostGIS")
        let index = GeoIndex<Int>()
        for (i, p) in points.enumerated() { index.upsert(i, at: p) }
        let redis = try Redis(host: "127.0.0.1", port: redisPort)
        _ = try redis.call(["DEL", "bench:couriers"])
        for chunk in stride(from: 0, to: couriers, by: 1000) {
            var command = ["GEOADD", "bench:couriers"]
            for i in chunk..<min(couriers, chunk + 1000) { command += ["\(points[i].lon)", "\(points[i].lat)", "\(i)"] }
            _ = try redis.call(command)
        }
        let db = try Connection(url: databaseURL)
        try db.executeScript("""
            CREATE EXTENSION IF NOT EXISTS postgis;
            CREATE SCHEMA IF NOT EXISTS geobench;
            DROP TABLE IF EXISTS geobench.couriers;
            CREATE TABLE geobench.couriers (id int PRIMARY KEY, geog geography(Point, 4326) NOT NULL);
            """)
        for chunk in stride(from: 0, to: couriers, by: 10_000) {
            let range = chunk..<min(couriers, chunk + 10_000)
            _ = try db.execute("""
                INSERT INTO geobench.couriers SELECT id, ST_MakePoint(lon, lat)::geography
                FROM unnest($1::int[], $2::float8[], $3::float8[]) AS t (id, lon, lat)
                """, [PostgresArray(range.map { $0 }), PostgresArray(range.map { points[$0].lon }), PostgresArray(range.map { points[$0].lat })])
        }
        try db.executeScript("CREATE INDEX ON geobench.couriers USING gist (geog); ANALYZE geobench.couriers;")

        // Same answers? The nearest courier of each of 200 queries, against a brute-force scan.
        let engines: [(String, () throws -> Engine)] = [
            ("in-memory index", { IndexEngine(index) }),
            ("Redis, 10 km", { RedisEngine(try Redis(host: "127.0.0.1", port: redisPort), expanding: false) }),
            ("Redis, expanding", { RedisEngine(try Redis(host: "127.0.0.1", port: redisPort), expanding: true) }),
            ("PostGIS KNN", { PostGISEngine(try Connection(url: databaseURL)) }),
        ]
        var agreement: [String: Int] = [:]
        for (name, make) in engines {
            let engine = try make()
            for q in queries.prefix(200) {
                let brute = points.indices.map { ($0, greatCircleMeters(points[$0], q)) }.min { $0.1 < $1.1 }!.0
                if let first = try engine.nearest(q, k: k, meters: meters).first,
                   abs(greatCircleMeters(points[first], q) - greatCircleMeters(points[brute], q)) < 1 { agreement[name, default: 0] += 1 }
            }
        }

        var medians: [String: Double] = [:]
        for (name, make) in engines {
            var rates: [Double] = []
            for r in 1...runs {
                let stop = Date().addingTimeInterval(seconds)
                let workers = try (0..<threads).map { _ in try make() }
                let total = try onThreads(threads) { t in
                    var i = t * 997, n = 0
                    while Date() < stop {
                        _ = try workers[t].nearest(queries[i & 4095], k: k, meters: meters)
                        i += 1; n += 1
                    }
                    return n
                }
                let rate = Double(total) / seconds
                rates.append(rate)
                log(String(format: "  %@ run %d: %.0f queries/s", name, r, rate))
            }
            medians[name] = rates.sorted()[rates.count / 2]
        }
        let ours = medians["in-memory index"] ?? 0
        print("\nNearest \(k) couriers within \(Int(meters)) m, \(couriers) couriers in a 20 km square, \(threads) threads, median of \(runs) × \(Int(seconds)) s")
        print("engine              queries/s   index ÷ engine   nearest agrees with brute force")
        // Redis GEOSEARCH: with one 10 km radius, and with the index's own strategy (250 m, doubling).
        for (name, _) in engines {
            let rate = medians[name] ?? 0
            print(name.padding(toLength: 18, withPad: " ", startingAt: 0)
                  + String(format: "%11.0f %14.2f×     %d/200", rate, rate > 0 ? ours / rate : 0, agreement[name] ?? 0))
        }
        try db.executeScript("DROP SCHEMA geobench CASCADE")
        _ = try redis.call(["DEL", "bench:couriers"])
    }
}

extension GeoBench {
    /// Fixes a second Redis takes as `GEOADD` commands of 1,000 members (moves of random couriers in the square).
    static func geoaddRate(couriers: Int, seconds: Double, threads: Int, redisPort: Int) throws {
        let stop = Date().addingTimeInterval(seconds)
        let total = try onThreads(threads) { t in
            var random = SeededRandom(state: UInt64(t + 1))
            var n = 0
            let redis = try Redis(host: "127.0.0.1", port: redisPort)
            while Date() < stop {
                var command = ["GEOADD", "bench:fixes"]
                command.reserveCapacity(3002)
                for _ in 0..<1000 {
                    command += [String(26.0 + random.next() * 0.2), String(44.3 + random.next() * 0.2),
                                String(Int(random.next() * Double(couriers)))]
                }
                _ = try redis.call(command)
                n += 1000
            }
            return n
        }
        _ = try Redis(host: "127.0.0.1", port: redisPort).call(["DEL", "bench:fixes"])
        print(String(format: "%.0f", Double(total) / seconds))
    }

    /// Runs `work(t)` for t in 0..<threads on threads of their own at once; returns the sum of what they return.
    static func onThreads(_ threads: Int, _ work: @escaping @Sendable (Int) throws -> Int) throws -> Int {
        let counts = Counts(threads)
        let failure = Failure()
        let group = DispatchGroup()
        for t in 0..<threads {
            group.enter()
            Thread {
                do { counts.set(t, try work(t)) } catch { failure.set(error) }
                group.leave()
            }.start()
        }
        group.wait()
        if let error = failure.error { throw error }
        return counts.total
    }
}

/// `@unchecked Sendable`: each thread writes its own slot under `lock`.
final class Counts: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Int]
    init(_ n: Int) { values = Array(repeating: 0, count: n) }
    func set(_ i: Int, _ v: Int) { lock.lock(); values[i] = v; lock.unlock() }
    var total: Int { lock.lock(); defer { lock.unlock() }; return values.reduce(0, +) }
}

/// `@unchecked Sendable`: guarded by `lock`.
final class Failure: @unchecked Sendable {
    private let lock = NSLock()
    private var first: Error?
    var error: Error? { lock.lock(); defer { lock.unlock() }; return first }
    func set(_ e: Error) { lock.lock(); if first == nil { first = e }; lock.unlock() }
}
