import Crypto
import Foundation
import HTTP
import Postgres

/// `Idempotency-Key` for creating POSTs: the first response is stored in the same transaction as the change;
/// a retry with the same key and caller gets it back and creates nothing. Same-key requests are serialised with
/// a transaction-level advisory lock, so two concurrent retries cannot both create.
public struct Idempotency: Sendable {
    let pool: Pool
    let schema: String

    /// Runs `create` in a transaction, or returns the stored response of an earlier request with the same key.
    /// `caller` scopes keys (a user id, or `anonymous`).
    public func run(_ request: Request, caller: String, _ create: (Connection) throws -> Response) throws -> Response {
        guard let key = request.header("idempotency-key") else { return try pool.withTransaction(create) }
        guard (1...255).contains(key.utf8.count), key.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw HTTPError.validation("Idempotency-Key must be 1 to 255 visible ASCII characters.", field: "Idempotency-Key")
        }
        let hash = hexString(sha256(Array("\(request.method) \(request.path)\n".utf8) + request.body))
        return try pool.withTransaction { connection in
            try connection.execute("SELECT pg_advisory_xact_lock(hashtext($1))", ["idem:\(caller):\(key)"])
            if let row = try connection.first(
                "SELECT request_hash, status, body FROM \(schema).idempotency_keys WHERE caller = $1 AND key = $2",
                [caller, key]) {
                guard try row["request_hash", as: String.self] == hash else {
                    throw HTTPError.conflict("This Idempotency-Key was used with a different request.", field: "Idempotency-Key")
                }
                return Response(status: try row["status"], headers: [("Content-Type", "application/json"), ("Idempotent-Replayed", "true")],
                                body: try row["body", as: ByteArray.self].bytes)
            }
            let response = try create(connection)
            if (200..<300).contains(response.status) {
                try connection.execute("""
                    INSERT INTO \(schema).idempotency_keys (caller, key, request_hash, status, body) VALUES ($1, $2, $3, $4, $5)
                    """, [caller, key, hash, response.status, ByteArray(response.body)])
            }
            return response
        }
    }
}
