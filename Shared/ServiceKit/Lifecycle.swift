import CShims
import Crypto
import Events
import Foundation
import HTTP
import Identity
import Kafka
import Models
import Postgres
import Runtime
import Synchronization
import Web

/// Running and stopping: the port opened first, then the database, the routes and the background services; a stop
/// closes them in reverse order by one deadline.
extension ServiceApp {
    /// The port the HTTP server listens on (the chosen one when `PORT=0`), once `run` has opened it.
    public var port: Int { bound.load(ordering: .acquiring) }

    /// Whether the service serves its routes (setup done, background services started).
    public var isServing: Bool { serving.load(ordering: .acquiring) }

    /// Asks `run` to stop, as SIGTERM does. Safe from any thread, at any time, also before `run`.
    public func stop() { stopping.cancel() }

    /// Serves until `stop`, then stops gracefully and returns. Throws `StartupError` when the port cannot be bound,
    /// the database cannot be reached within a minute or migrations fail, and whatever `setup` throws.
    public func run() throws {
        signal(SIGPIPE, SIG_IGN)
        // Requests waiting for a password hash hold a handler thread: half of them stay for everything else.
        PasswordHasher.admissionLimit = max(1, config.handlerThreads / 2)
        let server = HTTPServer(host: config.bindAddress, port: UInt16(config.port), threads: config.httpThreads,
                                handlerThreads: config.handlerThreads, maxQueued: config.maxQueued, limits: config.connectionLimits,
                                report: { [refusals] in refusals.record($0, address: $1) },
                                route: { [unowned self] method, path in
                                    (servingRoutes.load() ?? startingRoutes.load())?.router.match(method: method, path: path)
                                        ?? Router().match(method: method, path: path)
                                },
                                respond: { [unowned self] request, match in respond(request, match) })
        var standard = Router()
        addHealthRoutes(&standard)
        _ = startingRoutes.storeIfNil(Routes(standard))
        do { try server.start() } catch { throw StartupError.cannotListen(port: config.port) }
        bound.store(Int(server.boundPort), ordering: .releasing)
        logger.info("listening", ["port": .int(port)])

        // Stopped one group after the other: no new request (and those in flight finish), then every consumer and job
        // together, then the relay, which publishes what they all wrote.
        let failed: @Sendable (String, Error) -> Void = { [weak self] _, _ in self?.stop() }
        let (edge, workers, relays) = (ServiceGroup(logger: logger, failed: failed), ServiceGroup(logger: logger, failed: failed),
                                       ServiceGroup(logger: logger, failed: failed))
        do {
            guard try prepareDatabase() else {
                server.stop(grace: 0)
                logger.info("stopped before the database was ready")
                return
            }
            var routes = try setup(self)
            addHealthRoutes(&routes)
            addDocumentRoute(&routes)
            Self.releaseFreedMemory()  // what building the OpenAPI document freed (4 MB of dispatch's 57)
            _ = servingRoutes.storeIfNil(Routes(routes))
        } catch {
            server.stop(grace: 0)
            throw error
        }
        relays.start(relay)
        // `service_ready` (1 or 0) for alerts, from a job: a scrape never waits on the database or the broker.
        workers.start(Job.every(5, "readiness-gauge", logger: logger) { [unowned self] in
            readyGauge.value.store(readinessNow().ready ? 1 : 0, ordering: .relaxed)
        })
        workers.start(Job("topics") { [relay, topicsReady, logger] cancellation in
            var delay = 1.0
            while !cancellation.isCancelled {
                do {
                    try relay.createTopics()
                    logger.info("topics ready")
                    topicsReady.open()
                    return
                } catch {
                    logger.warn("cannot create topics yet; retrying", ["error": .string("\(error)")])
                    cancellation.sleep(delay)
                    delay = min(delay * 2, 30)
                }
            }
        })
        services.forEach(workers.start)
        edge.start(HTTPService(server: server))
        serving.store(true, ordering: .releasing)

        stopping.wait()
        let deadline = Date().addingTimeInterval(Double(config.shutdownTimeoutSeconds))
        logger.info("stopping", ["deadlineSeconds": .int(config.shutdownTimeoutSeconds), "delaySeconds": .int(config.shutdownDelaySeconds)])
        // `/readyz` says 503 from now on (it reads `stopping`), while everything is still served, so that load
        // balancers stop sending before the listener closes.
        Thread.sleep(forTimeInterval: min(Double(config.shutdownDelaySeconds), max(0, deadline.timeIntervalSinceNow - 1)))
        serving.store(false, ordering: .releasing)
        let late = edge.stop(deadline: deadline) + workers.stop(deadline: deadline) + relays.stop(deadline: deadline)
        pool.close()
        logger.info("stopped", late.isEmpty ? [:] : ["late": .string(late.joined(separator: ","))])
    }

    /// Waits for the database (up to a minute) and applies migrations; false when stopped while waiting.
    func prepareDatabase() throws -> Bool {
        let deadline = Date().addingTimeInterval(60)
        var warned = false
        while true {
            do {
                let applied = try Migrator.migrate(pool: pool, schema: config.service, migrations: migrations)
                if !applied.isEmpty { logger.info("applied migrations", ["versions": .string(applied.map(String.init).joined(separator: ","))]) }
                return true
            } catch let error as PostgresError where error.kind == .unavailable {
                guard Date() < deadline else { throw StartupError.databaseUnreachable(error.serverMessage) }
                if !warned { logger.warn("waiting for the database (DATABASE_URL)", ["error": .string(error.serverMessage)]); warned = true }
                if !stopping.sleep(1) { return false }
            } catch {
                throw StartupError.migrationsFailed("\(error)")
            }
        }
    }

    /// Hands the memory freed since the last call back to the system (glibc keeps the free pages of its heaps for
    /// reuse): for after a large transient build, such as curation's index (8 MB of a fresh curation's 60).
    public static func releaseFreedMemory() { shim_release_free_memory() }

}


/// The HTTP server as a background service: pings open event streams every 15 s, and on stop lets in-flight
/// requests finish until the deadline.
struct HTTPService: BackgroundService {
    let server: HTTPServer
    var name: String { "http-server" }

    func run(until cancellation: Cancellation) {
        while cancellation.sleep(15) { server.pingStreams() }
        server.stop(grace: max(0.5, cancellation.deadline.timeIntervalSinceNow - 1))
    }
}

/// SIGTERM and SIGINT, handled from the first line of `main`: until a handler is set, a signal ends the process
/// at once with status 0 (nothing has started that could be cut off).
///
/// `@unchecked Sendable`: `sources` is only kept alive after `init`; the handler is behind a `Mutex`.
final class SignalTrap: @unchecked Sendable {
    private let handler = Mutex<(@Sendable () -> Void)?>(nil)
    private var sources: [any DispatchSourceSignal] = []

    init() {
        sources = [SIGTERM, SIGINT].map { sig in
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { [unowned self] in
                guard let h = handler.withLock({ $0 }) else { exit(0) }
                h()
            }
            source.resume()
            return source
        }
    }

    func onSignal(_ h: @escaping @Sendable () -> Void) { handler.withLock { $0 = h } }
}
