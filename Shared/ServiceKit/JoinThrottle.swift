import Foundation
import HTTP
import Postgres

/// Limits what someone may guess: after `limit` failed attempts within 15 minutes (joining by a wrong invite
/// code, say), further attempts are a 429 with `Retry-After` until the oldest failure ages out. Failures are rows of
/// the service's `join_failures` table (`JoinThrottle.tableSQL` in its migrations), kept a day.
public struct JoinThrottle: Sendable {
    /// The service's schema.
    public let schema: String
    /// Failures within 15 minutes before attempts are refused.
    public let limit: Int

    public init(schema: String, limit: Int = 10) { self.schema = schema; self.limit = limit }

    /// The table, for a service's migrations.
    public static let tableSQL = """
        CREATE TABLE join_failures (
            user_id uuid NOT NULL,
            at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX join_failures_by_user ON join_failures (user_id, at);
        """

    /// Runs `attempt` for `user` unless they failed too often; a throw that `isFailure` recognises is recorded (in
    /// its own transaction, after the attempt's rolled back) and rethrown.
    public func attempt<T>(_ pool: Pool, user: UUID, isFailure: (Error) -> Bool, _ attempt: () throws -> T) throws -> T {
        let recent = try pool.withConnection { c in
            try c.first("""
                SELECT count(*) AS n, COALESCE(EXTRACT(EPOCH FROM min(at) + interval '15 minutes' - now()), 0)::int AS retry
                FROM \(schema).join_failures WHERE user_id = $1 AND at > now() - interval '15 minutes'
                """, [user])!
        }
        if try recent["n", as: Int.self] >= limit { throw HTTPError.rateLimited(retryAfter: try recent["retry"]) }
        do {
            return try attempt()
        } catch where isFailure(error) {
            _ = try pool.withConnection { try $0.execute("INSERT INTO \(schema).join_failures (user_id) VALUES ($1)", [user]) }
            throw error
        }
    }

    /// The job that forgets failures older than a day.
    public func cleanup(_ pool: Pool, logger: Logger) -> Job {
        Job.every(3600, "delete-old-join-failures", logger: logger) { [schema] in
            _ = try pool.withConnection { try $0.execute("DELETE FROM \(schema).join_failures WHERE at < now() - interval '1 day'") }
        }
    }
}
