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
            let erasure = AccountErasure(storage: storage, media: handlers.media)
            app.consume("directory") { events in
                let rooms = handlers.rooms
                events.on([UserRegistered.self, UserUpdated.self]) { event, c in try Profiles(schema: "chat").apply(event, on: c) }
                events.on([UserDeleted.self], erasure.userDeleted)
                events.on([UserBlocked.self, UserUnblocked.self]) { event, c in try Blocks(schema: "chat").apply(event, on: c) }
                events.on(ParcelCreated.self) { created, c in try rooms.parcelCreated(created.payload, c) }
                events.on(ParcelClaimed.self) { claimed, c in try rooms.parcelClaimed(claimed.payload, c) }
                events.on(ParcelStatusChanged.self) { change, c in try rooms.parcelStatus(change.payload, c) }
                events.on(GroupCreated.self) { created, c in try rooms.groupCreated(created.payload, c) }
                events.on(GroupMemberJoined.self) { joined, c in try rooms.memberJoined(joined.payload, c) }
                events.on(GroupMemberLeft.self) { left, c in try rooms.memberLeft(left.payload, c) }
            }
            app.add(handlers.invites.cleanup(app.pool, logger: app.logger))
            app.add(handlers.media.maintenance(app.pool, logger: app.logger))
            return makeRoutes(handlers, app.makeTokenVerifier(), tickets: StreamTickets(pool: app.pool, schema: "chat"),
                              moderators: moderators, services: app.config.serviceToken)
        }
    }
}
