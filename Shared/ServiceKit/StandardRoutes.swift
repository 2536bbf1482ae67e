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

/// The routes every service answers (`/healthz`, `/readyz`, `/metrics`, `/openapi.json`) and the pipeline every
/// request goes through.
extension ServiceApp {
    /// `/healthz`'s one answer, written once (a probe's answer was a JSON encoding each time).
    static let alive = Array(#"{"status":"ok"}"#.utf8)

    /// `/healthz` and `/metrics` are answered by the connection's own thread (they never wait for a handler thread,
    /// so a liveness probe is not failed by slow handlers); `/readyz` asks the database and broker, on a handler thread.
    func addHealthRoutes(_ router: inout Router) {
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
    func readinessNow() -> (ready: Bool, answer: [String: String]) {
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

    func addDocumentRoute(_ router: inout Router) {
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
