import Features
import Foundation
import Identity
import Models
import Payments
import Runtime
import ServiceKit
import Web

/// The dispatch service: couriers, parcels and the matching engine (port 8084, schema `dispatch`).
public enum DispatchService {
    /// Dispatch's own settings, read and checked before anything starts.
    struct Settings {
        /// `FLEET_FEED` (on, off): apply fixes a fleet gateway sends on `courier.location`.
        let fleetFeed: Bool
        /// `OPERATOR_TOKEN`: enables the operator routes.
        let operatorCredential: SharedSecret
        /// `FLEET_TOKEN`: a fleet gateway's, for its routes only (fixes, acceptances, the map); they take the operator's too.
        let fleetCredential: SharedSecret
        /// `OFFER_TIMEOUT_SECONDS` (default 30): how long a courier has to answer an offer.
        let offerTimeout: Int
        /// `MATCH_MAX_METERS` (default 10,000): the farthest a courier may be from a pickup.
        let maxMeters: Int
        /// `DISPATCH_TICK_MS` (default 500): the matching round when nothing wakes it sooner.
        let tickMs: Int
        /// `MATCH_WORKERS` (default 4): matching loops side by side.
        let workers: Int
        /// `FIX_FOLD_SECONDS` (default 10): how often appended fixes are folded into couriers' positions (the newest
        /// of each courier once, however many they sent); at most 30, as matching forgets a minute-old fix.
        let foldSeconds: Int
        /// `STRIPE_SECRET_KEY` (`sk_...`): card payments through Stripe; without it cards are refused. `STRIPE_API_URL`
        /// (default https://api.stripe.com) and `PAYMENT_TIMEOUT_SECONDS` (default 10) go with it.
        let stripe: StripeClient?
        /// `STRIPE_WEBHOOK_SECRET` (`whsec_...`): enables `POST /v1/payments/stripe/webhook`.
        let webhookSignature: StripeWebhookSignature?
        let paymentTimeout: Int
        /// `PAYMENT_ACTION_TIMEOUT_SECONDS` (default 900): how long a card's holder has to authenticate a payment
        /// (3-D Secure) before it is given up and its parcel called off.
        let actionTimeout: Int
        /// `COURIER_SHARE_PERCENT` (0-100, default 75): a courier's share of each parcel they deliver.
        let earnings: EarningsRule
        /// `COURIER_DOCUMENTS_RETENTION_DAYS` (0-3650, default 30): how long after an application's decision the
        /// photo of the applicant's identity document is kept (then erased, by the `courier-documents` job).
        let documentsRetentionDays: Int
        /// `TAX_RATE_BASIS_POINTS` (0-10,000, default 0): the tax prices include, shown on receipts (1900: 19 %).
        let taxRateBasisPoints: Int

        init(_ environment: Environment) throws {
            fleetFeed = try environment.choice("FLEET_FEED", default: "on", ["on", "off"]) == "on"
            operatorCredential = try SharedSecret.operatorToken(environment)
            fleetCredential = try SharedSecret.fleetToken(environment)
            offerTimeout = try environment.int("OFFER_TIMEOUT_SECONDS", default: 30, range: 1...3600)
            maxMeters = try environment.int("MATCH_MAX_METERS", default: 10_000, range: 100...1_000_000)
            tickMs = try environment.int("DISPATCH_TICK_MS", default: 500, range: 50...60_000)
            workers = try environment.int("MATCH_WORKERS", default: 4, range: 1...64)
            foldSeconds = try environment.int("FIX_FOLD_SECONDS", default: 10, range: 1...30)
            earnings = EarningsRule(sharePercent: try environment.int("COURIER_SHARE_PERCENT", default: 75, range: 0...100))
            documentsRetentionDays = try environment.int("COURIER_DOCUMENTS_RETENTION_DAYS", default: 30, range: 0...3650)
            taxRateBasisPoints = try environment.int("TAX_RATE_BASIS_POINTS", default: 0, range: 0...10_000)
            let timeout = try environment.int("PAYMENT_TIMEOUT_SECONDS", default: 10, range: 1...60)
            paymentTimeout = timeout
            actionTimeout = try environment.int("PAYMENT_ACTION_TIMEOUT_SECONDS", default: 900, range: 1...86_400)
            let api = environment.string("STRIPE_API_URL", default: "https://api.stripe.com")
            guard let base = URL(string: api), ["http", "https"].contains(base.scheme ?? ""), base.host != nil else {
                throw ConfigError(variable: "STRIPE_API_URL", problem: "must be an http(s) URL such as https://api.stripe.com")
            }
            stripe = try environment.optional("STRIPE_SECRET_KEY").map { key in
                guard key.hasPrefix("sk_") || key.hasPrefix("rk_"), key.count <= 255, !key.contains(where: \.isWhitespace) else {
                    throw ConfigError(variable: "STRIPE_SECRET_KEY", problem: "must be a Stripe secret or restricted key (sk_... or rk_...)")
                }
                return StripeClient(base: base, secretKey: key, timeout: Double(timeout))
            }
            webhookSignature = try environment.optional("STRIPE_WEBHOOK_SECRET").map { secret in
                guard secret.hasPrefix("whsec_"), secret.count >= 16 else {
                    throw ConfigError(variable: "STRIPE_WEBHOOK_SECRET", problem: "must be the endpoint's signing secret (whsec_...)")
                }
                return StripeWebhookSignature(secret: secret)
            }
        }
    }

    /// The service configured from `environment` (a bad setting throws, naming it); `run()` serves it.
    public static func makeApp(environment: Environment = Environment()) throws -> ServiceApp {
        let settings = try Settings(environment)
        let urls = try MediaURLs(environment, defaultPort: 8084)
        let store = try BlobStores.make(environment)
        return try ServiceApp(service: "dispatch", defaultPort: 8084, environment: environment, migrations: migrations) { app in
            app.logger.info(settings.operatorCredential.isEnabled ? "operator routes enabled"
                                                                  : "operator routes off: OPERATOR_TOKEN is not set")
            let matcher = Matcher(offerTimeout: Double(settings.offerTimeout), maxMeters: Double(settings.maxMeters))
            let tracking = ParcelTracking(app)
            // Twice the call's bound and some: a payment is the caller's for that long.
            let payments = settings.stripe.map {
                PaymentSettler(pool: app.pool, parcels: Parcels(storage: DispatchStorage(), outbox: app.outbox, earnings: settings.earnings), provider: $0,
                               lease: Double(2 * settings.paymentTimeout + 5), currency: Tariff().currency, logger: app.logger,
                               authorised: matcher.wake(for:), actionTimeout: Double(settings.actionTimeout),
                               taxRateBasisPoints: settings.taxRateBasisPoints)
            }
            app.logger.info(payments == nil ? "card payments off: STRIPE_SECRET_KEY is not set" : "card payments on")
            let handlers = DispatchHandlers(pool: app.pool, outbox: app.outbox, idempotency: app.idempotency,
                                            matcher: matcher, tracking: tracking,
                                            media: MediaStore(schema: "dispatch", path: "/v1/dispatch/media", urls: urls, purposes: ["parcel", Vetting.identityPurpose, Vetting.vehiclePurpose], store: store),
                                            payments: payments, webhookSignature: settings.webhookSignature,
                                            earnings: settings.earnings)
            if let payments {
                app.add(Job.every(1, "payment-settler", logger: app.logger) { while try payments.run() > 0 {} })
                if let refunds = handlers.refundSettler {
                    app.add(Job.every(1, "refund-settler", logger: app.logger) { while try refunds.run() > 0 {} })
                }
            }
            // Parcels waiting for a courier to be offered them, and how long the longest has waited since its last
            // change (an offer that lapsed puts it back), for the DispatchParcelsWaiting alert; how full PostgreSQL's
            // queue of notifications is (fixes fail once it is full), for PositionNoticesQueueFilling; how long the
            // oldest fix not yet folded has waited, for FixesNotFolded.
            let pool = app.pool
            app.metrics.addGauges(help: ["dispatch_parcels_waiting": "Parcels waiting for a courier to be offered them.",
                                         "dispatch_oldest_waiting_seconds": "How long the longest-waiting of them has waited since its last change.",
                                         "dispatch_notification_queue_usage": "The fraction of PostgreSQL's notification queue in use (fix announcements not yet read by every instance).",
                                         "dispatch_oldest_unfolded_fix_seconds": "How long the oldest location fix not yet folded into its courier's position has waited."]) {
                guard let row = try? pool.withConnection({
                    try $0.first("""
                        SELECT count(*)::int AS n, coalesce(extract(epoch FROM now() - min(updated_at)), 0)::float8 AS oldest,
                            pg_notification_queue_usage() AS queue,
                            (SELECT coalesce(extract(epoch FROM now() - min(appended_at)), 0)::float8 FROM dispatch.fix_batches) AS unfolded
                        FROM dispatch.parcels WHERE status = 'awaiting_courier'
                        """)
                }), let n = try? row["n", as: Int.self], let oldest = try? row["oldest", as: Double.self],
                   let queue = try? row["queue", as: Double.self], let unfolded = try? row["unfolded", as: Double.self] else { return [] }
                return [("dispatch_parcels_waiting", "", Double(n)), ("dispatch_oldest_waiting_seconds", "", oldest),
                        ("dispatch_notification_queue_usage", "", queue), ("dispatch_oldest_unfolded_fix_seconds", "", unfolded)]
            }
            app.add(Job.every(Double(settings.foldSeconds), "fix-fold", logger: app.logger) { try handlers.storage.foldFixes(pool) })
            app.add(handlers.media.maintenance(pool, logger: app.logger))
            let retention = TimeInterval(settings.documentsRetentionDays) * 86_400
            app.add(Job.every(60, "courier-documents", logger: app.logger) {
                while try pool.withTransaction({ try handlers.storage.eraseIdentityPhotos($0, decidedBefore: Date().addingTimeInterval(-retention)) }) > 0 {}
            })
            app.add(tracking.feed)
            app.addReadinessCheck("broker") { tracking.isReading }
            let round = MatchingRound(pool: app.pool, parcels: handlers.parcels, matcher: matcher)
            let workers = settings.workers
            matcher.services(interval: Double(settings.tickMs) / 1000, workers: workers, pool: app.pool, logger: app.logger) {
                try round.run(worker: $0, of: workers, recheckInterval: Double(settings.tickMs) / 1000)
            }.forEach(app.add)
            let erasure = AccountErasure(parcels: handlers.parcels, media: handlers.media)
            app.consume("profiles") { events in
                events.on([UserDeleted.self], erasure.userDeleted)
                events.on([UserRegistered.self, UserUpdated.self]) { event, connection in
                    try Profiles(schema: "dispatch").apply(event, on: connection)
                    try handlers.parcels.storage.recordContact(connection, event)
                    try handlers.parcels.resolveRecipients(connection, event)
                }
            }
            app.add(handlers.claims.cleanup(app.pool, logger: app.logger))
            if settings.fleetFeed { app.consume("fleet") { events in events.on([CourierLocation.self], handlers.fleetFix) } }
            return makeRoutes(handlers, app.makeTokenVerifier(), tickets: StreamTickets(pool: app.pool, schema: "dispatch"),
                              operators: settings.operatorCredential, fleet: settings.fleetCredential, services: app.config.serviceToken)
        }
    }
}
