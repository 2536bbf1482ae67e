import CShims
import Foundation
import Synchronization
import WireClient

// chat-fanout opens many Server-Sent Events streams over chat instances, posts messages at a steady rate, and
// reports how each message reached each stream: latency from the post's acceptance (its 201) to its arrival,
// deliveries per second, and per stream what was lost, duplicated or out of order.

// MARK: - Options

struct Options {
    var auth = "http://127.0.0.1:8081"
    var chat = ["http://127.0.0.1:8083"]
    var streams = 1000
    var rooms = 10
    var rate = 200.0
    var seconds = 60.0
    var posters = 8
    var json: String?

    static let help = """
        chat-fanout: fan-out test of running chat instances.

        Usage: chat-fanout [options]
          --auth URL          auth service, for sign-ups (default http://127.0.0.1:8081)
          --chat URL[,URL]    chat instances; streams and posts are spread over them (default http://127.0.0.1:8083)
          --streams N         SSE streams in all (default 1000)
          --rooms N           rooms they watch, ten members each (default 10)
          --rate R            messages posted per second, over all rooms (default 200)
          --seconds S         how long to post (default 60)
          --posters N         posting threads (default 8)
          --json PATH         also write the results as JSON
          --help              this text
        Exits 1 when any stream lost, duplicated or reordered a message.
        """

    static func parse(_ args: [String]) -> Options {
        var o = Options()
        var i = 0
        func value() -> String {
            i += 1
            guard i < args.count else { fail("\(args[i - 1]) needs a value") }
            return args[i]
        }
        func number(_ text: String, _ name: String) -> Double {
            guard let v = Double(text), v > 0 else { fail("\(name) must be a positive number") }
            return v
        }
        while i < args.count {
            switch args[i] {
            case "--auth": o.auth = value()
            case "--chat": o.chat = value().split(separator: ",").map(String.init)
            case "--streams": o.streams = Int(number(value(), "--streams"))
            case "--rooms": o.rooms = Int(number(value(), "--rooms"))
            case "--rate": o.rate = number(value(), "--rate")
            case "--seconds": o.seconds = number(value(), "--seconds")
            case "--posters": o.posters = Int(number(value(), "--posters"))
            case "--json": o.json = value()
            case "--help", "-h": print(help); exit(0)
            default: fail("unknown option \(args[i]) (--help lists them)")
            }
            i += 1
        }
        return o
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("chat-fanout: \(message)\n".utf8))
    exit(2)
}

func progress(_ message: String) { FileHandle.standardError.write(Data("==> \(message)\n".utf8)) }

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

// MARK: - API calls

struct API {
    let url: String
    let client: HTTPClient

    init(_ url: String) {
        self.url = url
        guard let c = HTTPClient(url: url, timeout: 30) else { fail("bad URL \(url)") }
        client = c
    }

    func call(_ method: String, _ path: String, _ body: [String: Any]? = nil, token: String? = nil) -> (Int, [String: Any]) {
        var headers = ["Content-Type": "application/json"]
        if let token { headers["Authorization"] = "Bearer \(token)" }
        let bytes = body.map { Array((try? JSONSerialization.data(withJSONObject: $0)) ?? Data()) } ?? []
        guard let r = try? client.request(method, path, headers: headers, body: bytes) else { return (0, [:]) }
        return (r.status, (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any] ?? [:])
    }
}

// MARK: - Streams

/// One SSE connection, read without blocking by a reader thread that owns it.
final class Stream {
    let index: Int
    let room: Int
    let fd: Int32
    var raw: [UInt8] = []
    var body: [UInt8] = []
    var headDone = false
    var status = 0
    var ended = false
    /// Message number → arrival time.
    var received: [Int: UInt64] = [:]
    var duplicates = 0
    var outOfOrder = 0
    var lastSeq = 0

    init(index: Int, room: Int, host: String, port: Int, path: String, token: String) {
        self.index = index; self.room = room
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr(host == "localhost" ? "127.0.0.1" : host)
        addr.sin_port = UInt16(port).bigEndian
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if ok != 0 { fail("stream \(index) cannot connect to \(host):\(port)") }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\nAuthorization: Bearer \(token)\r\nAccept: text/event-stream\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, request.count, 0) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    /// Reads what arrived into `buffer` (the reader's, reused); parses the head, the chunked framing and the events.
    func read(at time: UInt64, buffer: inout [UInt8]) {
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, 65536, 0) }
            if n == 0 { ended = true; break }
            if n < 0 { break }
            raw += buffer[0..<n]
        }
        if !headDone, let end = Self.find([13, 10, 13, 10], raw) {
            status = Int(String(decoding: raw[0..<end], as: UTF8.self).split(separator: " ").dropFirst().first ?? "") ?? 0
            raw.removeFirst(end + 4)
            headDone = true
        }
        guard headDone else { return }
        var start = 0
        while let lineEnd = Self.find([13, 10], raw, from: start),
              let size = Int(String(decoding: raw[start..<lineEnd], as: UTF8.self), radix: 16),
              raw.count >= lineEnd + 2 + size + 2 {
            body += raw[(lineEnd + 2)..<(lineEnd + 2 + size)]
            start = lineEnd + 2 + size + 2
            if size == 0 { ended = true }
        }
        if start > 0 { raw.removeFirst(start) }
        var consumed = 0
        while let end = Self.find([10, 10], body, from: consumed) {
            event(body[consumed..<end], at: time)
            consumed = end + 2
        }
        if consumed > 0 { body.removeFirst(consumed) }
    }

    private static let marker = Array(#""text":"fo:"#.utf8)
    private static let seqMarker = Array(#""seq":"#.utf8)
    private static let created = Array("event: message_created".utf8)

    private func event(_ block: ArraySlice<UInt8>, at time: UInt64) {
        let bytes = Array(block)
        guard Self.find(Self.created, bytes) != nil else { return }
        guard let at = Self.find(Self.marker, bytes) else { return }
        let n = Self.number(bytes, from: at + Self.marker.count)
        if received[n] != nil { duplicates += 1 } else { received[n] = time }
        if let s = Self.find(Self.seqMarker, bytes) {
            let seq = Self.number(bytes, from: s + Self.seqMarker.count)
            if seq < lastSeq { outOfOrder += 1 }
            lastSeq = max(lastSeq, seq)
        }
    }

    private static func number(_ bytes: [UInt8], from: Int) -> Int {
        var v = 0, i = from
        while i < bytes.count, (48...57).contains(bytes[i]) { v = v * 10 + Int(bytes[i] - 48); i += 1 }
        return v
    }

    static func find(_ needle: [UInt8], _ hay: [UInt8], from: Int = 0) -> Int? {
        guard hay.count >= needle.count + from else { return nil }
        var i = from
        let last = hay.count - needle.count
        while i <= last {
            if hay[i] == needle[0] {
                var j = 1
                while j < needle.count && hay[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }
}

/// Reads a set of streams with epoll on a thread of its own until told to stop (poll() would look at all 500 of its
/// sockets on each of some 10,000 wake-ups a second: a few percent of the machine the run measures).
final class Reader: @unchecked Sendable {  // `@unchecked Sendable`: its streams are touched by its thread only, until `join`.
    let streams: [Stream]
    let stop = Atomic<Bool>(false)
    let done = DispatchSemaphore(value: 0)

    init(_ streams: [Stream]) { self.streams = streams }

    func start() {
        Thread { [self] in
            let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
            for (i, stream) in streams.enumerated() {
                var event = epoll_event()
                event.events = EPOLLIN.rawValue
                event.data.u64 = UInt64(i)
                _ = epoll_ctl(epoll, EPOLL_CTL_ADD, stream.fd, &event)
            }
            var events = [epoll_event](repeating: epoll_event(), count: 256)
            var buffer = [UInt8](repeating: 0, count: 65536)
            while !stop.load(ordering: .relaxed) {
                let count = epoll_wait(epoll, &events, Int32(events.count), 100)
                guard count > 0 else { continue }
                let t = now()
                for e in events[0..<Int(count)] { streams[Int(e.data.u64)].read(at: t, buffer: &buffer) }
            }
            close(epoll)
            done.signal()
        }.start()
    }

    func join() { stop.store(true, ordering: .relaxed); done.wait() }
}

// MARK: - The run

/// What the posting threads share.
final class Posting: Sendable {
    struct Posted: Sendable { var room = 0; var accepted: UInt64 = 0; var ok = false }
    let posted: Mutex<[Posted]>
    let next = Atomic<Int>(0)
    let errors = Atomic<Int>(0)
    let done = DispatchGroup()
    init(total: Int) { posted = Mutex([Posted](repeating: Posted(), count: total)) }
}

struct Person: Sendable { let token: String }

/// The whole run; returns the exit status.
func fanout(_ options: Options) -> Int32 {
let membersPerRoom = 10
guard options.streams >= options.rooms, options.chat.count >= 1 else { fail("need at least one stream per room") }

progress("signing up \(options.rooms * membersPerRoom) people and making \(options.rooms) rooms")
let tag = String(UInt32.random(in: 0...UInt32.max), radix: 36)
final class People: Sendable { let all = Mutex<[Int: Person]>([:]) }
let people = People()
DispatchQueue.concurrentPerform(iterations: options.rooms * membersPerRoom) { i in
    let name = "fo\(tag)_\(i)"
    let (status, body) = API(options.auth).call("POST", "/v1/auth/signup", ["username": name, "email": "\(name)@example.com",
                                                                           "password": "fan-out password", "fullName": "Fan \(i)"])
    guard status == 201, let token = body["accessToken"] as? String else { fail("sign-up failed (\(status))") }
    people.all.withLock { $0[i] = Person(token: token) }
}
let everyone = people.all.withLock { $0 }
let chats = options.chat.map(API.init)
var roomIds: [String] = []
for r in 0..<options.rooms {
    let owner = everyone[r * membersPerRoom]!
    let (status, room) = chats[0].call("POST", "/v1/rooms", ["name": "Fan-out \(r)"], token: owner.token)
    guard status == 201, let id = room["id"] as? String, let code = room["inviteCode"] as? String else { fail("room failed (\(status))") }
    for m in 1..<membersPerRoom {
        guard chats[0].call("POST", "/v1/rooms/join", ["inviteCode": code], token: everyone[r * membersPerRoom + m]!.token).0 == 200 else {
            fail("join failed")
        }
    }
    roomIds.append(id)
}
let rooms = roomIds

progress("opening \(options.streams) streams over \(options.chat.count) instance(s)")
let streams = (0..<options.streams).map { s in
    let room = s % options.rooms
    let member = everyone[room * membersPerRoom + (s / options.rooms) % membersPerRoom]!
    let target = URLComponents(string: options.chat[s % options.chat.count])!
    return Stream(index: s, room: room, host: target.host ?? "127.0.0.1", port: target.port ?? 80,
                  path: "/v1/rooms/\(rooms[room])/events", token: member.token)
}
let readers = stride(from: 0, to: streams.count, by: (streams.count + 1) / 2).map {
    Reader(Array(streams[$0..<min($0 + (streams.count + 1) / 2, streams.count)]))
}
readers.forEach { $0.start() }
let openDeadline = Date().addingTimeInterval(30)
while Date() < openDeadline && streams.contains(where: { !$0.headDone }) { Thread.sleep(forTimeInterval: 0.05) }
let opened = streams.filter { $0.headDone && $0.status == 200 }.count
guard opened == streams.count else { fail("only \(opened) of \(streams.count) streams opened") }

let total = Int(options.rate * options.seconds)
progress("posting \(total) messages at \(Int(options.rate))/s for \(Int(options.seconds)) s over \(options.rooms) rooms")
let shared = Posting(total: total)
let start = now()
let (chatURLs, rate, roomCount) = (options.chat, options.rate, options.rooms)
for _ in 0..<options.posters {
    shared.done.enter()
    Thread {
        defer { shared.done.leave() }
        let clients = chatURLs.map(API.init)
        while true {
            let n = shared.next.add(1, ordering: .relaxed).oldValue
            guard n < total else { return }
            let due = start + UInt64(Double(n) / rate * 1e9)
            let wait = Int64(due) - Int64(now())
            if wait > 0 { usleep(UInt32(wait / 1000)) }
            let room = n % roomCount
            let member = everyone[room * membersPerRoom + (n / roomCount) % membersPerRoom]!
            let (status, _) = clients[n % clients.count].call("POST", "/v1/rooms/\(rooms[room])/messages", ["text": "fo:\(n)"],
                                                               token: member.token)
            let t = now()
            if status == 201 { shared.posted.withLock { $0[n] = .init(room: room, accepted: t, ok: true) } } else {
                shared.errors.add(1, ordering: .relaxed)
            }
        }
    }.start()
}
while shared.done.wait(timeout: .now() + 10) == .timedOut {
    progress("\(min(total, shared.next.load(ordering: .relaxed))) posted, \(Int(Double(now() - start) / 1e9)) s")
}
let postSeconds = Double(now() - start) / 1e9
progress("posted in \(String(format: "%.1f", postSeconds)) s; waiting up to 10 s for the last deliveries")
let messages = shared.posted.withLock { $0 }
let expectedPerRoom = (0..<options.rooms).map { r in messages.indices.filter { messages[$0].ok && messages[$0].room == r } }
let drainDeadline = Date().addingTimeInterval(10)
func deliveredCount() -> Int { streams.reduce(0) { $0 + $1.received.count } }
let expectedDeliveries = streams.reduce(0) { $0 + expectedPerRoom[$1.room].count }
var settled = 0
while Date() < drainDeadline {
    Thread.sleep(forTimeInterval: 0.5)
    let d = deliveredCount()
    if d >= expectedDeliveries { break }
    if d == settled && Date().addingTimeInterval(8) > drainDeadline { break }
    settled = d
}
readers.forEach { $0.join() }

// MARK: - Results

var latencies: [Double] = []
latencies.reserveCapacity(expectedDeliveries)
/// The same latencies by the 10 s of the run their message was posted in: whether the run got slower as it went.
var byWindow: [[Double]] = Array(repeating: [], count: max(1, Int((options.seconds / 10).rounded(.up))))
var early = 0
var lost = 0, duplicated = 0, reordered = 0, worstStream = (index: -1, lost: 0)
for stream in streams {
    var missing = 0
    for n in expectedPerRoom[stream.room] {
        guard let at = stream.received[n] else { missing += 1; continue }
        let accepted = messages[n].accepted
        let latency = at < accepted ? 0 : Double(at - accepted) / 1e6
        if at < accepted { early += 1 }
        latencies.append(latency)
        byWindow[min(byWindow.count - 1, Int(Double(accepted - start) / 1e10))].append(latency)
    }
    lost += missing
    duplicated += stream.duplicates
    reordered += stream.outOfOrder
    if missing > worstStream.lost { worstStream = (stream.index, missing) }
}
func percentile(_ p: Double, of sorted: [Double]) -> Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
latencies.sort()
func pct(_ p: Double) -> Double { percentile(p, of: latencies) }
let windows = byWindow.map { $0.sorted() }.map { ["p50": percentile(0.5, of: $0), "p99": percentile(0.99, of: $0)] }
func windowLine(_ p: String) -> String { windows.map { String(format: "%.0f", $0[p]!) }.joined(separator: ", ") }
let delivered = latencies.count
let result: [String: Any] = [
    "date": ISO8601DateFormatter().string(from: Date()), "instances": options.chat.count, "streams": options.streams,
    "rooms": options.rooms, "ratePerSecond": options.rate, "seconds": options.seconds, "messagesPosted": messages.filter(\.ok).count,
    "postErrors": shared.errors.load(ordering: .relaxed), "deliveriesExpected": expectedDeliveries, "deliveries": delivered,
    "deliveriesPerSecond": Double(delivered) / postSeconds, "latencyMs": ["p50": pct(0.5), "p99": pct(0.99), "max": latencies.last ?? 0],
    "latencyMsBy10Seconds": windows, "arrivedBeforeTheirPostReturned": early, "lost": lost, "duplicated": duplicated, "outOfOrder": reordered,
]
print("""

    chat fan-out, \(result["date"]!): \(options.streams) streams over \(options.chat.count) instance(s), \(options.rooms) rooms, \
    \(Int(options.rate)) messages/s for \(Int(options.seconds)) s
      posted             \(messages.filter(\.ok).count) (\(shared.errors.load(ordering: .relaxed)) errors)
      delivered          \(delivered) of \(expectedDeliveries) expected, \(Int(Double(delivered) / postSeconds))/s
      latency ms         p50 \(String(format: "%.1f", pct(0.5))), p99 \(String(format: "%.1f", pct(0.99))), max \(String(format: "%.1f", latencies.last ?? 0)) \
    (post accepted → received; \(early) arrived before their post's response)
      by 10 s posted     p50 \(windowLine("p50")); p99 \(windowLine("p99"))
      per stream         lost \(lost), duplicated \(duplicated), out of order \(reordered)\(lost > 0 ? " (most lost on stream \(worstStream.index): \(worstStream.lost))" : "")
    """)
if let path = options.json, let data = try? JSONSerialization.data(withJSONObject: result, options: [.prettyPrinted, .sortedKeys]) {
    FileManager.default.createFile(atPath: path, contents: data)
}
return lost + duplicated + reordered == 0 && shared.errors.load(ordering: .relaxed) == 0 ? 0 : 1
}
