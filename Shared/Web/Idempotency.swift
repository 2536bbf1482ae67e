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
        switch try once(request, caller: caller, replay: replay, finishing: nil, { c -> Result<Response, Never> in .success(try create(c)) }) {
        case .replayed(let response): return response
        case .made(let result, _): return result.get()
        }
    }

    /// The same for a change whose answer is made after its transaction (a card payment is committed, then the
    /// provider is asked, and the answer says what it did): `finish` makes the answer from the committed one, for a
    /// first request only, and what it answers is what is kept, so a retry gets what the first request's client got.
    /// Until then the key is kept unfinished (its status negated) and a retry waits for the answer; one that has not
    /// come `within` seconds after the change (its request died on the way) is the committed one. When `finish`
    /// throws, the committed answer is kept and the error rethrown.
    public func run(_ request: Request, caller: String, replay: Replay = .verbatim, finishingWithin within: TimeInterval,
                    _ create: (Connection) throws -> Response, then finish: (Response) throws -> Response) throws -> Response {
        let committed: Response, key: String?
        switch try once(request, caller: caller, replay: replay, finishing: within, { c -> Result<Response, Never> in .success(try create(c)) }) {
        case .replayed(let response): return response
        case .made(let result, let kept): (committed, key) = (try result.get(), kept)
        }
        guard let key else { return try finish(committed) }
        let answer: Response
        do { answer = try finish(committed) } catch { try? keep(committed, caller: caller, key: key, replay: replay); throw error }
        try keep(answer, caller: caller, key: key, replay: replay)
        return answer
    }

    /// The same for a change that may be refused after part of it must stay (a wrong PIN is counted): a refusal
    /// commits, keeps no answer (a retry is tried afresh) and is returned for the caller to throw.
    public func attempt<Refusal: Error>(_ request: Request, caller: String, replay: Replay = .verbatim,
                                        _ change: (Connection) throws -> Result<Response, Refusal>)
        throws -> Result<Response, Refusal> {
        switch try once(request, caller: caller, replay: replay, finishing: nil, change) {
        case .replayed(let response): return .success(response)
        case .made(let result, _): return result
        }
    }

    /// What `once` did: answered from an earlier request's kept answer, or made the change (`key`: the key its answer
    /// was kept under).
    private enum Once<Refusal: Error> { case replayed(Response), made(Result<Response, Refusal>, key: String?) }

    /// `change` in a transaction with its answer kept under the request's key (unfinished, when `finishing` bounds
    /// how long its answer may take to finish), or the kept answer of an earlier request with the key, once finished.
    private func once<Refusal: Error>(_ request: Request, caller: String, replay: Replay, finishing: TimeInterval?,
                                      _ change: (Connection) throws -> Result<Response, Refusal>) throws -> Once<Refusal> {
        #if DEBUG
        precondition(request.idempotentRoute, "\(request.method) \(request.route) honours Idempotency-Key: name it in its routes' idempotent(...)")
        IdempotencyWitness.saw()
        #endif
        guard let key = request.header("idempotency-key") else { return .made(try pool.withTransaction(change), key: nil) }
        guard Self.keyLength.contains(key.utf8.count), key.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw HTTPError.validation("Idempotency-Key must be 1 to 255 visible ASCII characters.", field: "Idempotency-Key")
        }
        let hash = Self.hash(request, byValue: true)
        var pause = 0.02
        while true {
            let outcome = try pool.withTransaction { connection -> Once<Refusal>? in
                // Taken before the key is read: the lock goes in the same round trip, ahead of the read.
                try connection.enqueue("SELECT pg_advisory_xact_lock(hashtext(\("idem:\(caller):\(key)")))")
                if let row = try connection.first("""
                    SELECT request_hash, status, body, created_at > now() - make_interval(secs => \(finishing ?? 0)) AS finishing
                    FROM \(unescaped: schema).idempotency_keys WHERE caller = \(caller) AND key = \(key)
                    """) {
                    // A key kept before bodies were compared by value holds the hash of the bytes.
                    let kept = try row["request_hash", as: String.self]
                    guard kept == hash || kept == Self.hash(request, byValue: false) else {
                        throw HTTPError.conflict("This Idempotency-Key was used with a different request.", field: "Idempotency-Key")
                    }
                    var status: Int = try row["status"]
                    if status < 0 {  // unfinished: its request is still finishing its answer (wait for it), or died doing so
                        if try row["finishing", as: Bool.self] { return nil }
                        status = -status
                    }
                    var response = try replay.answer(connection, try row["body", as: ByteArray.self].bytes, status)
                    response.headers.append(("Idempotent-Replayed", "true"))
                    return .replayed(response)
                }
                let result = try change(connection)
                guard case .success(let response) = result, (200..<300).contains(response.status) else { return .made(result, key: nil) }
                try connection.enqueue("""
                    INSERT INTO \(unescaped: schema).idempotency_keys (caller, key, request_hash, status, body)
                    VALUES (\(caller), \(key), \(hash), \(finishing == nil ? response.status : -response.status), \(ByteArray(replay.keep(response))))
                    """)
                return .made(result, key: key)
            }
            if let outcome { return outcome }
            Thread.sleep(forTimeInterval: pause)
            pause = min(pause * 2, 0.5)
        }
    }

    /// Keeps `answer` as the finished answer to the first request with `key`.
    private func keep(_ answer: Response, caller: String, key: String, replay: Replay) throws {
        try pool.withConnection { c in
            try c.execute("""
                UPDATE \(unescaped: schema).idempotency_keys SET status = \(answer.status), body = \(ByteArray(replay.keep(answer)))
                WHERE caller = \(caller) AND key = \(key)
                """)
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
