import Foundation
import Models
import Runtime
import XCTest

/// The trace id an event's `traceparent` names.
private func traceId(_ event: [String: Any]?) -> String? {
    (event?["traceparent"] as? String).flatMap { TraceContext(traceparent: $0) }?.traceId
}

/// One trace from a request to the last consumer: the W3C `traceparent` a request brings (the gateway's) is
/// continued by the service, written into every event the request causes (the CloudEvents distributed-tracing
/// extension) and continued by each consumer; every log line on the way names its trace id.
final class TraceTests: StoriesTestCase {
    override var serviceSettings: [String: String] { super.serviceSettings.merging(["LOG_LEVEL": "debug"]) { $1 } }

    func testATraceGoesFromTheRequestIntoItsEventsAndOnThroughTheirConsumers() throws {
        let probe = try EventProbe(topics: [UserRegistered.type, StoryCreated.type])
        let (signupTrace, storyTrace) = (TraceContext.start().traceId, TraceContext.start().traceId)
        let callerSpan = "00f067aa0ba902b7"

        // A sign-up at auth: user.registered carries its trace, and stories' consumer of it continues the trace.
        let name = "t" + UUID().uuidString.prefix(8).lowercased()
        let signup = try accounts.post("/v1/auth/signup", ["username": name, "email": "\(name)@example.com",
                                                           "password": "correct horse battery", "fullName": "Traced"],
                                       headers: ["traceparent": "00-\(signupTrace)-\(callerSpan)-01"])
        XCTAssertEqual(signup.status, 201)
        let registered = probe.first { $0["type"] as? String == UserRegistered.type && $0["subject"] as? String == signup.userId }
        XCTAssertEqual(traceId(registered), signupTrace, "the event carries the request's trace")
        XCTAssertFalse((registered?["traceparent"] as? String ?? "").contains(callerSpan), "in a span of auth's own")
        XCTAssertTrue(auth.log.contains(#""traceId":"\#(signupTrace)""#), "auth's access log line names the trace")
        let eventId = registered?["id"] as? String ?? "?"
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            stories.log.split(separator: "\n").contains { $0.contains(#""msg":"event handled""#) && $0.contains(eventId)
                && $0.contains(#""traceId":"\#(signupTrace)""#) }
        }, "stories' consumer logs the event under the same trace")

        // A story: story.created carries the trace of the request that posted it.
        let author = Person(id: signup.userId, token: signup.accessToken)
        let groupId = try group(author)["id"] as? String ?? ""
        let posted = try api.post("/v1/stories", ["text": "Traced", "groupIds": [groupId]], token: author.token,
                                  headers: ["traceparent": "00-\(storyTrace)-\(callerSpan)-01"])
        XCTAssertEqual(posted.status, 201)
        let created = probe.first { $0["type"] as? String == StoryCreated.type && $0["subject"] as? String == posted["id"] as? String }
        XCTAssertEqual(traceId(created), storyTrace)

        // Without a traceparent (no gateway in front), the service starts a trace of its own.
        let untraced = try api.post("/v1/stories", ["text": "Untraced", "groupIds": [groupId]], token: author.token)
        let started = probe.first { $0["type"] as? String == StoryCreated.type && $0["subject"] as? String == untraced["id"] as? String }
        XCTAssertNotNil(traceId(started))
        XCTAssertNotEqual(traceId(started), storyTrace)
        // A malformed traceparent is not continued.
        let forged = try api.post("/v1/stories", ["text": "Forged", "groupIds": [groupId]], token: author.token,
                                  headers: ["traceparent": "00-\(String(repeating: "0", count: 32))-\(callerSpan)-01"])
        let fresh = probe.first { $0["type"] as? String == StoryCreated.type && $0["subject"] as? String == forged["id"] as? String }
        XCTAssertNotNil(traceId(fresh), "a valid trace of the service's own (a valid one is never all zeros)")
    }
}

/// The same for a parcel: from the request that books it and the courier's that takes it, to the tracking stream.
final class ParcelTraceTests: DispatchTestCase {
    /// The booking is offered at once, and the courier answers only after the booking's event and the sender's
    /// stream arrive, which on a loaded machine takes longer than the 4 s an offer lasts in `DispatchTestCase` (and a
    /// lapsed offer is never made to that courier again): here an offer outlasts those waits.
    override var serviceSettings: [String: String] {
        super.serviceSettings.merging(["LOG_LEVEL": "debug", "OFFER_TIMEOUT_SECONDS": "120"]) { $1 }
    }

    func testAParcelsTraceReachesItsEventsAndTheTrackingStream() throws {
        let probe = try EventProbe(topics: [ParcelCreated.type, ParcelStatusChanged.type])
        let (booking, acceptance) = (TraceContext.start().traceId, TraceContext.start().traceId)
        let courier = try courier(lat: 44.4268, lon: 26.1025), sender = try person()
        // The booking: parcel.created carries the request's trace.
        let photo = try photo(sender)
        let booked = try api.post("/v1/parcels", [
            "pickup": ["lat": 44.4268, "lon": 26.1025, "address": "Piața Universității 1"],
            "dropoff": ["lat": 44.4500, "lon": 26.0900, "address": "Bulevardul Aviatorilor 10"],
            "recipient": ["name": "Rita Recipient"], "service": "express", "paymentMethod": "cash",
            "documentPhotoMediaId": photo], token: sender.token, headers: ["traceparent": "00-\(booking)-00f067aa0ba902b7-01"])
        XCTAssertEqual(booked.status, 201)
        let id = booked["id"] as? String ?? ""
        let created = probe.first { $0["type"] as? String == ParcelCreated.type && $0["subject"] as? String == id }
        XCTAssertEqual(traceId(created), booking)

        // The sender follows it; the courier's acceptance is a status event in the courier's trace, on the stream too.
        let stream = try SSEReader(port: api.port, path: "/v1/parcels/\(id)/events", token: sender.token)
        XCTAssertEqual(stream.next()?.event, "snapshot")
        XCTAssertEqual(wait(id, as: sender, for: "offered")?["offeredTo"] as? String, courier.id)
        let accepted = try api.post("/v1/parcels/\(id)/accept", token: courier.token,
                                    headers: ["traceparent": "00-\(acceptance)-00f067aa0ba902b7-01"])
        XCTAssertEqual(accepted.status, 200)
        let status = probe.first { $0["type"] as? String == ParcelStatusChanged.type && $0["subject"] as? String == id
            && (($0["data"] as? [String: Any])?["to"] as? String) == "assigned" }
        XCTAssertEqual(traceId(status), acceptance)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 15) {
            service.log.split(separator: "\n").contains { $0.contains(#""msg":"event sent to live streams""#)
                && $0.contains(#""traceId":"\#(acceptance)""#) }
        }, "the tracking feed sends the status to the stream under the acceptance's trace")
    }
}
