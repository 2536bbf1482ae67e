import Models
import ServiceKit

// stories: groups, memberships, stories, media and newsletters (port 8082, schema `stories`).
let app = ServiceApp(service: "stories", defaultPort: 8082, migrations: migrations,
                     topics: [GroupCreated.type, GroupMemberJoined.type, GroupMemberLeft.type, StoryCreated.type,
                              StoryCommented.type, UserRegistered.type, UserUpdated.type])
let handlers = StoriesHandlers(pool: app.pool, outbox: app.outbox, idempotency: app.idempotency)
app.consume("profiles", topics: [UserRegistered.type, UserUpdated.type]) { event, connection in
    switch event.type {
    case UserRegistered.type: try handlers.userRegistered(event, connection)
    default: try handlers.userUpdated(event, connection)
    }
}
app.run(routes: makeRoutes(handlers, app.makeTokenVerifier()))
