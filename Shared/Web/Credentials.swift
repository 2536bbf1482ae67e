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

/// The bearer token of a request (`Bearer`, in any case, a space, then the token; spaces and tabs around it are
/// dropped), or a 401. Read as bytes: a token is a few hundred of them, and going through `String`'s characters or
/// an array of a substring's bytes cost more than checking the token's signature.
public func bearerToken(_ request: Request) throws -> String {
    guard var header = request.header("authorization") else { throw HTTPError.unauthenticated() }
    let token = header.withUTF8 { bytes -> String? in
        let scheme = "bearer".utf8
        guard bytes.count > scheme.count, bytes[scheme.count] == 0x20,
              zip(bytes, scheme).allSatisfy({ $0 | 0x20 == $1 }) else { return nil }  // | 0x20: the letters' lower case
        var start = scheme.count + 1, end = bytes.count
        while start < end && (bytes[start] == 0x20 || bytes[start] == 0x09) { start += 1 }
        while end > start && (bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09) { end -= 1 }
        return start < end ? String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self) : nil
    }
    guard let token else { throw HTTPError.unauthenticated() }
    return token
}

extension Request {
    /// The client's address: the peer's, or, when the peer is one of `trustedProxies`, the last address in
    /// `X-Forwarded-For` that is not a trusted proxy (entries before it could be forged by the client).
    public func clientAddress(trustedProxies: AddressSet) -> String {
        trustedProxies.client(peer: remoteAddress, forwardedFor: header("x-forwarded-for"))
    }
}
