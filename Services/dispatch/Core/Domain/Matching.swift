import Foundation
import Geo
import Models
import Postgres
import Runtime
import Synchronization

/// The live positions of online couriers, in memory: rebuilt from PostgreSQL at start and kept current from the
/// fixes this instance receives and, on its own thread, from the rows other instances changed. PostgreSQL stays the
/// source of truth for offers and assignments.
///
/// Each courier's entry carries the time of the row it came from (`updated_at`), and an older row never replaces a
/// newer one: the refresh may read a row just before a fix commits, after the fix already placed the courier. A row
/// read again unchanged (same time) leaves the index alone.
///
/// `@unchecked Sendable`: `nextSince`, `loaded` and `generation` are guarded by `condition`; `versions` is a `Mutex`
/// held around each index change, so a check and its change are one step; the index locks itself.
final class Matcher: @unchecked Sendable {
    let index = GeoIndex<UUID>()
    private let versions = Mutex<[UUID: Date]>([:])
    private let strandedChecked = Mutex(Date.distantPast)
    private let condition = NSCondition()
    private var generation = 0  // bumped by `wake`
    private var loaded = false
    private var nextSince: Date?  // where the next refresh reads from (see `DispatchStorage.couriersChanged`)

    /// Keeps in the index exactly the couriers who could take a parcel: online, placed, with room.
    func update(_ courier: CourierRecord) {
        update(courier.userId, available: courier.online && courier.active < courier.capacity ? courier.position : nil,
               asOf: courier.updatedAt)
    }

    /// Places a courier who could take a parcel at `position` (nil takes them out), as their row was at `asOf`;
    /// nothing changes when the index already holds a newer state of them.
    func update(_ id: UUID, available position: GeoPoint?, asOf: Date) {
        versions.withLock { versions in
            if let known = versions[id], known >= asOf { return }
            versions[id] = asOf
            if let position { index.upsert(id, at: position) } else { index.remove(id) }
        }
    }

    /// Couriers to offer a parcel at `pickup` to, nearest first, within `maxMeters`, minus `excluded`.
    func candidates(near pickup: GeoPoint, excluding excluded: Set<UUID>, maxMeters: Double) -> [UUID] {
        index.nearest(to: pickup, k: 10, maxMeters: maxMeters, where: { !excluded.contains($0) }).map(\.id)
    }

    /// Whether any courier who could take a parcel is within `maxMeters` of `pickup`.
    func anyoneInReach(of pickup: GeoPoint, maxMeters: Double) -> Bool {
        !index.nearest(to: pickup, k: 1, maxMeters: maxMeters).isEmpty
    }

    /// Whether the stranded parcels are due for a look (at most every `interval`).
    func strandedCheckIsDue(every interval: TimeInterval) -> Bool {
        strandedChecked.withLock { last in
            guard Date().timeIntervalSince(last) >= interval else { return false }
            last = Date()
            return true
        }
    }

    /// Reads the couriers changed since the last refresh (at first, those who can take a parcel). Rows commit in
    /// another order than their timestamps, so each read starts where the previous one said the transactions still
    /// open then had begun (before, a fixed two seconds back: every fix was read about five times, and a change
    /// committed later than that was missed); when nothing changes, the window moves on and reads nothing.
    func refresh(_ pool: Pool) throws {
        condition.lock(); let from = nextSince; condition.unlock()
        let changed = try pool.withConnection { try DispatchStorage().couriersChanged($0, since: from) }
        for courier in changed.couriers { update(courier.id, available: courier.position, asOf: courier.updatedAt) }
        // Forget the versions of couriers out of the index for a minute: memory follows the couriers online.
        let cutoff = changed.readAt.addingTimeInterval(-60)
        versions.withLock { versions in
            if versions.count > 2 * index.count + 1000 {
                versions = versions.filter { index.point(of: $0.key) != nil || $0.value > cutoff }
            }
        }
        condition.lock()
        nextSince = changed.nextSince
        if !loaded { loaded = true; condition.broadcast() }
        condition.unlock()
    }

    /// Asks the matching loops to run now (a parcel was created, declined or cancelled).
    func wake() { condition.lock(); generation += 1; condition.broadcast(); condition.unlock() }

    /// The background work of matching: one job refreshes the index every `interval`; each of `workers` others runs
    /// `tick(worker)` every `interval`, or sooner when woken, once the index was first loaded. Refreshing apart keeps
    /// its cost out of dispatch latency; several workers keep offering while others wait on the database.
    func services(interval: TimeInterval, workers: Int, pool: Pool, logger: Logger,
                  tick: @escaping @Sendable (Int) throws -> Void) -> [any BackgroundService] {
        let refresher = Job("matcher-refresh") { [self] cancellation in
            repeat {
                do { try refresh(pool) } catch { logger.warn("reading courier positions failed", ["error": .string("\(error)")]) }
            } while cancellation.sleep(interval)
        }
        return [refresher] + (0..<workers).map { worker in
            Job("matcher-\(worker)") { [self] cancellation in
                cancellation.onCancel { [weak self] in self?.wake() }
                condition.lock()
                while !loaded && !cancellation.isCancelled { condition.wait() }
                var seen = generation
                condition.unlock()
                while !cancellation.isCancelled {
                    condition.lock()
                    if generation == seen { _ = condition.wait(until: Date().addingTimeInterval(interval)) }
                    seen = generation
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
    let offerTimeout: TimeInterval
    let maxMeters: Double

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
                let back = stranded.filter { matcher.anyoneInReach(of: $0.pickup, maxMeters: maxMeters) }.map(\.id)
                if !back.isEmpty {
                    try pool.withConnection { try parcels.storage.setStranded($0, back, false) }
                    matcher.wake()
                }
            }
        }
        let waiting = try pool.withConnection { try parcels.storage.awaiting($0, limit: 100 * workers) }
        let mine = waiting.filter { Int($0.id.uuid.15) % workers == worker }
        let unreachable = mine.filter { !matcher.anyoneInReach(of: $0.pickup, maxMeters: maxMeters) }.map(\.id)
        if !unreachable.isEmpty { try pool.withConnection { try parcels.storage.setStranded($0, unreachable, true) } }
        for (id, _) in mine where !unreachable.contains(id) {
            try pool.withTransaction { c in
                _ = try parcels.offer(c, id, timeout: offerTimeout) { pickup, declined in
                    matcher.candidates(near: pickup, excluding: declined, maxMeters: maxMeters)
                }
            }
        }
    }
}
