import Foundation

/// A value split into shards, each behind a lock of its own, for state that every request touches from all the
/// server's threads at once (the kit's metrics and its token cache): with one lock they queue. Each lock is a
/// pthread read-write lock, so that lookups (`read`) of one shard run side by side: every request of a benchmark
/// carries one token, and with a `Mutex` the 16 server threads spent an eighth of auth's CPU waiting for its shard.
///
/// `@unchecked Sendable`: each shard's value is touched only under its lock.
public final class Sharded<Value: Sendable>: @unchecked Sendable {
    private final class Shard {
        var value: Value
        let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
        init(_ value: Value) { self.value = value; pthread_rwlock_init(lock, nil) }
        deinit { pthread_rwlock_destroy(lock); lock.deallocate() }
    }
    private let shards: [Shard]

    public init(count: Int, _ make: () -> Value) { shards = (0..<count).map { _ in Shard(make()) } }

    private func shard(_ index: Int) -> Shard { shards[Int(UInt(bitPattern: index) % UInt(shards.count))] }

    /// Runs `body` on shard `index % count` under its lock, alone.
    public func withLock<R>(_ index: Int, _ body: (inout Value) throws -> R) rethrows -> R {
        let shard = shard(index)
        pthread_rwlock_wrlock(shard.lock)
        defer { pthread_rwlock_unlock(shard.lock) }
        return try body(&shard.value)
    }

    /// Reads shard `index % count`, beside other readers.
    public func read<R>(_ index: Int, _ body: (Value) throws -> R) rethrows -> R {
        let shard = shard(index)
        pthread_rwlock_rdlock(shard.lock)
        defer { pthread_rwlock_unlock(shard.lock) }
        return try body(shard.value)
    }

    /// Every shard's value, one lock at a time.
    public var values: [Value] { shards.indices.map { read($0) { $0 } } }

    /// Runs `body` on every shard.
    public func forEach(_ body: (inout Value) -> Void) { for i in shards.indices { withLock(i) { body(&$0) } } }
}
