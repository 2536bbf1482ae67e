#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Many readers or one writer (pthread_rwlock): queries of the index run side by side.
///
/// `@unchecked Sendable`: the lock is the synchronisation.
@usableFromInline final class ReadWriteLock: @unchecked Sendable {
    @usableFromInline let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)

    @usableFromInline init() { pthread_rwlock_init(lock, nil) }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    @inlinable func read<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    func write<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}
