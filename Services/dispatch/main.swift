import Foundation
import Models
import ServiceKit

// dispatch: couriers, parcels and the matching engine (port 8084, schema `dispatch`).
let app = ServiceApp(service: "dispatch", defaultPort: 8084, migrations: migrations,
                     topics: [ParcelCreated.type, ParcelStatusChanged.type, CourierLocation.type])
let offerTimeout: Int, maxMeters: Int, tickMs: Int, workers: Int, fleetFeed: Bool, operatorCredential: OperatorCredential
do {
    fleetFeed = try app.config.environment.choice("FLEET_FEED", default: "on", ["on", "off"]) == "on"
    operatorCredential = try OperatorCredential(app.config.environment)
    offerTimeout = try app.config.environment.int("OFFER_TIMEOUT_SECONDS", default: 30, range: 1...3600)
    maxMeters = try app.config.environment.int("MATCH_MAX_METERS", default: 10_000, range: 100...1_000_000)
    tickMs = try app.config.environment.int("DISPATCH_TICK_MS", default: 500, range: 50...60_000)
    workers = try app.config.environment.int("MATCH_WORKERS", default: 4, range: 1...64)
} catch {
    app.logger.error("\(error)")
    exit(78)
}
app.logger.info(operatorCredential.isEnabled ? "operator routes enabled" : "operator routes off: OPERATOR_TOKEN is not set")
let matcher = Matcher()
let tracking = ParcelTracking(kafka: app.kafka, logger: app.logger) { [relay = app.relay] message in
    _ = try? relay.currentProducer().sendWithoutWaiting(message)
}
let handlers = DispatchHandlers(pool: app.pool, outbox: app.outbox, idempotency: app.idempotency, matcher: matcher, tracking: tracking)
app.whenTopicsExist(tracking.start, ready: { tracking.isReading })
matcher.start(interval: Double(tickMs) / 1000, workers: workers, pool: app.pool, logger: app.logger) { worker in
    try handlers.dispatchTick(worker: worker, workers: workers, offerTimeout: Double(offerTimeout), maxMeters: Double(maxMeters))
}
if fleetFeed { app.consume("fleet", topics: [CourierLocation.type], handler: handlers.fleetFix) }
app.run(routes: makeRoutes(handlers, app.makeTokenVerifier(), fleet: operatorCredential))
