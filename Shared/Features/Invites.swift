import Crypto
import Foundation
import HTTP
import Postgres
import Runtime

/// Membership by invite code, as stories' groups and chat's rooms offer it (and dispatch's parcels to their recipient): what holds a code is joined in one
/// transaction, a code that nothing holds is a failure, and a user who fails too often is held back (`GuessThrottle`).
/// The service says what holds a code and what joining it does; the codes and the throttle are the same for both.
public struct InviteJoins: Sendable {
    public let throttle: GuessThrottle

    public init(schema: String, table: String = "join_failures", failureLimit: Int = 10) {
        throttle = GuessThrottle(schema: schema, table: table, limit: failureLimit)
    }

    /// Joins what holds the code `typed` for `user`: `join` gets the code's stored form in a transaction and returns
    /// nil when nothing holds it. A code nothing holds, or text that cannot be a code, throws `unknown` and counts as
    /// a failure.
    public func join<T>(_ pool: Pool, typed: String, user: UUID, unknown: any Error,
                        _ join: (Connection, _ code: String) throws -> T?) throws -> T {
        var failed = false
        return try throttle.attempt(pool, user: user, isFailure: { _ in failed }) {
            guard let code = typed.count <= 64 ? InviteCode.normalise(typed) : nil else { failed = true; throw unknown }
            return try pool.withTransaction { c in
                guard let joined = try join(c, code) else { failed = true; throw unknown }
                return joined
            }
        }
    }

    /// The job that forgets old failures.
    public func cleanup(_ pool: Pool, logger: Logger) -> Job { throttle.cleanup(pool, logger: logger) }
}

/// Invite codes: 12 Crockford base32 symbols (60 random bits), shown as `XXXX-XXXX-XXXX` to be read aloud.
/// Entry is forgiving: case, dashes and spaces are ignored, and O, I and L read as 0, 1 and 1. Stories' groups and
/// chat's rooms use them.
public enum InviteCode {
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")

    /// A fresh code in its stored (normalised) form.
    public static func generate() -> String {
        String(secureRandomBytes(12).map { alphabet[Int($0 & 31)] })
    }

    /// The stored form of what someone typed, or nil when it cannot be a code.
    public static func normalise(_ typed: String) -> String? {
        var out = ""
        for c in typed.uppercased() {
            switch c {
            case "-", " ": continue
            case "O": out.append("0")
            case "I", "L": out.append("1")
            default:
                guard alphabet.contains(c) else { return nil }
                out.append(c)
            }
        }
        return out.count == 12 ? out : nil
    }

    /// The display form.
    public static func display(_ stored: String) -> String {
        let c = Array(stored)
        guard c.count == 12 else { return stored }
        return String(c[0..<4]) + "-" + String(c[4..<8]) + "-" + String(c[8..<12])
    }
}

/// Limits what someone may guess: after `limit` failed attempts within 15 minutes (joining by a wrong invite
/// code, looking up a username nobody has), further attempts are a 429 with `Retry-After` until the oldest failure
/// ages out. Failures are rows of a table of the service's (`GuessThrottle.tableSQL` in its migrations), kept a day.
public struct GuessThrottle: Sendable {
    /// The service's schema.
    public let schema: String
    /// The table of failures (`join_failures` for invite codes).
    public let table: String
    /// Failures within 15 minutes before attempts are refused.
    public let limit: Int

    public init(schema: String, table: String = "join_failures", limit: Int = 10) {
        self.schema = schema; self.table = table; self.limit = limit
    }

    /// A table of failures, for a service's migrations.
    public static func tableSQL(_ table: String = "join_failures") -> String {
        """
        CREATE TABLE \(table) (
            user_id uuid NOT NULL,
            at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX \(table)_by_user ON \(table) (user_id, at);
        """
    }

    /// Runs `attempt` for `user` unless they failed too often; a throw that `isFailure` recognises is recorded (in
    /// its own transaction, after the attempt's rolled back) and rethrown.
    public func attempt<T>(_ pool: Pool, user: UUID, isFailure: (Error) -> Bool, _ attempt: () throws -> T) throws -> T {
        let recent = try pool.withConnection { c in
            try c.first("""
                SELECT count(*) AS n, COALESCE(EXTRACT(EPOCH FROM min(at) + interval '15 minutes' - now()), 0)::int AS retry
                FROM \(unescaped: schema).\(unescaped: table) WHERE user_id = \(user) AND at > now() - interval '15 minutes'
                """)!
        }
        if try recent["n", as: Int.self] >= limit { throw HTTPError.rateLimited(retryAfter: try recent["retry"]) }
        do {
            return try attempt()
        } catch where isFailure(error) {
            _ = try pool.withConnection { try $0.execute("INSERT INTO \(unescaped: schema).\(unescaped: table) (user_id) VALUES (\(user))") }
            throw error
        }
    }

    /// The job that forgets failures older than a day.
    public func cleanup(_ pool: Pool, logger: Logger) -> Job {
        Job.every(3600, "delete-old-\(table.replacingOccurrences(of: "_", with: "-"))", logger: logger) { [schema, table] in
            _ = try pool.withConnection { try $0.execute("DELETE FROM \(unescaped: schema).\(unescaped: table) WHERE at < now() - interval '1 day'") }
        }
    }
}
