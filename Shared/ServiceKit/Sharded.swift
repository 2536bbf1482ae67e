import Synchronization

/// A value split into shards, each behind a lock of its own, for state that every request touches from all the
/// server's threads at once: with one lock they queue (Swift's `Mutex` parks a waiting thread). Here, in the lowest
/// module that has such state (the server's connection guard; the kit's metrics and token cache use it too).
public final class Sharded<Value: Sendable>: Sendable {
    private final class Shard: Sendable {
        let value: Mutex<Value>
        init(_ value: Value) { self.value = Mutex(value) }
    }
    private let shards: [Shard]

    public init(count: Int, _ make: () -> Value) { shards = (0..<count).map { _ in Shard(make()) } }

    /// Runs `body` on shard `index % count` under its lock.
    public func withLock<R: Sendable>(_ index: Int, _ body: (inout Value) throws -> R) rethrows -> R {
        try shards[Int(UInt(bitPattern: index) % UInt(shards.count))].value.withLock { try body(&$0) }
    }

    /// Every shard's value, one lock at a time.
    public var values: [Value] { shards.map { $0.value.withLock { $0 } } }

    /// Runs `body` on every shard.
    public func forEach(_ body: (inout Value) -> Void) { for shard in shards { shard.value.withLock { body(&$0) } } }
}
