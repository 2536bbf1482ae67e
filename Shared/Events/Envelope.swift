import Foundation
import Models
import Runtime

/// The CloudEvents 1.0 structured-mode envelope every event travels in.
public struct CloudEvent<Payload: Codable & Sendable>: Codable, Sendable {
    public var specversion = "1.0"
    /// Unique per event; consumers de-duplicate by it.
    public var id: String
    /// `/auth`, `/stories`, ...
    public var source: String
    /// The topic name.
    public var type: String
    /// RFC 3339 UTC with milliseconds.
    public var time: String
    /// The aggregate id (also the Kafka key).
    public var subject: String
    public var datacontenttype = "application/json"
    /// Names the JSON Schema in `schemas/events/` that `data` follows.
    public var dataschema: String
    /// The W3C trace the event belongs to (the CloudEvents distributed-tracing extension): the request's, or the
    /// event's that caused it. Absent when it has none (a scheduled job's).
    public var traceparent: String?
    public var data: Payload

    public init(id: String, source: String, type: String, time: String, subject: String, dataschema: String,
                traceparent: String? = nil, data: Payload) {
        self.id = id; self.source = source; self.type = type; self.time = time; self.subject = subject
        self.dataschema = dataschema; self.traceparent = traceparent; self.data = data
    }
}

/// Where each event type's schema is published.
public func dataSchemaURI(for type: String) -> String { "urn:backend:schema:events:\(type)" }

/// A consumed event: the envelope's metadata and its `data` still undecoded.
public struct ReceivedEvent: Sendable {
    public let id: String
    public let type: String
    public let source: String
    public let subject: String
    public let time: Date?
    /// The trace it belongs to, when it names a valid one.
    public let trace: TraceContext?
    /// The whole message value.
    public let raw: [UInt8]

    private struct Meta: Decodable {
        var id: String; var type: String; var source: String; var subject: String; var time: String; var traceparent: String?
    }

    /// Parses the envelope; nil when the value is not a CloudEvent.
    public init?(_ value: [UInt8]) {
        guard let meta = try? JSONDecoder().decode(Meta.self, from: Data(value)) else { return nil }
        id = meta.id; type = meta.type; source = meta.source; subject = meta.subject
        time = Timestamp.parse(meta.time); trace = meta.traceparent.flatMap { TraceContext(traceparent: $0) }; raw = value
    }

    /// Decodes `data` as `P`.
    /// The payload (`data`); the envelope's other members were read by `init`.
    public func decode<P: Decodable>(_ type: P.Type = P.self) throws -> P {
        try Timestamp.decoder().decode(Envelope<P>.self, from: Data(raw)).data
    }

    private struct Envelope<P: Decodable>: Decodable { var data: P }

    /// The `data` member as compact JSON text (what live streams send), or nil when there is none.
    public var dataText: String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(raw)) as? [String: Any], let data = object["data"],
              let bytes = try? JSONSerialization.data(withJSONObject: data, options: [.sortedKeys, .fragmentsAllowed]) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
