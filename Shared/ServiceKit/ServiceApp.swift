import Crypto
import Foundation
import HTTP
import Kafka
import Models
import Postgres

/// One service process: configuration, logger, metrics, database pool, outbox relay, consumers and the HTTP
/// server, started in that order and stopped in reverse on SIGTERM. A service's `main` creates one, adds its
/// routes and consumers, and calls `run`.
///
/// `@unchecked Sendable`: fields are set during start-up on the main thread, before any other thread reads them.
public final class ServiceApp: @unchecked Sendable {
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
    private let topics: [String]
    private var consumers: [EventConsumer] = []
    private var topicHooks: [@Sendable () -> Void] = []
    private var brokerChecks: [@Sendable () -> Bool] = []
    private var revocations: SessionRevocations?
    private var verifier: TokenVerifier?
    private let readiness = ReadinessCache()

    /// Loads the configuration (a bad value stops the process with one line naming it), waits for the database,
    /// applies migrations, and handles the operator commands (`migrate`, `republish --since <RFC 3339 time>`).
    /// `topics` are the topics this service produces or consumes; they are created when missing.
    public init(service: String, defaultPort: Int, migrations: [Migration], topics: [String]) {
        let config: ServiceConfig
        do {
            config = try ServiceConfig.load(service: service, defaultPort: defaultPort)
        } catch {
            Logger(service: service).error("\(error)")
            exit(78)
        }
        self.config = config
        let logger = Logger(service: service, minimum: config.logLevel)
        self.logger = logger
        pool = Pool(url: config.databaseURL, maxSize: config.dbPoolSize)
        var kafka = KafkaConfig(brokers: config.kafkaBrokers, clientId: service)
        kafka.sessionTimeoutMs = config.kafkaSessionTimeoutMs
        // librdkafka's own debug contexts (e.g. `cgrp,topic`), logged at debug level.
        if let contexts = config.environment.optional("KAFKA_DEBUG") { kafka.extra["debug"] = contexts }
        kafka.log = { level, message in logger.log(level <= 3 ? .error : level == 4 ? .warn : .debug, message) }
        self.kafka = kafka
        self.topics = Array(Set(topics + [SessionRevoked.type])).sorted()
        relay = OutboxRelay(pool: pool, schema: service, kafka: kafka,
                            topics: .init(names: self.topics, partitions: config.kafkaPartitions,
                                          replicationFactor: config.kafkaReplicationFactor),
                            retentionHours: config.outboxRetentionHours, logger: logger, metrics: metrics)
        outbox = Outbox(schema: service, source: "/\(service)", wake: { [relay] in relay.wake() })
        idempotency = Idempotency(pool: pool, schema: service)
        let pool = self.pool
        metrics.addGauges {
            let s = pool.stats
            return [("db_pool_connections", "state=\"in_use\"", Double(s.inUse)),
                    ("db_pool_connections", "state=\"idle\"", Double(s.open - s.inUse)),
                    ("db_pool_max_connections", "", Double(s.max))]
        }
        migrate(migrations)
        runCommand()
    }

    private func migrate(_ migrations: [Migration]) {
        let deadline = Date().addingTimeInterval(60)
        var warned = false
        while true {
            do {
                let applied = try Migrator.migrate(pool: pool, schema: config.service, migrations: migrations)
                if !applied.isEmpty { logger.info("applied migrations", ["versions": .string(applied.map(String.init).joined(separator: ","))]) }
                return
            } catch let error as PostgresError where error.kind == .unavailable && Date() < deadline {
                if !warned { logger.warn("waiting for the database (DATABASE_URL)", ["error": .string(error.serverMessage)]); warned = true }
                Thread.sleep(forTimeInterval: 1)
            } catch let error as PostgresError where error.kind == .unavailable {
                logger.error("cannot reach the database named by DATABASE_URL: \(error.serverMessage)")
                exit(69)
            } catch {
                logger.error("migrations failed", ["error": .string("\(error)")])
                exit(70)
            }
        }
    }

    private func runCommand() {
        let args = CommandLine.arguments.dropFirst()
        guard let command = args.first else { return }
        switch command {
        case "migrate":
            logger.info("migrations are up to date")
            exit(0)
        case "republish":
            guard args.count == 3, args[args.startIndex + 1] == "--since", let since = Timestamp.parse(args[args.startIndex + 2]) else {
                logger.error("usage: \(config.service) republish --since <RFC 3339 time, e.g. 2026-11-30T00:00:00Z>")
                exit(64)
            }
            do {
                let n = try OutboxRelay.republish(pool: pool, schema: config.service, since: since)
                logger.info("marked events for re-publication; the running service publishes them",
                            ["events": .int(n), "since": .string(Timestamp.format(since))])
                exit(0)
            } catch {
                logger.error("republish failed", ["error": .string("\(error)")])
                exit(1)
            }
        default:
            logger.error("unknown command \"\(command)\"; commands: migrate, republish --since <time>")
            exit(64)
        }
    }

    // MARK: - Wiring

    /// A token verifier for services other than auth: keys from `AUTH_JWKS_URL` (or `JWT_PUBLIC_KEY`) and
    /// revocations from `session.revoked`.
    public func makeTokenVerifier() -> TokenVerifier {
        let revocations = SessionRevocations(kafka: kafka, logger: logger)
        self.revocations = revocations
        if let key = config.jwtPublicKey {
            guard let raw = Crypto.Base64URL.decode(key), raw.count == 32 else {
                logger.error("invalid configuration: JWT_PUBLIC_KEY must be a base64url Ed25519 public key (32 bytes)")
                exit(78)
            }
            return TokenVerifier(keys: ["static": raw], revocations: revocations, logger: logger)
        }
        let verifier = TokenVerifier(jwksURL: config.jwksURL, revocations: revocations, logger: logger)
        self.verifier = verifier
        if !verifier.refreshKeys() {
            // Auth may start after us: keep asking; readiness stays false until the keys are in.
            Thread {
                while !verifier.refreshKeys() { Thread.sleep(forTimeInterval: 2) }
            }.start()
        }
        return verifier
    }

    /// Registers a consumer-group consumer whose handler runs in a transaction with de-duplication.
    public func consume(_ name: String, topics: [String], handler: @escaping EventConsumer.Handler) {
        relay.addTopics(topics + topics.map { $0 + ".dlq" })
        let consumer = EventConsumer(name: name, kafka: kafka, groupId: "\(config.kafkaGroupPrefix)\(config.service)-\(name)", topics: topics,
                                     pool: pool, schema: config.service, relay: relay, logger: logger,
                                     metrics: metrics, handler: handler)
        consumers.append(consumer)
        metrics.addGauges { [("kafka_consumer_assigned_partitions", "consumer=\"\(name)\"", Double(consumer.assignedPartitions))] }
    }

    /// Runs `start` once the service's topics exist (for readers that are not consumer groups), and keeps the
    /// service unready until `isReading` says they read.
    public func whenTopicsExist(_ start: @escaping @Sendable () -> Void, ready isReading: @escaping @Sendable () -> Bool) {
        topicHooks.append(start)
        brokerChecks.append(isReading)
    }

    // MARK: - Running

    /// Adds the standard routes, starts everything, serves until SIGTERM or SIGINT, stops gracefully, exits 0.
    public func run(routes: Router) -> Never {
        signal(SIGPIPE, SIG_IGN)
        var router = routes
        addStandardRoutes(&router)
        let table = router
        relay.start()
        revocations?.start()
        ensureTopics()  // then starts the consumers: a subscription to a missing topic would wait for a metadata refresh
        let server = HTTPServer(port: UInt16(config.port), threads: config.httpThreads,
                                bodyLimit: { table.bodyLimit(method: $0, path: $1) },
                                respond: { [self] in respond(table, $0) })
        do { try server.start() } catch {
            logger.error("\(error) (PORT=\(config.port))")
            exit(71)
        }
        logger.info("listening", ["port": .int(config.port)])

        let stop = DispatchSemaphore(value: 0)
        var sources: [DispatchSourceSignal] = []
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { stop.signal() }
            source.resume()
            sources.append(source)
        }
        stop.wait()
        logger.info("stopping: finishing in-flight requests")
        server.stop(grace: 10)
        consumers.forEach { $0.stop() }
        revocations?.stop()
        relay.stop(timeout: 5)
        pool.close()
        logger.info("stopped")
        exit(0)
    }

    private func ensureTopics() {
        let thread = Thread { [self] in
            var delay = 1.0
            while true {
                do {
                    try relay.createTopics()
                    logger.info("topics ready", ["topics": .string(topics.joined(separator: ","))])
                    consumers.forEach { $0.start() }
                    topicHooks.forEach { $0() }
                    return
                } catch {
                    logger.warn("cannot create topics yet; retrying", ["error": .string("\(error)")])
                    Thread.sleep(forTimeInterval: delay)
                    delay = min(delay * 2, 30)
                }
            }
        }
        thread.start()
    }

    private func addStandardRoutes(_ router: inout Router) {
        router.add("GET", "/healthz", summary: "Alive", authenticated: false) { _ in
            try .json(["status": "ok"])
        }
        router.add("GET", "/readyz", summary: "Ready: database and broker reachable", authenticated: false) { [self] _ in
            let (database, broker) = readiness.check(pool: pool, relay: relay, revocations: revocations, extra: brokerChecks)
            let keys = verifier?.hasKeys ?? true
            let ready = database && broker && keys
            var checks = ["status": ready ? "ready" : "unavailable", "database": database ? "ok" : "unavailable",
                          "broker": broker ? "ok" : "unavailable"]
            if verifier != nil { checks["signingKeys"] = keys ? "ok" : "unavailable" }
            var response = try Response.json(checks, status: ready ? 200 : 503)
            if !ready { response.headers.append(("Retry-After", "2")) }
            return response
        }
        router.add("GET", "/metrics", summary: "Prometheus metrics", authenticated: false) { [metrics] _ in
            .text(metrics.render(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
        let spec = OpenAPI.json(service: config.service, routes: router.routes + [
            Route.documentation("GET", "/openapi.json", "This document")])
        router.add("GET", "/openapi.json", summary: "This document", authenticated: false) { _ in
            Response(status: 200, headers: [("Content-Type", "application/json")], body: spec)
        }
    }

    private static let requestIdCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:")

    /// The request pipeline: request id, routing, the handler, error mapping, metrics and the access log.
    func respond(_ router: Router, _ incoming: Request) -> Response {
        let start = DispatchTime.now().uptimeNanoseconds
        var request = incoming
        if let id = request.header("x-request-id"), (1...128).contains(id.count), id.allSatisfy(Self.requestIdCharacters.contains) {
            request.requestId = id
        } else {
            request.requestId = UUID.v7().lowercased
        }
        var response: Response
        switch router.match(method: request.method, path: request.path) {
        case .found(let route, let params):
            request.route = route.pattern
            request.pathParameters = params
            do {
                response = try Router.invoke(route, request)
            } catch {
                let http = HTTPError.from(error)
                if http.status >= 500 {
                    logger.error("request failed", ["requestId": .string(request.requestId), "route": .string(route.pattern),
                                                    "error": .string(String(describing: error))])
                }
                response = http.response
            }
        case .methodNotAllowed(let allowed):
            request.route = "unmatched"
            response = HTTPError(405, "method_not_allowed", "This path does not support \(request.method.prefix(16)).",
                                 headers: [("Allow", allowed.joined(separator: ", "))]).response
        case .notFound:
            request.route = "unmatched"
            response = HTTPError.notFound().response
        }
        response.headers.append(("X-Request-Id", request.requestId))
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        metrics.observeRequest(method: request.method, route: request.route, status: response.status, seconds: seconds)
        let quiet = request.route == "/healthz" || request.route == "/readyz" || request.route == "/metrics"
        logger.log(quiet ? .debug : .info, "request", [
            "method": .string(request.method), "route": .string(request.route), "status": .int(response.status),
            "durationMs": .double(seconds * 1000), "requestId": .string(request.requestId)])
        return response
    }
}

extension Route {
    /// A route that exists only to be listed in the OpenAPI document.
    static func documentation(_ method: String, _ pattern: String, _ summary: String) -> Route {
        var r = Router()
        r.add(method, pattern, summary: summary, authenticated: false) { _ in Response(status: 200) }
        return r.routes[0]
    }
}

/// Caches the readiness checks for a second, so frequent probes do not load the database or broker.
///
/// `@unchecked Sendable`: guarded by `lock`.
final class ReadinessCache: @unchecked Sendable {
    private let lock = NSLock()
    private var last: (at: Date, database: Bool, broker: Bool)?

    func check(pool: Pool, relay: OutboxRelay, revocations: SessionRevocations?, extra: [@Sendable () -> Bool]) -> (Bool, Bool) {
        lock.lock()
        if let last, Date().timeIntervalSince(last.at) < 1 { lock.unlock(); return (last.database, last.broker) }
        lock.unlock()
        let database = (try? pool.withConnection { try $0.execute("SELECT 1") }) != nil
        let broker = ((try? relay.currentProducer().isBrokerReachable(timeout: 1)) ?? false)
            && (revocations?.isReady ?? true) && extra.allSatisfy { $0() }
        lock.lock(); last = (Date(), database, broker); lock.unlock()
        return (database, broker)
    }
}

extension ServiceApp {
    /// Runs `job` on its own thread every `seconds`, logging failures.
    public func every(seconds: TimeInterval, _ name: String, _ job: @escaping @Sendable () throws -> Void) {
        let logger = self.logger
        let thread = Thread {
            while true {
                Thread.sleep(forTimeInterval: seconds)
                do { try job() } catch { logger.warn("periodic job failed", ["job": .string(name), "error": .string("\(error)")]) }
            }
        }
        thread.name = name
        thread.start()
    }
}
