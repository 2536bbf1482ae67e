import Features
import Models
import Runtime
import ServiceKit
import Web

/// The stories service: groups, memberships, stories, media and newsletters (port 8082, schema `stories`).
public enum StoriesService {
    /// Stories' own settings, read and checked before anything starts.
    struct Settings {
        /// `NEWSLETTER_SCAN_SECONDS`: how often due newsletters are compiled (default 30).
        let newsletterScanSeconds: Int
        /// `OPERATOR_TOKEN`: the moderators' credential; enables the queue of reports.
        let moderators: SharedSecret

        init(_ environment: Environment) throws {
            newsletterScanSeconds = try environment.int("NEWSLETTER_SCAN_SECONDS", default: 30, range: 1...3600)
            moderators = try SharedSecret.operatorToken(environment)
        }
    }

    /// The service configured from `environment` (a bad setting throws, naming it); `run()` serves it.
    public static func makeApp(environment: Environment = Environment()) throws -> ServiceApp {
        let settings = try Settings(environment)
        let urls = try MediaURLs(environment, defaultPort: 8082)
        let store = try BlobStores.make(environment)
        return try ServiceApp(service: "stories", defaultPort: 8082, environment: environment, migrations: migrations) { app in
            let pool = app.pool
            let handlers = StoriesHandlers(pool: pool, outbox: app.outbox, idempotency: app.idempotency,
                                           media: MediaStore(schema: "stories", path: "/v1/media", urls: urls, purposes: ["photo", MediaStore.avatar],
                                                              store: store))
            let erasure = AccountErasure(storage: handlers.storage, media: handlers.media)
            app.consume("profiles") { events in
                events.on([UserDeleted.self], erasure.userDeleted)
                events.on([UserBlocked.self, UserUnblocked.self]) { event, c in try Blocks(schema: "stories").apply(event, on: c) }
                events.on([UserRegistered.self, UserUpdated.self], handlers.groups.profile)
            }
            app.add(Job.every(Double(settings.newsletterScanSeconds), "compile-newsletters", logger: app.logger) {
                try handlers.newsletters.compileDueNewsletters()
                try handlers.newsletters.sendDueReminders()
            })
            app.add(handlers.invites.cleanup(pool, logger: app.logger))
            app.add(handlers.media.maintenance(pool, logger: app.logger))
            return makeRoutes(handlers, app.makeTokenVerifier(), moderators: settings.moderators, services: app.config.serviceToken)
        }
    }
}
