import Foundation
import Synchronization

// MARK: - Cancellation

/// The signal that asks a piece of background work to stop, with the deadline by which it must have stopped.
/// Work waits on it instead of sleeping, so a stop is noticed at once.
///
/// `@unchecked Sendable`: every field is guarded by `condition`.
public final class Cancellation: @unchecked Sendable {
    private let condition = NSCondition()
    private var cancelled = false
    private var stopBy = Date.distantFuture
    private var handlers: [@Sendable () -> Void] = []

    public init() {}

    /// Whether a stop was asked for.
    public var isCancelled: Bool { condition.lock(); defer { condition.unlock() }; return cancelled }

    /// When the work must have stopped (distant future until cancelled).
    public var deadline: Date { condition.lock(); defer { condition.unlock() }; return stopBy }

    /// Asks the work to stop by `deadline`; runs the `onCancel` handlers once.
    public func cancel(deadline: Date = Date()) {
        condition.lock()
        guard !cancelled else { condition.unlock(); return }
        cancelled = true
        stopBy = deadline
        let run = handlers
        handlers = []
        condition.broadcast()
        condition.unlock()
        run.forEach { $0() }
    }

    /// Runs `handler` when a stop is asked for (at once if it already was): for work blocked elsewhere, say on a
    /// condition of its own, that needs a nudge.
    public func onCancel(_ handler: @escaping @Sendable () -> Void) {
        condition.lock()
        if cancelled { condition.unlock(); handler(); return }
        handlers.append(handler)
        condition.unlock()
    }

    /// Waits up to `seconds`; true when the time passed, false as soon as a stop is asked for.
    @discardableResult
    public func sleep(_ seconds: TimeInterval) -> Bool {
        let until = Date().addingTimeInterval(seconds)
        condition.lock(); defer { condition.unlock() }
        while !cancelled && condition.wait(until: until) {}
        return !cancelled
    }

    /// Waits until a stop is asked for.
    public func wait() {
        condition.lock(); defer { condition.unlock() }
        while !cancelled { condition.wait() }
    }
}

/// A one-way switch that work can wait for (say, "the topics exist").
///
/// `@unchecked Sendable`: guarded by `condition`.
public final class Gate: @unchecked Sendable {
    private let condition = NSCondition()
    private var isOpenValue = false

    public init() {}

    /// Whether it was opened.
    public var isOpen: Bool { condition.lock(); defer { condition.unlock() }; return isOpenValue }

    /// Opens it for every waiter, now and later.
    public func open() { condition.lock(); isOpenValue = true; condition.broadcast(); condition.unlock() }

    /// Waits until it opens (true) or `cancellation` fires (false).
    public func wait(_ cancellation: Cancellation) -> Bool {
        cancellation.onCancel { [weak self] in
            guard let self else { return }
            condition.lock(); condition.broadcast(); condition.unlock()
        }
        condition.lock(); defer { condition.unlock() }
        while !isOpenValue && !cancellation.isCancelled { condition.wait() }
        return isOpenValue
    }

    /// Waits until it opens (true) or `deadline` passes (false).
    public func wait(until deadline: Date) -> Bool {
        condition.lock(); defer { condition.unlock() }
        while !isOpenValue && condition.wait(until: deadline) {}
        return isOpenValue
    }
}

// MARK: - Background services

/// One piece of background work: the HTTP server, the outbox relay, a consumer, a live feed, a scheduled job.
/// `run` does the work until `cancellation` fires and returns by its deadline. It runs on a thread of its own,
/// so it may block (libpq, librdkafka); it never runs on Swift's cooperative pool.
public protocol BackgroundService: Sendable {
    /// Names it in logs (`outbox-relay`, `consumer-profiles`, ...).
    var name: String { get }
    /// Works until `cancellation` fires, then returns.
    func run(until cancellation: Cancellation) throws
}

/// A background service made of a closure.
public struct Job: BackgroundService {
    public let name: String
    private let body: @Sendable (Cancellation) throws -> Void

    public init(_ name: String, _ body: @escaping @Sendable (Cancellation) throws -> Void) {
        self.name = name; self.body = body
    }

    public func run(until cancellation: Cancellation) throws { try body(cancellation) }

    /// Runs `job` every `seconds` until stopped; a failure is logged and the next round comes as usual.
    public static func every(_ seconds: TimeInterval, _ name: String, logger: Logger,
                             _ job: @escaping @Sendable () throws -> Void) -> Job {
        Job(name) { cancellation in
            while cancellation.sleep(seconds) {
                do { try job() } catch { logger.warn("periodic job failed", ["job": .string(name), "error": .string("\(error)")]) }
            }
        }
    }
}

/// Runs background services side by side, each on its own thread, and stops them together by one shared deadline
/// (the shape of swift-service-lifecycle's `ServiceGroup`). What must stop before something else starts stopping (the
/// HTTP server before the outbox relay) goes in a group of its own, stopped first.
public final class ServiceGroup: Sendable {
    private final class Running: Sendable {
        let name: String
        let cancellation = Cancellation()
        let done = Gate()
        /// When `run` returned.
        let stoppedAt = Mutex<Date?>(nil)
        init(name: String) { self.name = name }
    }

    private let logger: Logger
    private let running = Mutex<[Running]>([])
    private let failed: @Sendable (String, Error) -> Void

    /// `failed` is told when a service's `run` throws (the app then stops).
    public init(logger: Logger, failed: @escaping @Sendable (String, Error) -> Void) {
        self.logger = logger; self.failed = failed
    }

    /// Starts `service` on a thread of its own.
    public func start(_ service: any BackgroundService) {
        let entry = Running(name: service.name)
        running.withLock { $0.append(entry) }
        let (logger, failed) = (self.logger, self.failed)
        let thread = Thread {
            do {
                try service.run(until: entry.cancellation)
            } catch {
                logger.error("background service failed", ["service": .string(service.name), "error": .string("\(error)")])
                if !entry.cancellation.isCancelled { failed(service.name, error) }
            }
            entry.stoppedAt.withLock { $0 = Date() }
            entry.done.open()
        }
        thread.name = service.name
        thread.start()
    }

    /// Stops every service: asks them all at once, so that one blocked in a call it cannot leave (a connection
    /// attempt, a broker's request) holds back no other, then waits for each until `deadline`. Returns the names of
    /// those that had not stopped by then (they are logged too).
    @discardableResult
    public func stop(deadline: Date) -> [String] {
        let all = running.withLock { list -> [Running] in defer { list = [] }; return list }
        let asked = Date()
        for entry in all { entry.cancellation.cancel(deadline: deadline) }
        var late: [String] = []
        for entry in all {
            // Named while it is still awaited: a container killed at the end of its grace period logs nothing after.
            if !entry.done.wait(until: min(deadline, asked.addingTimeInterval(1))) {
                logger.warn("still stopping", ["service": .string(entry.name)])
            }
            if !entry.done.wait(until: deadline) {
                late.append(entry.name)
                logger.error("did not stop by the shutdown deadline", ["service": .string(entry.name)])
            } else if let took = entry.stoppedAt.withLock({ $0 })?.timeIntervalSince(asked), took > 1 {
                // What to look at when a container's grace runs out.
                logger.warn("slow to stop", ["service": .string(entry.name), "seconds": .double(took)])
            }
        }
        return late
    }
}
