import Foundation
import Geo
import Models
import Postgres
import Runtime
import Synchronization

/// The live positions of online couriers, in memory: rebuilt from PostgreSQL at start and kept current from the
/// fixes this instance receives, from the fixes other instances announce as they commit (notifications on
/// `DispatchStorage.positionsChannel`), and, on the same thread, from the courier rows other instances changed (going
/// online or off, taking or leaving a parcel) and the couriers erased (`DispatchStorage.erasedChannel`). PostgreSQL
/// stays the source of truth for offers and assignments; a courier's row holds their position as of the last fold
/// (`DispatchStorage.foldFixes`), and this the newer ones.
///
/// What is known of a courier has two parts, each with its own time: whether they could take a parcel, as of their
/// row's `updated_at`, and where they are, as of their fix. A part never goes back to an older state: a read may
/// return a row just before a newer fix or change already reached the index. Notifications sent while this
/// instance was not listening are lost, so each time it starts listening it folds every appended fix, reads every
/// courier who can take a parcel again, and forgets those it knows whose rows are gone (erased meanwhile).
///
/// `@unchecked Sendable`: `nextSince`, `loaded` and `generations` are guarded by `condition`; `known` is a `Mutex`
/// held around each index change, so a check and its change are one step; the index locks itself.
final class Matcher: @unchecked Sendable {
    let index = GeoIndex<UUID>()
    /// This instance, in the fixes it announces.
    let origin = UUID()
    /// How long a courier has to answer an offer (`OFFER_TIMEOUT_SECONDS`).
    let offerTimeout: TimeInterval
    /// How far from a pickup a courier may be to be offered it (`MATCH_MAX_METERS`).
    let maxMeters: Double

    init(offerTimeout: TimeInterval, maxMeters: Double) {
        self.offerTimeout = offerTimeout
        self.maxMeters = maxMeters
    }

    /// One for every courier this instance heard of. Swift lays fields out in the order written: with the flags
    /// last an entry takes 40 bytes, not 56 (4 MB less with 100,000 couriers).
    private struct Known {
        var asOf = Date.distantPast
        var fixAt = Date.distantPast
        var position: GeoPoint?
        var available = false
        /// Whether their row was read (and they were not erased since): a fix of theirs needs no look at it to be
        /// known to be of a registered courier.
        var hasRow = false
    }

    private let known = Mutex<[UUID: Known]>([:])
    private let strandedChecked = Mutex(Date.distantPast)
    private let pruned = Mutex(Date())  // when `known` was last pruned
    private let condition = NSCondition()
    private var generations = [Int](repeating: 0, count: 1)  // a worker's, bumped by `wake`
    private var loaded = false
    private var nextSince: Date?  // where the next refresh reads from (see `DispatchStorage.couriersChanged`)

    func update(_ courier: CourierRecord) {
        update(courier.userId, available: courier.online && courier.vetting == .approved && courier.active < courier.capacity, asOf: courier.updatedAt,
               position: courier.position, fixAt: courier.fixAt)
    }

    /// Records that the courier could take a parcel (`available`) as their row was at `asOf`, and that they were at
    /// `position` at `fixAt`; each part only when newer than what is known. The index holds exactly the couriers
    /// known to be able to take a parcel and placed. Returns whether the position was newer.
    @discardableResult
    func update(_ id: UUID, available: Bool? = nil, asOf: Date = .distantPast, position: GeoPoint? = nil, fixAt: Date? = nil) -> Bool {
        known.withLock { apply(id, available, asOf, position, fixAt, to: &$0) }
    }

    /// `update` for each of a request's fixes, with what the courier's row said, under one hold of the lock: taken
    /// for each of a batch's thousand fixes, 2% of dispatch's work was waiting for it. Whether each position was
    /// newer, in order.
    func update(fixes: [(id: UUID, available: Bool?, asOf: Date, position: GeoPoint, fixAt: Date)]) -> [Bool] {
        known.withLock { known in fixes.map { apply($0.id, $0.available, $0.asOf, $0.position, $0.fixAt, to: &known) } }
    }

    private func apply(_ id: UUID, _ available: Bool?, _ asOf: Date, _ position: GeoPoint?, _ fixAt: Date?, to known: inout [UUID: Known]) -> Bool {
        var entry = known[id] ?? Known()
        var changed = false, moved = false
        if let available, asOf > entry.asOf { entry.available = available; entry.asOf = asOf; entry.hasRow = true; changed = true }
        if let position, let fixAt, fixAt > entry.fixAt { entry.position = position; entry.fixAt = fixAt; changed = true; moved = true }
        guard changed else { return false }
        known[id] = entry
        if entry.available, let position = entry.position { index.upsert(id, at: position) } else { index.remove(id) }
        return moved
    }

    /// Whether each fix is one its courier could have reached from their last known position (`Fix.reachable`):
    /// O(1) each, from what the index already holds, under one hold of the lock. A courier with no position known
    /// here, or a fix older than it (ignored anyway), passes.
    func reachable(_ fixes: [Fix]) -> [Bool] {
        known.withLock { known in
            fixes.map { f in
                guard let k = known[f.courier], let last = k.position, f.time > k.fixAt else { return true }
                return Fix.reachable(from: last, at: k.fixAt, to: f.point, at: f.time)
            }
        }
    }

    /// Whether each of `ids` is a courier whose row this instance read, and who was not erased since.
    func knowsRows(of ids: [UUID]) -> [Bool] {
        known.withLock { known in ids.map { known[$0]?.hasRow == true } }
    }

    /// Where the courier was last, if this instance knows a fix newer than `stored` (their row's, which a fix reaches
    /// only when folded, up to `FIX_FOLD_SECONDS` later): every fix it recorded, and every fix another instance
    /// announced while it listened.
    func position(of id: UUID, newerThan stored: Date?) -> (point: GeoPoint, at: Date)? {
        known.withLock { known in
            known[id].flatMap { k in k.fixAt > stored ?? .distantPast ? k.position.map { ($0, k.fixAt) } : nil }
        }
    }

    /// Every courier with a fix newer than `time`, as far as this instance knows (see `position(of:newerThan:)`).
    func positions(newerThan time: Date) -> [(id: UUID, point: GeoPoint, at: Date)] {
        known.withLock { known in
            known.compactMap { id, k in k.fixAt > time ? k.position.map { (id, $0, k.fixAt) } : nil }
        }
    }

    /// `courier` with their newest position.
    func latest(_ courier: CourierRecord) -> CourierRecord {
        guard let (point, at) = position(of: courier.userId, newerThan: courier.fixAt) else { return courier }
        var courier = courier
        courier.position = point
        courier.fixAt = at
        return courier
    }

    /// Applies the fixes another instance announced (this one's were applied as it recorded them), or an erasure.
    func apply(_ notification: PostgresNotification) {
        if notification.channel == DispatchStorage.erasedChannel {
            if let id = UUID(uuidString: notification.payload) { erased(id) }
            return
        }
        for fix in PositionNotice.decode(notification.payload, skipping: origin) { update(fix.courier, position: fix.point, fixAt: fix.at) }
    }

    /// The courier was erased: out of the index, and, as of now, unable to take a parcel (a refresh that read their
    /// row before it went is older); their fixes are looked up again, and found to be nobody's.
    func erased(_ id: UUID) {
        known.withLock { known in
            _ = apply(id, false, Date(), nil, nil, to: &known)
            known[id]?.hasRow = false
        }
    }

    /// Couriers to offer a parcel at `pickup` to, nearest first, within `maxMeters`, minus `excluded`.
    func candidates(near pickup: GeoPoint, excluding excluded: Set<UUID>) -> [UUID] {
        index.nearest(to: pickup, k: 10, maxMeters: maxMeters, where: { !excluded.contains($0) }).map(\.id)
    }

    /// Whether any courier who could take a parcel is within `maxMeters` of `pickup`.
    func anyoneInReach(of pickup: GeoPoint) -> Bool {
        !index.nearest(to: pickup, k: 1, maxMeters: maxMeters).isEmpty
    }

    /// Whether the stranded parcels are due for a look (at most every `interval`).
    func strandedCheckIsDue(every interval: TimeInterval) -> Bool { Self.isDue(strandedChecked, every: interval) }

    /// Whether `interval` has passed since `last`, which then moves to now.
    private static func isDue(_ last: borrowing Mutex<Date>, every interval: TimeInterval) -> Bool {
        last.withLock { last in
            guard Date().timeIntervalSince(last) >= interval else { return false }
            last = Date()
            return true
        }
    }

    /// Reads the couriers whose rows changed since the last refresh, or (`everyone`, and the first time) every
    /// courier who can take a parcel. Rows commit in another order than their timestamps, so each read starts where
    /// the previous one said the transactions still open then had begun; when nothing changes, the window moves on
    /// and reads nothing. A read of everyone after the first leaves the window where it was: it only catches up on
    /// positions.
    func refresh(_ pool: Pool, everyone: Bool = false) throws {
        condition.lock(); let from = nextSince; condition.unlock()
        let changed = try pool.withConnection { try DispatchStorage().couriersChanged($0, since: everyone ? nil : from) }
        for c in changed.couriers { update(c.id, available: c.available, asOf: c.updatedAt, position: c.position, fixAt: c.fixAt) }
        // Forget, once a minute, couriers out of the index for a minute: memory follows the couriers online.
        let cutoff = changed.readAt.addingTimeInterval(-60)
        if Self.isDue(pruned, every: 60) {
            known.withLock { known in
                known = known.filter { index.point(of: $0.key) != nil || max($0.value.asOf, $0.value.fixAt) > cutoff }
            }
        }
        condition.lock()
        if !everyone || from == nil { nextSince = changed.nextSince }
        if !loaded { loaded = true; condition.broadcast() }
        condition.unlock()
    }

    /// Forgets the couriers it knows whose rows are gone: a row goes only when its courier is erased, and an erasure
    /// announced while this instance did not listen never reached it (the courier would stand among a pickup's
    /// nearest for good, never offered a parcel, keeping parcels only they could reach from being stranded).
    func forgetErased(_ pool: Pool) throws {
        let ids = known.withLock { Array($0.keys) }
        guard !ids.isEmpty else { return }
        for id in try pool.withConnection({ try DispatchStorage().withoutRows($0, ids) }) { erased(id) }
    }

    /// Asks the matching loops to run now (a parcel was declined or cancelled, or stranded ones came back).
    func wake() { condition.lock(); generations = generations.map { $0 + 1 }; condition.broadcast(); condition.unlock() }

    /// Asks the one loop whose share `parcel` is in (`MatchingRound.run`) to run now: a parcel was created. Waking
    /// every loop made each read the waiting parcels for a parcel only one of them offers.
    func wake(for parcel: UUID) {
        condition.lock()
        generations[Int(parcel.uuid.15) % generations.count] += 1
        condition.broadcast()
        condition.unlock()
    }

    /// The background work of matching: one job listens for fixes and refreshes the index every `interval` (first
    /// listening, then reading everyone, so no fix falls between); each of `workers` others runs `tick(worker)` every
    /// `interval`, or sooner when woken, once the index was first loaded. Refreshing apart keeps its cost out of
    /// dispatch latency; several workers keep offering while others wait on the database.
    func services(interval: TimeInterval, workers: Int, pool: Pool, logger: Logger,
                  tick: @escaping @Sendable (Int) throws -> Void) -> [any BackgroundService] {
        condition.lock(); generations = [Int](repeating: 0, count: workers); condition.unlock()
        let feed = Job("matcher-feed") { [self] cancellation in
            var listener: Connection?
            var nextRefresh = Date.distantPast
            while !cancellation.isCancelled {
                do {
                    if listener == nil {
                        let connection = try pool.unpooledConnection()
                        try connection.execute("LISTEN \(unescaped: DispatchStorage.positionsChannel)")
                        try connection.execute("LISTEN \(unescaped: DispatchStorage.erasedChannel)")
                        // Listening is done only once this has read what came before, every appended fix folded.
                        try DispatchStorage().foldFixes(pool, wait: true)
                        try refresh(pool, everyone: true)
                        try forgetErased(pool)
                        listener = connection
                        nextRefresh = Date().addingTimeInterval(interval)
                    }
                    if Date() >= nextRefresh {
                        try refresh(pool)
                        nextRefresh = Date().addingTimeInterval(interval)
                    }
                    for notification in try listener?.notifications(timeout: nextRefresh.timeIntervalSinceNow) ?? [] {
                        apply(notification)
                    }
                } catch {
                    if listener?.isHealthy != true { listener = nil }
                    logger.warn("reading courier positions failed", ["error": .string("\(error)")])
                    _ = cancellation.sleep(interval)
                }
            }
        }
        return [feed] + (0..<workers).map { worker in
            Job("matcher-\(worker)") { [self] cancellation in
                cancellation.onCancel { [weak self] in self?.wake() }
                condition.lock()
                while !loaded && !cancellation.isCancelled { condition.wait() }
                var seen = generations[worker]
                condition.unlock()
                while !cancellation.isCancelled {
                    condition.lock()
                    // The condition is shared: a broadcast for another loop's parcel is no reason to run.
                    let due = Date().addingTimeInterval(interval)
                    while generations[worker] == seen && condition.wait(until: due) {}
                    seen = generations[worker]
                    condition.unlock()
                    if cancellation.isCancelled { break }
                    do { try tick(worker) } catch { logger.warn("matching failed", ["error": .string("\(error)")]) }
                }
            }
        }
    }
}

/// One round of a matching worker, over the parcel rules.
struct MatchingRound: Sendable {
    let pool: Pool
    let parcels: Parcels
    let matcher: Matcher

    /// The first worker expires unanswered offers and, at most every `recheckInterval`, gives the stranded parcels
    /// a courier has come within reach of back to matching. Each offers its share of the waiting parcels (express
    /// first, oldest first); one with no courier within reach is marked stranded instead, without a transaction,
    /// and later rounds leave it out (stranded parcels: those of a district with nobody online). Shares split by
    /// parcel id; across instances row locks keep them apart.
    func run(worker: Int, of workers: Int, recheckInterval: TimeInterval) throws {
        if worker == 0 {
            try pool.withTransaction { try parcels.expireOffers($0) }
            if matcher.strandedCheckIsDue(every: recheckInterval) {
                let stranded = try pool.withConnection { try parcels.storage.awaiting($0, stranded: true, limit: 10_000) }
                let back = stranded.filter { matcher.anyoneInReach(of: $0.pickup) }.map(\.id)
                if !back.isEmpty {
                    try pool.withConnection { try parcels.storage.setStranded($0, back, false) }
                    matcher.wake()
                }
            }
        }
        let waiting = try pool.withConnection { try parcels.storage.awaiting($0, limit: 100 * workers) }
        let mine = waiting.filter { Int($0.id.uuid.15) % workers == worker }
        let unreachable = mine.filter { !matcher.anyoneInReach(of: $0.pickup) }.map(\.id)
        if !unreachable.isEmpty { try pool.withConnection { try parcels.storage.setStranded($0, unreachable, true) } }
        for (id, _) in mine where !unreachable.contains(id) {
            _ = try pool.withTransaction { try parcels.offer($0, id) }
        }
    }
}
