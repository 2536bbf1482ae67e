import Foundation
import HTTP

/// The authenticated caller of a request.
public struct Caller: Sendable, Equatable {
    /// The user id.
    public let userId: UUID
    /// The session id.
    public let sessionId: UUID
    public init(userId: UUID, sessionId: UUID) { self.userId = userId; self.sessionId = sessionId }
}

/// A stream ticket whose signature, audience and times verified: whom it names, its id, and when it expires.
public struct StreamTicket: Sendable, Equatable {
    public let caller: Caller
    public let id: UUID
    public let expiresAt: Date

    public init(caller: Caller, id: UUID, expiresAt: Date) { self.caller = caller; self.id = id; self.expiresAt = expiresAt }
}

/// Turns a request's bearer token into a `Caller`, or a 401.
public protocol Authenticator: Sendable {
    func authenticate(_ request: Request) throws -> Caller
    /// A stream ticket (`?ticket=` of an event stream) checked as `authenticate` checks a token, or a 401. Its single
    /// use is the stream route's to record (`StreamTickets`).
    func ticket(_ text: String) throws -> StreamTicket
    /// What the head alone shows of the credentials, checked before a body is read: it must not block (no
    /// database, no network), and may let through what `authenticate` will refuse. Throws a 401.
    func checkHead(_ request: Request) throws
    /// Closes `stream` when `caller`'s session is revoked (at once when it already is).
    func end(_ stream: EventStream, whenRevoked caller: Caller)
}

extension Authenticator {
    public func end(_ stream: EventStream, whenRevoked caller: Caller) {}
    /// By default, no ticket is accepted.
    public func ticket(_ text: String) throws -> StreamTicket { throw HTTPError.unauthenticated() }
    /// By default, that there is a bearer token.
    public func checkHead(_ request: Request) throws { _ = try bearerToken(request) }
}

/// The bearer token of a request, or a 401.
public func bearerToken(_ request: Request) throws -> String {
    guard let header = request.header("authorization") else { throw HTTPError.unauthenticated() }
    let parts = header.split(separator: " ", maxSplits: 1)
    guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else {
        throw HTTPError.unauthenticated()
    }
    // Bytes, not Foundation's trimming (which went through NSString and UTF-16 on every request).
    var token = Array(parts[1].utf8)[...]
    while let first = token.first, first == 0x20 || first == 0x09 { token.removeFirst() }
    while let last = token.last, last == 0x20 || last == 0x09 { token.removeLast() }
    guard !token.isEmpty else { throw HTTPError.unauthenticated() }
    return String(decoding: token, as: UTF8.self)
}

extension Request {
    /// The client's address: the peer's, or, when the peer is one of `trustedProxies`, the last address in
    /// `X-Forwarded-For` that is not a trusted proxy (entries before it could be forged by the client).
    public func clientAddress(trustedProxies: AddressSet) -> String {
        guard trustedProxies.contains(remoteAddress), let forwarded = header("x-forwarded-for") else { return remoteAddress }
        for hop in forwarded.split(separator: ",").reversed() {
            let address = hop.trimmingCharacters(in: .whitespaces)
            if trustedProxies.contains(address) { continue }
            return Validate.isIPAddress(address) ? address : remoteAddress
        }
        return remoteAddress
    }
}
