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

/// One service process: configuration, logger, metrics, database pool, outbox relay, consumers, live feeds, jobs
/// and the HTTP server.
///
/// `init` only reads and checks the configuration (it throws a `ConfigError` naming a bad setting, and touches no
/// database). `run` opens the HTTP port at once (`/healthz` answers from the first second; `/readyz` says 503 until
/// everything is ready), waits for the database and migrates it, calls the service's `setup` to wire its routes and
/// background services, starts them, serves until `stop`, then stops the HTTP server, the background services and
/// the outbox relay in turn by one deadline (`SHUTDOWN_TIMEOUT_SECONDS`) and returns. A test runs a service
/// in-process this way; an executable calls `ServiceApp.main`, which adds signal handling and the operator commands.
///
/// `@unchecked Sendable`: `services`, `checks` and `readers` are written only by `setup`, on the thread of `run`,
/// before the services start and before `serving` is set; everything else is immutable or synchronised itself.
public final class ServiceApp: @unchecked Sendable {
    /// Builds the service once the database is ready: returns its routes, and adds its background services.
    public typealias Setup = (ServiceApp) throws -> Router

    public let config: ServiceConfig
    public let logger: Logger
    public let metrics = Metrics()
    public let pool: Pool
    public let kafka: KafkaConfig
    public let relay: OutboxRelay
    /// Writes events in the caller's transaction.
    public let outbox: Outbox
    /// Stores first responses of creating POSTs by `Idempotency-Key`.
    public let idempotency: Idempotency
    /// Opens once the service's topics exist; readers that are not consumer groups wait for it.
    public let topicsReady = Gate()

    private let migrations: [Migration]
    private let setup: Setup
    private let commands: [Command]
    private let stopping = Cancellation()
    private let serving = Atomic<Bool>(false)
    /// The routes every request is matched against: the health routes while the service starts, then all of them.
    /// Each is set once and read without a lock (a lock here made every request of every thread queue on it).
    private let startingRoutes = AtomicLazyReference<Routes>()
    private let servingRoutes = AtomicLazyReference<Routes>()
    private final class Routes: Sendable {
        let router: Router
        init(_ router: Router) { self.router = router }
    }
    private let bound = Atomic<Int>(0)
    private let readiness = ReadinessCache()
    /// What `service_ready` says: 1 when the last look found the service ready.
    private let readyGauge = ReadyGauge()
    private let middleware: [any Middleware]
    /// Counts and logs what the connection limits and the stream budget turn away, one log line per reason at most
    /// every 10 s, whichever of them turned it away.
    private let refusals: RefusalLog
    private var services: [any BackgroundService] = []
    private var checks: [(name: String, isReady: @Sendable () -> Bool)] = []

    /// Reads and checks the configuration; throws a `ConfigError` naming the first bad setting. The topics the
    /// service produces (`EventCatalogue`) and those it reads are created when missing; `setup` runs in `run` once
    /// the database is migrated.
    public init(service: String, defaultPort: Int, environment: Environment = Environment(), migrations: [Migration],
                commands: [Command] = [], setup: @escaping Setup) throws {
        let config = try ServiceConfig.load(service: service, defaultPort: defaultPort, environment: environment)
        self.config = config
        let logger = Logger(service: service, minimum: config.logLevel)
        self.logger = logger
        self.migrations = migrations
        self.setup = setup
        self.commands = commands
        refusals = RefusalLog(logger: logger, metrics: metrics)
        middleware = [RequestIDMiddleware(), AccessLogMiddleware(logger: logger, metrics: metrics),
                      StreamBudgetMiddleware(limit: config.connectionLimits.streams, refusals: refusals),
                      ErrorMiddleware(logger: logger)]
        pool = Pool(url: config.databaseURL, maxSize: config.dbPoolSize, limits: config.databaseLimits, applicationName: service)
        let kafka = config.kafka(logger: logger)
        self.kafka = kafka
        relay = OutboxRelay(pool: pool, databaseURL: config.databaseURL, schema: service, kafka: kafka,
                            topics: .init(names: Array(Set(EventCatalogue.produced(by: service) + [SessionRevoked.type])).sorted(),
                                          partitions: config.kafkaPartitions, replicationFactor: config.kafkaReplicationFactor),
                            retentionHours: config.outboxRetentionHours, maxDelaySeconds: config.outboxMaxDelaySeconds,
                            logger: logger, metrics: metrics)
        outbox = Outbox(schema: service, source: "/\(service)")
        idempotency = Idempotency(pool: pool, schema: service)
        let pool = self.pool
        metrics.addGauges(help: ["service_ready": "1 while /readyz answers 200 (looked at every 5 s), else 0."]) { [readyGauge] in
            [("service_ready", "", Double(readyGauge.value.load(ordering: .relaxed)))]
        }
        metrics.addGauges(help: ["db_pool_connections": "Pooled PostgreSQL connections, by state.",
                                 "db_pool_max_connections": "The most connections the pool opens."]) {
            let s = pool.stats
            return [("db_pool_connections", "state=\"in_use\"", Double(s.inUse)),
                    ("db_pool_connections", "state=\"idle\"", Double(s.open - s.inUse)),
                    ("db_pool_max_connections", "", Double(s.max))]
        }
        // The database's replication slots (a replica's, a change-data-capture tool's), the same from every service
        // since they are the cluster's: the WAL each keeps from removal, and whether anything reads it. A slot nobody
        // reads keeps every segment from its position on, until the disk is full (the ReplicationSlotWALHeld alert).
        metrics.addGauges(help: ["postgres_replication_slot_retained_wal_bytes": "WAL the database keeps for the replication slot.",
                                 "postgres_replication_slot_active": "1 while something reads from the replication slot, else 0."]) {
            guard let rows = try? pool.withConnection({ c in
                try c.rows("""
                    SELECT slot_name, active::int AS active,
                        COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::float8 AS retained
                    FROM pg_replication_slots ORDER BY slot_name
                    """)
            }) else { return [] }
            return rows.flatMap { row -> [(String, String, Double)] in
                guard let name = try? row["slot_name", as: String.self], let active = try? row["active", as: Int.self],
                      let retained = try? row["retained", as: Double.self] else { return [] }
                let label = "slot=\"\(Metrics.escape(name))\""
                return [("postgres_replication_slot_retained_wal_bytes", label, retained),
                        ("postgres_replication_slot_active", label, Double(active))]
            }
        }
    }

    // MARK: - Wiring (from `setup`)

    /// Adds a background service, started in the order added after the relay and the consumers' topics, and stopped
    /// with the others after the HTTP server and before the relay.
    public func add(_ service: any BackgroundService) {
        if let feed = service as? LiveFeed {
            relay.addTopics(feed.topics)
            readers += feed.topics.map { ($0, EventCatalogue.Reader(service: config.service, name: feed.name, isFeed: true)) }
        }
        services.append(service)
    }

    /// What the service reads, by topic (what `EventCatalogue` must say; a test compares them).
    public private(set) var readers: [(topic: String, reader: EventCatalogue.Reader)] = []

    /// Adds a check that must hold before `/readyz` says ready (`name` is its key in the answer; checks named
    /// `broker` fold into the broker's).
    public func addReadinessCheck(_ name: String, _ isReady: @escaping @Sendable () -> Bool) {
        checks.append((name, isReady))
    }

    /// Adds a consumer-group consumer whose handler runs in a transaction with de-duplication.
    public func consume(_ name: String, topics: [String], handler: @escaping EventConsumer.Handler) {
        relay.addTopics(topics + topics.map { $0 + ".dlq" })
        readers += topics.map { ($0, EventCatalogue.Reader(service: config.service, name: name, isFeed: false)) }
        let consumer = EventConsumer(name: name, kafka: kafka, groupId: "\(config.kafkaGroupPrefix)\(config.service)-\(name)",
                                     topics: topics, pool: pool, schema: config.service, relay: relay, topicsReady: topicsReady,
                                     logger: logger, metrics: metrics, handler: handler)
        add(consumer)
        metrics.addGauges(help: ["kafka_consumer_assigned_partitions": "Partitions this instance's consumer holds, by consumer group.",
                                 "kafka_consumer_lag": "Events in those partitions it has not processed yet (looked at every 5 s)."]) {
            [("kafka_consumer_assigned_partitions", "consumer=\"\(name)\"", Double(consumer.assignedPartitions)),
             ("kafka_consumer_lag", "consumer=\"\(name)\"", Double(consumer.lag))]
        }
    }

    /// A token verifier for services other than auth: keys from `AUTH_JWKS_URL` (or `JWT_PUBLIC_KEY`, checked at
    /// start), revocations from `session.revoked` and, with `SERVICE_TOKEN`, from auth's list at the same host as
    /// `AUTH_JWKS_URL`. Adds what keeps it current: the revocation feed and its sync, and while auth has not answered
    /// yet, a job that asks for the keys (readiness waits for all of them: `revocations`, `signingKeys`).
    public func makeTokenVerifier() -> TokenVerifier {
        var fetchList: (@Sendable (Date?) throws -> RevokedSessionList)?
        if let token = config.serviceToken.token {
            fetchList = { [jwksURL = config.jwksURL] since in
                // The list is served at the host of AUTH_JWKS_URL.
                let query = since.map { "?since=" + Timestamp.format($0) } ?? ""
                guard let url = URL(string: "/v1/internal/revoked-sessions" + query, relativeTo: URL(string: jwksURL)) else {
                    throw FetchError("AUTH_JWKS_URL is not a URL")
                }
                guard let (status, body) = Fetch.get(url.absoluteURL, headers: ["Authorization": "Bearer " + token], timeout: 2) else {
                    throw FetchError("auth did not answer at \(url.absoluteString)")
                }
                guard status == 200 else { throw FetchError("auth answered \(status)") }
                return try JSONDecoder().decode(RevokedSessionList.self, from: body)
            }
        } else {
            logger.warn("SERVICE_TOKEN is not set: revocations come from session.revoked alone, which a broker that loses its data forgets")
        }
        let revocations = SessionRevocations(kafka: kafka, topicsReady: topicsReady, logger: logger, fetchList: fetchList)
        add(revocations.feed)
        add(revocations.sync)
        addReadinessCheck("revocations") { revocations.isReady }
        if let key = config.jwtPublicKey {
            return TokenVerifier(keys: ["static": key], revocations: revocations, logger: logger)
        }
        let verifier = TokenVerifier(jwksURL: config.jwksURL, revocations: revocations, logger: logger)
        addReadinessCheck("signingKeys") { verifier.hasKeys }
        let loaded = verifier.refreshKeys()
        // Auth may start after us: ask every 2 s until it answers; then every minute, so a rotated key is known
        // before it signs (`auth rotate-keys` publishes it 5 minutes ahead by default).
        add(Job("jwks-refresh") { cancellation in
            var known = loaded
            while cancellation.sleep(known ? 60 : 2) { known = verifier.refreshKeys(abandon: { cancellation.isCancelled }) || known }
        })
        return verifier
    }

    // MARK: - Running

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
    private func prepareDatabase() throws -> Bool {
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

    // MARK: - Entry point and commands

    /// The whole of an executable's `main`: signal handling first (as PID 1 in a container a process ignores
    /// SIGTERM unless it handles it), then the configuration, then `run` or an operator command (`migrate`,
    /// `republish --since <time>`, and the service's own). Exits 0 after a graceful stop, 64 on a bad command, 78 on a bad setting, 69 when
    /// the database cannot be reached, 70 when migrations fail, 71 when the port is taken.
    public static func main(service: String, _ make: (Environment) throws -> ServiceApp) -> Never {
        let signals = SignalTrap()
        let arguments = Array(CommandLine.arguments.dropFirst())
        // A fixed threshold: glibc would raise it after the first large free, then keep blocks such as Argon2's
        // 19 MiB in every thread's arena for good (auth held 387 MB after a burst of sign-ups, 43 MB fresh).
        shim_fix_mmap_threshold(1 << 20)
        let app: ServiceApp
        // An operator command (a migration, an import) may take long and wait for locks: no request timeouts, unless set.
        var environment = ProcessInfo.processInfo.environment
        if !arguments.isEmpty {
            environment["DB_STATEMENT_TIMEOUT_MS"] = environment["DB_STATEMENT_TIMEOUT_MS"] ?? "0"
            environment["DB_LOCK_TIMEOUT_MS"] = environment["DB_LOCK_TIMEOUT_MS"] ?? "0"
        }
        do { app = try make(Environment(environment)) } catch {
            Logger(service: service).error("\(error)")
            exit(78)
        }
        signals.onSignal { app.stop() }
        do {
            if !arguments.isEmpty { exit(try app.runCommand(arguments)) }
            try app.run()
            exit(0)
        } catch let error as StartupError {
            app.logger.error(error.description)
            exit(error.exitCode)
        } catch {
            app.logger.error("start-up failed", ["error": .string("\(error)")])
            exit(1)
        }
    }

    /// Runs an operator command; returns its exit status.
    func runCommand(_ arguments: [String]) throws -> Int32 {
        switch arguments[0] {
        case "migrate":
            guard try prepareDatabase() else { return 0 }
            logger.info("migrations are up to date")
            return 0
        case "republish":
            guard arguments.count == 3, arguments[1] == "--since", let since = Timestamp.parse(arguments[2]) else {
                logger.error("usage: \(config.service) republish --since <RFC 3339 time, e.g. 2026-11-30T00:00:00Z>")
                return 64
            }
            guard try prepareDatabase() else { return 0 }
            let n = try relay.republish(since: since)
            logger.info("published the events again",
                        ["events": .int(n), "since": .string(Timestamp.format(since))])
            return 0
        case "create-topics":
            return try createAllTopics()
        default:
            guard let command = commands.first(where: { $0.name == arguments[0] }) else {
                let names = ["migrate", "republish --since <time>", "create-topics"] + commands.map(\.usage)
                logger.error("unknown command \"\(arguments[0])\"; commands: \(names.joined(separator: ", "))")
                return 64
            }
            guard try prepareDatabase() else { return 0 }
            return try command.run(self, Array(arguments.dropFirst()))
        }
    }

    /// `create-topics`: creates every topic of the catalogue and the consumers' dead-letter topics with
    /// `KAFKA_TOPIC_PARTITIONS` and `KAFKA_REPLICATION_FACTOR` (a deployment's one-shot job; no database needed),
    /// through the relay's own creation and check, waiting up to a minute for the broker. Fails when a topic exists
    /// with another partition count (the relay's log names each).
    func createAllTopics() throws -> Int32 {
        let names = EventCatalogue.allTopicNames
        relay.addTopics(names)
        let deadline = Date().addingTimeInterval(60)
        while true {
            do {
                guard try relay.createTopics().isEmpty else { return 1 }
                logger.info("topics ready", ["topics": .int(names.count), "partitions": .int(config.kafkaPartitions),
                                             "replicationFactor": .int(config.kafkaReplicationFactor)])
                return 0
            } catch {
                guard Date() < deadline, !stopping.isCancelled else { throw error }
                logger.warn("cannot create topics yet; retrying", ["error": .string("\(error)")])
                stopping.sleep(2)
            }
        }
    }

    // MARK: - Standard routes and the request pipeline

    /// `/healthz`'s one answer, written once (a probe's answer was a JSON encoding each time).
    private static let alive = Array(#"{"status":"ok"}"#.utf8)

    /// `/healthz` and `/metrics` are answered by the connection's own thread (they never wait for a handler thread,
    /// so a liveness probe is not failed by slow handlers); `/readyz` asks the database and broker, on a handler thread.
    private func addHealthRoutes(_ router: inout Router) {
        router.add("GET", "/healthz", summary: "Alive", answer: (200, #"{"type":"object","required":["status"],"properties":{"status":{"const":"ok"}}}"#),
                   inline: true) { _ in
            Response(status: 200, headers: [("Content-Type", "application/json")], body: Self.alive)
        }
        let readySchema = #"{"type":"object","required":["status","database","broker","outbox"],"additionalProperties":{"type":"string"},"properties":{"status":{"enum":["ready","unavailable"]}}}"#
        router.add("GET", "/readyz", summary: "Ready: database, broker and the service's own checks",
                   answer: (200, readySchema)) { [unowned self] _ in
            let (ready, answer) = readinessNow()
            var response = try Response.json(answer, status: ready ? 200 : 503)
            if !ready { response.headers.append(("Retry-After", "2")) }
            return response
        }
        router.alsoAnswers("GET", "/readyz", 503, schema: readySchema)
        router.add("GET", "/metrics", summary: "Prometheus metrics", inline: true) { [metrics] _ in
            .text(metrics.render(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
    }

    /// Whether the service is ready, and what `/readyz` says of each part.
    private func readinessNow() -> (ready: Bool, answer: [String: String]) {
        var answer: [String: String] = [:]
        var ready = isServing
        if stopping.isCancelled {
            ready = false
            answer = ["database": "stopping", "outbox": "stopping", "broker": "stopping"]
        } else if ready {
            let (database, broker, outbox) = readiness.check(pool: pool, relay: relay)
            answer["database"] = database ? "ok" : "unavailable"
            answer["outbox"] = outbox ? "ok" : "stuck"
            var brokerOK = broker
            for check in checks {
                let ok = check.isReady()
                if check.name == "broker" { brokerOK = brokerOK && ok } else { answer[check.name] = ok ? "ok" : "unavailable" }
                ready = ready && ok
            }
            answer["broker"] = brokerOK ? "ok" : "unavailable"
            ready = ready && database && broker && outbox
        } else {
            answer["database"] = "starting"
            answer["outbox"] = "starting"
            answer["broker"] = "starting"
        }
        answer["status"] = ready ? "ready" : "unavailable"
        return (ready, answer)
    }

    private func addDocumentRoute(_ router: inout Router) {
        let spec = OpenAPI.json(service: config.service, routes: router.routes + [
            Route.documentation("GET", "/openapi.json", "This document", response: #"{"type":"object","required":["openapi","paths"]}"#)])
        router.add("GET", "/openapi.json", summary: "This document", answer: (200, #"{"type":"object","required":["openapi","paths"]}"#)) { _ in
            Response(status: 200, headers: [("Content-Type", "application/json")], body: spec)
        }
    }

    /// The request pipeline: the route found once by the server, then the middleware (request id, access log and
    /// metrics, errors) around its handler. Before the service serves, anything but the health routes is a 503.
    func respond(_ incoming: Request, _ match: RouteMatch) -> Response {
        var request = incoming
        request.route = "unmatched"
        let handler: (Request) throws -> Response
        switch match {
        case .found(let route, let params):
            request.route = route.pattern
            request.pathParameters = params
            request.declaredQuery = route.query
            request.idempotentRoute = route.idempotent
            handler = { try Router.invoke(route, $0) }
        case .methodNotAllowed(let allowed):
            handler = { request in
                throw HTTPError(405, "method_not_allowed", "This path does not support \(request.method.prefix(16)).",
                                headers: [("Allow", allowed.joined(separator: ", "))])
            }
        case .refused(let error):
            request.route = "refused"
            handler = { _ in throw error }
        case .notFound:
            let serving = isServing
            handler = { _ in throw serving ? HTTPError.notFound() : HTTPError.unavailable(retryAfter: 2) }
        }
        // The error step answers every throw, so the pipeline itself never throws.
        return (try? middleware.run(request, handler)) ?? HTTPError.internalError.response
    }
}

/// An operator command of a service (`curation import FILE`): it runs instead of the server, once the database is
/// migrated, and its result is the process's exit status.
public struct Command: Sendable {
    public let name: String
    /// How to call it, for the list of commands.
    public let usage: String
    public let run: @Sendable (ServiceApp, [String]) throws -> Int32

    public init(_ name: String, usage: String, run: @escaping @Sendable (ServiceApp, [String]) throws -> Int32) {
        self.name = name; self.usage = usage; self.run = run
    }
}

/// Why a service could not start; each has its own exit status.
public enum StartupError: Error, CustomStringConvertible {
    case cannotListen(port: Int)
    case databaseUnreachable(String)
    case migrationsFailed(String)

    public var description: String {
        switch self {
        case .cannotListen(let port): return "cannot listen on port \(port) (in use?) (PORT)"
        case .databaseUnreachable(let message): return "cannot reach the database named by DATABASE_URL: \(message)"
        case .migrationsFailed(let message): return "migrations failed: \(message)"
        }
    }

    var exitCode: Int32 {
        switch self {
        case .cannotListen: return 71
        case .databaseUnreachable: return 69
        case .migrationsFailed: return 70
        }
    }
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

extension Route {
    /// A route that exists only to be listed in the OpenAPI document.
    static func documentation(_ method: String, _ pattern: String, _ summary: String, response: String) -> Route {
        var r = Router()
        r.add(method, pattern, summary: summary, answer: (200, response)) { _ in Response(status: 200) }
        return r.routes[0]
    }
}

/// Caches the readiness checks for a second, so frequent probes do not load the database or broker. The outbox is
/// ready unless events wait too long (`OutboxRelay.isStuck`); with the database down it is the database that is not.
final class ReadyGauge: Sendable {
    let value = Atomic<Int>(0)
}

final class ReadinessCache: Sendable {
    private let last = Mutex<(at: Date, database: Bool, broker: Bool, outbox: Bool)?>(nil)

    func check(pool: Pool, relay: OutboxRelay) -> (database: Bool, broker: Bool, outbox: Bool) {
        if let last = last.withLock({ $0 }), Date().timeIntervalSince(last.at) < 1 { return (last.database, last.broker, last.outbox) }
        let stuck = Result { try relay.isStuck() }
        let database = (try? stuck.get()) != nil
        let broker = (try? relay.currentProducer().isBrokerReachable(timeout: 1)) ?? false
        let outbox = (try? stuck.get()) != true
        last.withLock { $0 = (Date(), database, broker, outbox) }
        return (database, broker, outbox)
    }
}
