import Foundation

/// One versioned schema change. Versions are applied in ascending order, each once, each in its own transaction.
public struct Migration: Sendable {
    /// Position in the order; unique within a service.
    public let version: Int
    /// A short name for logs.
    public let name: String
    /// The SQL, possibly several statements.
    public let sql: String

    public init(_ version: Int, _ name: String, _ sql: String) {
        self.version = version; self.name = name; self.sql = sql
    }
}

/// Applies migrations into one schema under a PostgreSQL advisory lock, so instances starting together do not race.
public enum Migrator {
    /// The migrations in the order they apply; throws on duplicate or non-positive versions.
    public static func ordered(_ migrations: [Migration]) throws -> [Migration] {
        var seen = Set<Int>()
        for m in migrations {
            guard m.version > 0 else { throw MigrationError.invalidVersion(m.version) }
            guard seen.insert(m.version).inserted else { throw MigrationError.duplicateVersion(m.version) }
        }
        return migrations.sorted { $0.version < $1.version }
    }

    /// Creates `schema` if needed and applies the missing migrations; returns the versions applied now.
    @discardableResult
    public static func migrate(pool: Pool, schema: String, migrations: [Migration]) throws -> [Int] {
        let plan = try ordered(migrations)
        guard schema.allSatisfy({ $0.isLetter || $0 == "_" }) else { throw MigrationError.invalidSchema }
        return try pool.withConnection { connection in
            // Migrations take as long as they take and wait for the locks they need: not the requests' timeouts
            // (what waits behind a migration's lock still has its own).
            try connection.execute("SET statement_timeout = 0")
            try connection.execute("SET lock_timeout = 0")
            defer { _ = try? connection.execute("RESET statement_timeout"); _ = try? connection.execute("RESET lock_timeout") }
            // A session lock keyed by the schema name: the second instance waits here for the first.
            try connection.execute("SELECT pg_advisory_lock(hashtext(\("migrate:" + schema)))")
            defer { _ = try? connection.execute("SELECT pg_advisory_unlock(hashtext(\("migrate:" + schema)))") }
            try connection.execute("CREATE SCHEMA IF NOT EXISTS \(unescaped: schema)")
            try connection.execute("""
                CREATE TABLE IF NOT EXISTS \(unescaped: schema).schema_migrations (
                    version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                """)
            let done = Set(try connection.rows("SELECT version FROM \(unescaped: schema).schema_migrations")
                .map { try $0["version", as: Int.self] })
            var applied: [Int] = []
            for m in plan where !done.contains(m.version) {
                try connection.execute("BEGIN")
                do {
                    try connection.execute("SET LOCAL search_path TO \(unescaped: schema)")
                    // Simple-protocol multi-statement SQL goes through the same call with no parameters.
                    try connection.executeScript(m.sql)
                    try connection.execute("INSERT INTO \(unescaped: schema).schema_migrations (version, name) VALUES (\(m.version), \(m.name))")
                    try connection.execute("COMMIT")
                } catch {
                    _ = try? connection.execute("ROLLBACK")
                    throw error
                }
                applied.append(m.version)
            }
            return applied
        }
    }
}

/// Problems with the list of migrations itself.
public enum MigrationError: Error, Equatable {
    case duplicateVersion(Int)
    case invalidVersion(Int)
    case invalidSchema
}
