import Foundation
import HTTP
import Postgres
import Web

/// How a browser opens an event stream: `EventSource` cannot send an `Authorization` header, and an access token in a
/// URL would be written down wherever URLs are (proxies' logs, history). The client asks auth for a stream ticket with
/// its token (`POST /v1/auth/stream-tickets`) and opens the stream with `?ticket=` within a minute. A ticket is signed
/// like an access token, with `aud: "stream"` and an id of its own: it opens one stream, once (its id is recorded in
/// the service's `stream_tickets` table, so every instance knows), it never passes as a bearer token, and a bearer
/// token never passes as a ticket. A browser's automatic reconnect with the same URL is then a 401 that closes the
/// `EventSource`: the client gets a new ticket and reopens with `?lastEventId=` to resume.
public struct StreamTickets: Sendable {
    let pool: Pool
    let schema: String

    public init(pool: Pool, schema: String) { self.pool = pool; self.schema = schema }

    /// The table, for a service's migrations.
    public static let tableSQL = """
        CREATE TABLE stream_tickets (
            id uuid PRIMARY KEY,
            expires_at timestamptz NOT NULL
        );
        CREATE INDEX stream_tickets_by_expiry ON stream_tickets (expires_at);
        """

    /// Records the ticket's use, or a 401 when it was used before. Tickets expired for a minute are forgotten on the
    /// way (their signature no longer passes).
    func redeem(_ ticket: StreamTicket) throws {
        let recorded = try pool.withConnection { c in
            try c.execute("""
                WITH expired AS (DELETE FROM \(unescaped: schema).stream_tickets WHERE expires_at < now() - interval '1 minute')
                INSERT INTO \(unescaped: schema).stream_tickets (id, expires_at)
                VALUES (\(ticket.id), to_timestamp(\(ticket.expiresAt.timeIntervalSince1970))) ON CONFLICT (id) DO NOTHING
                """)
        }
        guard recorded == 1 else { throw HTTPError.unauthenticated() }
    }
}

extension Access where Who == Caller {
    /// Callers with a user's access token or a stream ticket in the query (`?ticket=`, which wins over a header),
    /// for event streams (an `EventSource` cannot set a header); listed under both schemes. A ticket is checked in
    /// full with the request (a GET has no body to hold back) and used once. A stream ends when the caller's session
    /// is revoked.
    public static func stream(_ auth: any Authenticator, tickets: StreamTickets) -> Access<Caller> {
        Access(security: ["bearer", "streamTicket"],
               checkHead: Router.headCheck { if $0.query["ticket"] == nil { try auth.checkHead($0) } },
               authenticate: { request -> Caller in
                   guard let text = request.query["ticket"] else { return try auth.authenticate(request) }
                   let ticket = try auth.ticket(text)
                   try tickets.redeem(ticket)
                   return ticket.caller
               },
               answered: { answer, caller in if let stream = answer.stream { auth.end(stream, whenRevoked: caller) } },
               scope: { $0.userId.lowercased })
    }
}

extension RouteGroup.Also {
    /// What an event stream answers.
    public static var eventStream: Self {
        .answer(200, contentType: "text/event-stream", description: "Server-Sent Events, until the client leaves")
    }
}
