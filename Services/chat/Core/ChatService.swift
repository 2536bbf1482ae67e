import Features
import Foundation
import Identity
import Models
import Runtime
import ServiceKit
import Web

/// The chat service: team rooms with a shared todo list, direct messages and parcel conversations, live
/// (port 8083, schema `chat`).
public enum ChatService {
    /// The service configured from `environment` (a bad setting throws, naming it); `run()` serves it.
    public static func makeApp(environment: Environment = Environment()) throws -> ServiceApp {
        let consumed = Blocks.topics + [UserRegistered.type, UserUpdated.type, UserDeleted.type, GroupCreated.type, GroupMemberJoined.type, GroupMemberLeft.type,
                        ParcelCreated.type, ParcelClaimed.type, ParcelStatusChanged.type]
        let urls = try MediaURLs(environment, defaultPort: 8083)
        let store = try BlobStores.make(environment)
        let moderators = try SharedSecret.operatorToken(environment)  // OPERATOR_TOKEN: the moderators' credential
        return try ServiceApp(service: "chat", defaultPort: 8083, environment: environment, migrations: migrations) { app in
            let storage = ChatStorage()
            let live = RoomFeed(app, storage: storage)
            app.add(live.feed)
            app.addReadinessCheck("broker") { live.feed.isReading }
            let handlers = ChatHandlers(pool: app.pool, outbox: app.outbox, relay: app.relay, idempotency: app.idempotency, live: live,
                                        media: MediaStore(schema: "chat", path: "/v1/chat/media", urls: urls, purposes: ["message"], store: store))
            // What chat learns from other services, in one consumer group: names, who shares a group, parcels.
            let leaving = Leaving(storage: storage, media: handlers.media)
            app.consume("directory", topics: consumed) { event, connection in
                let rooms = handlers.rooms
                switch event.type {
                case UserRegistered.type, UserUpdated.type: try Profiles(schema: "chat").apply(event, on: connection)
                case UserDeleted.type: try leaving.userDeleted(event, connection)
                case UserBlocked.type, UserUnblocked.type: try Blocks(schema: "chat").apply(event, on: connection)
                case ParcelCreated.type: try rooms.parcelCreated(event, connection)
                case ParcelClaimed.type: try rooms.parcelClaimed(event, connection)
                case ParcelStatusChanged.type: try rooms.parcelStatus(event, connection)
                default: try rooms.groupMembership(event, connection)
                }
            }
            app.add(handlers.invites.cleanup(app.pool, logger: app.logger))
            app.add(handlers.media.maintenance(app.pool, logger: app.logger))
            return makeRoutes(handlers, app.makeTokenVerifier(), tickets: StreamTickets(pool: app.pool, schema: "chat"),
                              moderators: moderators, services: app.config.serviceToken)
        }
    }
}
