import Foundation

/// The threads that run handlers. A worker thread reads and writes many connections; a handler may block (on
/// PostgreSQL, on Argon2), so it runs here, and holds no connection but its own while it waits. At most `maxQueued`
/// requests wait for a thread: past that the server answers 503 at once rather than queue without bound.
///
/// `@unchecked Sendable`: the queue is guarded by `condition`.
final class HandlerPool: @unchecked Sendable {
    private let condition = NSCondition()
    private var queue: [@Sendable () -> Void] = []
    private var head = 0
    private var stopped = false
    private let maxQueued: Int

    init(threads: Int, maxQueued: Int) {
        self.maxQueued = maxQueued
        for index in 0..<max(1, threads) {
            let thread = Thread { [self] in work() }
            thread.name = "handler-\(index)"
            thread.start()
        }
    }

    /// Queues `job`; false when too many already wait (or the pool stopped).
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        condition.lock(); defer { condition.unlock() }
        guard !stopped, queue.count - head < maxQueued else { return false }
        queue.append(job)
        condition.signal()
        return true
    }

    /// Lets the queued jobs run, then ends the threads.
    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while head == queue.count && !stopped { condition.wait() }
            if head == queue.count {
                condition.unlock()
                return
            }
            let job = queue[head]
            head += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024 && head * 2 >= queue.count {
                queue.removeFirst(head)
                head = 0
            }
            condition.unlock()
            job()
        }
    }
}
