import Events
import Foundation
import Models
import Postgres

/// An event as a typed handler gets it: its payload decoded, and the envelope (id, subject, time, trace).
public struct Received<Payload: Sendable>: Sendable {
    public let event: ReceivedEvent
    public let payload: Payload
}

/// What a consumer does with each type of event, by the payload's Swift type; the topics it reads follow from them
/// (a topic is named for the type of its events).
public struct EventHandlers: Sendable {
    private(set) var byType: [String: EventConsumer.Handler] = [:]

    /// Handles `P`'s events, their payload decoded (one that does not decode fails, and is dead-lettered).
    public mutating func on<P: EventPayload>(_ type: P.Type, _ handle: @escaping @Sendable (Received<P>, Connection) throws -> Void) {
        precondition(byType[P.type] == nil, "\(P.type) is handled twice")
        byType[P.type] = { event, c in try handle(Received(event: event, payload: try event.decode(P.self)), c) }
    }

    /// Handles the events of these types as they came: for what reads several types itself (profiles, blocks).
    public mutating func on(_ types: [any EventPayload.Type], _ handle: @escaping EventConsumer.Handler) {
        for type in types {
            precondition(byType[type.type] == nil, "\(type.type) is handled twice")
            byType[type.type] = handle
        }
    }

    /// The topics the handlers read.
    public var topics: [String] { byType.keys.sorted() }
}

extension ServiceApp {
    /// Adds a consumer group whose handlers are declared by type:
    /// `app.consume("directory") { events in events.on(UserDeleted.self) { deleted, c in ... } }`.
    /// Each event is handled in a transaction with de-duplication; an event of a type it has no handler for is skipped.
    public func consume(_ name: String, _ declare: (inout EventHandlers) -> Void) {
        var handlers = EventHandlers()
        declare(&handlers)
        let byType = handlers.byType
        consume(name, topics: handlers.topics) { event, connection in
            try byType[event.type]?(event, connection)
        }
    }
}
