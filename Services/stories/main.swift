import Foundation
import Models
import ServiceKit

// stories: groups, memberships, stories, media and newsletters (port 8082, schema `stories`).
let app = ServiceApp(service: "stories", defaultPort: 8082, migrations: migrations,
                     topics: [GroupCreated.type, GroupMemberJoined.type, GroupMemberLeft.type, StoryCreated.type,
                              StoryCommented.type, NewsletterCompiled.type, ReminderDue.type, UserRegistered.type,
                              UserUpdated.type])
let handlers = StoriesHandlers(pool: app.pool, outbox: app.outbox, idempotency: app.idempotency)
app.consume("profiles", topics: [UserRegistered.type, UserUpdated.type]) { event, connection in
    switch event.type {
    case UserRegistered.type: try handlers.userRegistered(event, connection)
    default: try handlers.userUpdated(event, connection)
    }
}
let scanSeconds: Int
do { scanSeconds = try app.config.environment.int("NEWSLETTER_SCAN_SECONDS", default: 30, range: 1...3600) } catch {
    app.logger.error("\(error)")
    exit(78)
}
app.every(seconds: Double(scanSeconds), "compile newsletters") { try handlers.compileDueNewsletters() }
app.every(seconds: 3600, "delete old join failures") { try app.pool.withConnection { try StoriesStorage().deleteOldJoinFailures($0) } }
app.run(routes: makeRoutes(handlers, app.makeTokenVerifier()))
