import Crypto
import Foundation
import HTTP
import Postgres

/// `Idempotency-Key` for creating POSTs and other changes a client may send again (a parcel's steps): the first
/// response is stored in the same transaction as the change; a retry with the same key and caller gets it back and
/// changes nothing. Same-key requests are serialised with a transaction-level advisory lock, so two concurrent
/// retries cannot both create.
public struct Idempotency: Sendable {
    let pool: Pool
    let schema: String
    public init(pool: Pool, schema: String) { self.pool = pool; self.schema = schema }

    /// What a key may be, as `attempt` checks it and the OpenAPI document describes it: 1 to 255 visible ASCII
    /// characters.
    static let keyLength = 1...255
    static let keyPattern = "^[!-~]+$"
    /// How long a key is kept (the outbox's upkeep removes older ones): a retry within it is answered as the first time.
    public static let keptHours = 24

    /// What is kept of a first response, and how a retry is answered from it: by default the response itself; a
    /// response carrying secrets (tokens) keeps a reference instead, and the retry makes a fresh answer from it.
    public struct Replay: Sendable {
        let keep: @Sendable (Response) -> [UInt8]
        let answer: @Sendable (Connection, _ kept: [UInt8], _ status: Int) throws -> Response
        public init(keep: @escaping @Sendable (Response) -> [UInt8],
                    answer: @escaping @Sendable (Connection, [UInt8], Int) throws -> Response) {
            self.keep = keep; self.answer = answer
        }
        public static let verbatim = Replay(keep: { $0.body }) { _, body, status in
            Response(status: status, headers: [("Content-Type", "application/json")], body: body)
        }
    }

    /// Runs `create` in a transaction, or answers a retry of an earlier request with the same key (through `replay`).
    /// `caller` scopes keys (a user id, or `anonymous`).
    public func run(_ request: Request, caller: String, replay: Replay = .verbatim,
                    _ create: (Connection) throws -> Response) throws -> Response {
        let result = try attempt(request, caller: caller, replay: replay) { c -> Result<Response, Never> in .success(try create(c)) }
        return result.get()
    }

    /// The same for a change that may be refused after part of it must stay (a wrong PIN is counted): a refusal
    /// commits, keeps no answer (a retry is tried afresh) and is returned for the caller to throw.
    public func attempt<Refusal: Error>(_ request: Request, caller: String, replay: Replay = .verbatim,
                                        _ change: (Connection) throws -> Result<Response, Refusal>)
        throws -> Result<Response, Refusal> {
        #if DEBUG
        precondition(request.idempotentRoute, "\(request.method) \(request.route) honours Idempotency-Key: name it in its routes' idempotent(...)")
        IdempotencyWitness.saw()
        #endif
        guard let key = request.header("idempotency-key") else { return try pool.withTransaction(change) }
        guard Self.keyLength.contains(key.utf8.count), key.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw HTTPError.validation("Idempotency-Key must be 1 to 255 visible ASCII characters.", field: "Idempotency-Key")
        }
        let hash = Self.hash(request, byValue: true)
        return try pool.withTransaction { connection in
            // Taken before the key is read: the lock goes in the same round trip, ahead of the read.
            try connection.enqueue("SELECT pg_advisory_xact_lock(hashtext($1))", ["idem:\(caller):\(key)"])
            if let row = try connection.first(
                "SELECT request_hash, status, body FROM \(schema).idempotency_keys WHERE caller = $1 AND key = $2",
                [caller, key]) {
                // A key kept before bodies were compared by value holds the hash of the bytes.
                let kept = try row["request_hash", as: String.self]
                guard kept == hash || kept == Self.hash(request, byValue: false) else {
                    throw HTTPError.conflict("This Idempotency-Key was used with a different request.", field: "Idempotency-Key")
                }
                var response = try replay.answer(connection, try row["body", as: ByteArray.self].bytes, try row["status"])
                response.headers.append(("Idempotent-Replayed", "true"))
                return .success(response)
            }
            let result = try change(connection)
            if case .success(let response) = result, (200..<300).contains(response.status) {
                try connection.enqueue("""
                    INSERT INTO \(schema).idempotency_keys (caller, key, request_hash, status, body) VALUES ($1, $2, $3, $4, $5)
                    """, [caller, key, hash, response.status, ByteArray(replay.keep(response))])
            }
            return result
        }
    }

    /// What tells one request from another: its method, path and body, a JSON body by its value (a client that writes
    /// its names in another order on a retry sends the same request), any other by its bytes. Only a body within the
    /// JSON limit is parsed: an upload's 10 MiB would make a tree ten times its size.
    static func hash(_ request: Request, byValue: Bool) -> String {
        var bytes = Array("\(request.method) \(request.path)\n".utf8)
        if byValue, request.body.count <= defaultBodyLimit, let value = try? JSONParser.parse(request.body) {
            value.canonical(into: &bytes)
        } else {
            bytes += request.body
        }
        return hexString(sha256(bytes))
    }
}

#if DEBUG
/// Debug builds (the tests'): whether the request on this thread went through `Idempotency`, for the kit's check that
/// a route documenting `Idempotency-Key` honours it (`Router.add`); handlers run on the thread that calls them.
enum IdempotencyWitness {
    private static let name = "Web.IdempotencyWitness"
    static func reset() { Thread.current.threadDictionary.removeObject(forKey: name) }
    static func saw() { Thread.current.threadDictionary[name] = true }
    static var seen: Bool { Thread.current.threadDictionary[name] != nil }
}
#endif
