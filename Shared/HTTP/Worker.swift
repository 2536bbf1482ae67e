import CShims
import Foundation
import Synchronization

/// One of the server's threads: an epoll loop over the listening socket and the connections it accepted. It reads
/// each request, hands it to the handler threads (or answers it itself when its route runs inline, as `/healthz`
/// does, so that a probe never waits behind a handler), and writes the answer; a connection's state is touched by
/// this thread alone. Other threads reach it through `post` (an answer, a stream with something to send, drain, stop).
///
/// `@unchecked Sendable`: everything but `inbox` is used only on the worker's own thread.
final class Worker: @unchecked Sendable {
    enum Message {
        case wake(Int32, UInt64)
        /// A handler's answer for the request in flight on that connection.
        case answered(Int32, UInt64, Response)
        /// Stop taking connections (after those already waiting), and end each connection after its next answer, which
        /// says `Connection: close`.
        case drain
        case stop
    }

    let done = DispatchSemaphore(value: 0)
    let drained = DispatchSemaphore(value: 0)
    private unowned let server: HTTPServer
    private let index: Int
    private let epoll: Int32
    private let wakeFD: Int32
    private let listener: Int32
    private var listening = true
    /// Since when the server has been stopping (nil while it serves).
    private var drainingSince: Double?
    private var draining: Bool { drainingSince != nil }
    private let inbox = Mutex<[Message]>([])
    private var open: [Int32: Connection] = [:]
    private var serial: UInt64 = 0
    private var scratch = [UInt8](repeating: 0, count: 64 << 10)
    private var date = HTTPDate()

    init(server: HTTPServer, index: Int, listener: Int32) {
        self.server = server
        self.index = index
        self.listener = listener
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        watch(wakeFD, EPOLLIN.rawValue, add: true)
        // Exclusive: a new connection wakes one waiting worker, not all of them.
        watch(listener, EPOLLIN.rawValue | EPOLLEXCLUSIVE.rawValue, add: true)
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "http-\(index)"
        thread.start()
    }

    /// Hands this worker a message from any thread. Only a message into an empty inbox wakes the worker: it takes
    /// the whole inbox after each wake, so the rest go with the first (one write, not one for each of a room's
    /// streams).
    func post(_ message: Message) {
        let first = inbox.withLock { m in
            m.append(message)
            return m.count == 1
        }
        guard first else { return }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 128)
        var lastSweep = monotonicSeconds()
        loop: while true {
            // Stopping, the sweep that closes idle connections runs five times a second.
            let count = epoll_wait(epoll, &events, Int32(events.count), draining ? 200 : 1000)
            for i in 0..<Int(max(0, count)) {
                let fd = Int32(truncatingIfNeeded: events[i].data.u64)
                let flags = events[i].events
                if fd == wakeFD {
                    var value: UInt64 = 0
                    _ = read(wakeFD, &value, 8)
                    for message in inbox.withLock({ m -> [Message] in defer { m = [] }; return m }) {
                        switch message {
                        case .wake(let fd, let serial):
                            if let c = open[fd], c.serial == serial { advance(c) }
                        case .answered(let fd, let serial, let response):
                            if let c = open[fd], c.serial == serial, case .handling(let minor, let isHead) = c.phase {
                                complete(c, response, minor: minor, isHead: isHead)
                                advance(c)
                            } else {
                                response.stream?.discard()
                            }
                        case .drain:
                            drain()
                        case .stop: break loop
                        }
                    }
                    continue
                }
                if fd == listener {
                    acceptOne()
                    continue
                }
                guard let c = open[fd] else { continue }
                if flags & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 && flags & EPOLLIN.rawValue == 0 {
                    finish(c)
                    continue
                }
                if flags & EPOLLIN.rawValue != 0 { receive(c) }
                if !c.closed { advance(c) }
            }
            let now = monotonicSeconds()
            if now - lastSweep >= (draining ? 0.2 : 1) {
                lastSweep = now
                expire(now: now)
            }
        }
        for c in Array(open.values) { finish(c) }
        done.signal()
    }

    // Closed only here: a stream may still `post` to a stopped worker, and must not write into a reused descriptor.
    deinit {
        close(epoll)
        close(wakeFD)
    }

    // MARK: Connections

    /// Takes one new connection (the listener stays readable while more wait, so the next turn of a free worker's
    /// loop takes the next); false when none was waiting.
    @discardableResult
    private func acceptOne() -> Bool {
        guard listening, let (fd, address) = server.accept() else { return false }
        serial &+= 1
        let c = Connection(fd: fd, address: address, serial: serial, now: monotonicSeconds())
        open[fd] = c
        watch(fd, EPOLLIN.rawValue, add: true)
        c.interest = EPOLLIN.rawValue
        return true
    }

    /// The server is stopping: takes the connections already waiting (each will be answered) and stops watching the
    /// listener. Every connection ends after its next answer, which says `Connection: close`; one idle between
    /// requests is not closed at once, since its client may have sent the next one already (an answer said it would
    /// be kept): it has a second to begin one (`expire`).
    private func drain() {
        drainingSince = monotonicSeconds()
        while acceptOne() {}
        listening = false
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, listener, nil)
        drained.signal()
    }

    private func watch(_ fd: Int32, _ events: UInt32, add: Bool) {
        var event = epoll_event()
        event.events = events
        event.data.u64 = UInt64(UInt32(bitPattern: fd))
        _ = epoll_ctl(epoll, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &event)
    }

    /// Reads what has arrived; at the end of the input, marks the peer as gone.
    private func receive(_ c: Connection) {
        // A client that sends requests faster than they are answered is not read further until they are.
        if c.input.count > 1 << 20 { return setInterest(c, c.interest & ~EPOLLIN.rawValue) }
        for _ in 0..<8 {
            let n = scratch.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                c.lastActivity = monotonicSeconds()
                switch c.phase {
                case .draining(let until, let budget):
                    if budget <= n { return finish(c) }
                    c.phase = .draining(until: until, budget: budget - n)
                case .stream:
                    break  // a stream's client has nothing more to say
                default:
                    c.input.append(contentsOf: scratch[0..<n])
                }
                if n < scratch.count { return }
            } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                c.peerClosed = true
                // Nothing more will be read: stop hearing about it, answer what is complete, then close.
                setInterest(c, c.interest & ~EPOLLIN.rawValue)
                return
            } else if errno == EAGAIN {
                return
            }
        }
    }

    /// Moves a connection on as far as its input and the socket allow: writes what is queued, reads the next head or
    /// body, answers, takes a stream's events.
    private func advance(_ c: Connection) {
        while !c.closed {
            if c.sent < c.output.count {
                guard flush(c) else { return }
                continue
            }
            if c.responseDone {
                c.responseDone = false
                responseWritten(c)
                continue
            }
            switch c.phase {
            case .head:
                if c.input.isEmpty {
                    if c.peerClosed { finish(c) }
                    return
                }
                c.lineSeen = true
                let result = c.input.withUnsafeBytes { Parser.head($0, scan: &c.scan) }
                switch result {
                case .incomplete:
                    if c.peerClosed { finish(c) }
                    return
                case .refused(let error, let method, let path):
                    begin(c)
                    c.input = []
                    answer(c, Request(method: method, path: path, remoteAddress: c.address), minor: 1, match: .refused(error),
                           keepAlive: false, linger: true)
                case .complete(let head, let consumed):
                    c.input.removeFirst(consumed)
                    c.scan = Parser.Scan()
                    begin(c)
                    start(c, head)
                }
            case .body(let head, let match, let length):
                let n = min(length - c.body.count, c.input.count)
                c.body.append(contentsOf: c.input[0..<n])
                c.input.removeFirst(n)
                guard c.body.count == length else {
                    if c.peerClosed { finish(c) }
                    return
                }
                answer(c, head, match)
            case .chunked(let head, let match, var chunked):
                let step = c.input.withUnsafeBytes { chunked.read($0, into: &c.body, limit: match.bodyLimit) }
                if let refusal = reserve(c, c.body.count) { return refuseForMemory(c, head, refusal) }
                switch step {
                case .more(let consumed):
                    c.input.removeFirst(consumed)
                    c.phase = .chunked(head, match, chunked)
                    if c.peerClosed { finish(c) }
                    return
                case .done(let consumed):
                    c.input.removeFirst(consumed)
                    answer(c, head, match)
                case .refused(let error):
                    refuse(c, head, error)
                case .tooLarge:
                    // Refused at the limit while reading: the rest of the body is never read.
                    refuse(c, head, .payloadTooLarge(limit: match.bodyLimit))
                }
            case .stream(let stream, let chunked):
                let (bytes, ended) = stream.take()
                if !bytes.isEmpty {
                    if chunked { c.output += Array(String(bytes.count, radix: 16).utf8) + crlf + bytes + crlf } else { c.output += bytes }
                }
                if ended {
                    if chunked { c.output += Array("0\r\n\r\n".utf8) }
                    c.phase = .closing
                    stream.release()
                } else if bytes.isEmpty {
                    if c.peerClosed { finish(c) }
                    return
                }
            case .handling:
                return
            case .closing:
                finish(c)
            case .draining:
                if c.peerClosed { finish(c) }
                return
            }
        }
    }

    /// A head has arrived: route it, refuse what must not be read further (a body over the route's limit, a body for
    /// a route whose credentials the head already shows to be missing or wrong, a body the server, or its client's
    /// share of its memory, has no room for), else read its body or answer.
    private func start(_ c: Connection, _ head: Parser.Head) {
        c.waitingSince = nil
        var match = server.route(head.method, head.path)
        if head.minorVersion == 1 && head.headers["host"] == nil {
            match = .refused(HTTPError(400, "bad_request", "An HTTP/1.1 request needs a Host header."))
        } else if case .length(let length) = head.body, length > match.bodyLimit {
            match = .refused(.payloadTooLarge(limit: match.bodyLimit))
        } else if head.body != .none, case .found(let route, _) = match, let check = route.checkHead,
                  let error = check(request(c, head)) {
            match = .refused(error)
        }
        if case .refused(let error) = match { return refuse(c, head, error) }
        c.body = []
        if head.body != .none {
            // Through a trusted proxy (the gateway) every client shares its address: the one it names counts instead.
            let limits = server.connections.limits
            c.bodyClient = limits.exempt.client(peer: c.address, forwardedFor: head.headers["x-forwarded-for"])
        }
        switch head.body {
        case .none:
            answer(c, head, match)
            return
        case .length(let length):
            // Admitted only if the server's body memory, and its client's share, have room for all of it; it grows as
            // it arrives (a declared length reserves no memory of the process up front).
            if let refusal = reserve(c, length) { return refuseForMemory(c, head, refusal) }
            c.body.reserveCapacity(min(length, 64 << 10))
            c.phase = .body(head, match, length)
        case .chunked:
            c.phase = .chunked(head, match, Parser.Chunked())
        }
        c.bodyDeadline = monotonicSeconds() + Double(server.connections.limits.bodyTimeoutSeconds)
        if head.expectsContinue && c.input.isEmpty { c.output += Array("HTTP/1.1 100 Continue\r\n\r\n".utf8) }
    }

    /// Counts `bytes` of body for this connection against the server's body memory and its client's share; the
    /// refusal when there is no room.
    private func reserve(_ c: Connection, _ bytes: Int) -> ConnectionRefusal? {
        guard bytes > c.reserved else { return nil }
        if let refusal = server.bodyMemory.reserve(from: c.reserved, to: bytes, for: c.bodyClient) { return refusal }
        c.reserved = bytes
        return nil
    }

    private func unreserve(_ c: Connection) {
        guard c.reserved > 0 else { return }
        server.bodyMemory.release(c.reserved, for: c.bodyClient)
        c.reserved = 0
    }

    /// A body there is no room for, counted and logged as a refusal: 503 when the server's body memory is full, 429
    /// when its client already holds its share (the others are still served).
    private func refuseForMemory(_ c: Connection, _ head: Parser.Head, _ refusal: ConnectionRefusal) {
        server.connections.report(refusal, c.bodyClient)
        refuse(c, head, refusal == .clientBodyMemory ? Self.clientBodyMemoryFull : .unavailable(retryAfter: 1))
    }

    private static let clientBodyMemoryFull = HTTPError(
        429, "rate_limited", "This client is sending as many bodies at once as it may; send this one when one of them is done.",
        headers: [("Retry-After", "1")])

    /// Answers `error` and closes, reading no more of the request (what the client still sends is discarded for a
    /// while, so that it reads the answer instead of a reset).
    private func refuse(_ c: Connection, _ head: Parser.Head, _ error: HTTPError) {
        c.body = []
        c.input = []
        unreserve(c)
        answer(c, request(c, head), minor: head.minorVersion, match: .refused(error), keepAlive: false, linger: head.body != .none)
    }

    private func answer(_ c: Connection, _ head: Parser.Head, _ match: RouteMatch) {
        let request = request(c, head, body: c.body)
        c.body = []
        answer(c, request, minor: head.minorVersion, match: match, keepAlive: head.keepAlive, linger: false)
    }

    private func request(_ c: Connection, _ head: Parser.Head, body: [UInt8] = []) -> Request {
        var request = Request(method: head.method, path: head.path, query: head.query, body: body, remoteAddress: c.address)
        request.headers = head.headers
        return request
    }

    /// Answers a request: inline when its route says so (or nothing matched), else on a handler thread, whose answer
    /// comes back through `post`. With every handler busy and the queue full, a 503 at once.
    private func answer(_ c: Connection, _ request: Request, minor: Int, match: RouteMatch, keepAlive: Bool, linger: Bool) {
        let isHead = request.method == "HEAD"
        c.keepAlive = keepAlive
        c.linger = linger
        guard match.runsOnHandlerThread else {
            return complete(c, server.respond(request, match), minor: minor, isHead: isHead)
        }
        c.phase = .handling(minor: minor, isHead: isHead)
        let fd = c.fd, serial = c.serial, server = server
        let queued = server.handlers.submit { [self] in
            post(.answered(fd, serial, server.respond(request, match)))
        }
        if !queued {
            server.connections.report(.handlersBusy, c.address)
            complete(c, server.respond(request, .refused(.unavailable(retryAfter: 1))), minor: minor, isHead: isHead)
        }
    }

    /// Queues a response (for a stream: its head, then its events as they come).
    private func complete(_ c: Connection, _ response: Response, minor: Int, isHead: Bool) {
        unreserve(c)
        // Closing a connection its client asked to keep: it may send on before it reads this answer, so it lingers.
        if c.keepAlive && draining && response.stream == nil { c.linger = true }
        c.keepAlive = c.keepAlive && !draining && response.stream == nil
        c.phase = .head
        if let stream = response.stream {
            let serial = c.serial, fd = c.fd
            stream.attach { [weak self] in self?.post(.wake(fd, serial)) }
            server.track(stream)
            c.phase = .stream(stream, minor == 1)
        }
        response.write(into: &c.output, date: date.bytes(), minor: minor, keepAlive: c.keepAlive, isHead: isHead,
                       chunked: response.stream != nil && minor == 1)
        c.responseDone = true
    }

    /// The response's last byte is written (for a stream: its head).
    private func responseWritten(_ c: Connection) {
        end(c)
        c.answered += 1
        if case .stream = c.phase { return }
        c.waitingSince = monotonicSeconds()
        c.lineSeen = false
        // An answer that said the connection stays open keeps it open, stopping or not: its client may send the next
        // request now, and the server answers that one with `Connection: close`.
        if c.keepAlive && !c.peerClosed { return }
        if c.linger && !c.peerClosed { halfClose(c) } else { finish(c) }
    }

    /// Closes the sending side only: the client reads all that was sent, then the end (a reset would destroy an answer
    /// it has not read yet); what it still sends is read and dropped for `seconds`, or until it closes too.
    private func halfClose(_ c: Connection, for seconds: Double = 2) {
        shutdown(c.fd, Int32(SHUT_WR))
        c.phase = .draining(until: monotonicSeconds() + seconds, budget: 1 << 20)
    }

    /// Writes queued output; false while the socket takes no more (the loop hears when it does).
    private func flush(_ c: Connection) -> Bool {
        while c.sent < c.output.count {
            let n = c.output.withUnsafeBytes { send(c.fd, $0.baseAddress! + c.sent, $0.count - c.sent, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                c.sent += n
                c.lastActivity = monotonicSeconds()
            } else if n < 0 && errno == EINTR {
                continue
            } else if n < 0 && errno == EAGAIN {
                setInterest(c, c.interest | EPOLLOUT.rawValue)
                return false
            } else {
                finish(c)
                return false
            }
        }
        c.output.removeAll(keepingCapacity: c.output.capacity <= 64 << 10)
        c.sent = 0
        setInterest(c, c.peerClosed ? 0 : EPOLLIN.rawValue)
        return true
    }

    private func setInterest(_ c: Connection, _ events: UInt32) {
        guard events != c.interest, !c.closed else { return }
        c.interest = events
        watch(c.fd, events, add: false)
    }

    private func begin(_ c: Connection) { c.inFlight = true }

    private func end(_ c: Connection) { c.inFlight = false }

    /// Closes a connection, whatever its state: a request in flight is over, a stream ends.
    private func finish(_ c: Connection) {
        guard !c.closed else { return }
        c.closed = true
        unreserve(c)
        server.connections.closed(c.address)
        open[c.fd] = nil
        close(c.fd)
        end(c)
        if case .stream(let stream, _) = c.phase { stream.release() }
    }

    /// Closes connections that stalled: a request head not complete by the head deadline however many bytes trickle
    /// in (reported when one had begun; an idle keep-alive connection just closes), a body not complete by the body
    /// deadline (answered 408), a body or an answer that did not move for the idle timeout, a lingering close past
    /// its time; stopping, a connection idle for a second.
    private func expire(now: Double) {
        let limits = server.connections.limits
        let idle = Double(limits.idleTimeoutSeconds), head = Double(limits.headTimeoutSeconds)
        for c in Array(open.values) {
            if case .draining(let until, _) = c.phase {
                if now > until { finish(c) }
            } else if let since = drainingSince, c.isIdle, now - max(since, c.waitingSince ?? since) >= 1 {
                // Idle for a second since the stop began (or since its last answer): its client sends nothing more. A
                // request that crosses this on the wire meets the end of the connection, not a reset, and no byte of
                // an answer: it is safe to send again (RFC 9112, 9.3.1). No answer to protect: a short linger.
                halfClose(c, for: 0.5)
            } else if c.isReadingBody && now > c.bodyDeadline {
                switch c.phase {
                case .body(let head, _, _), .chunked(let head, _, _):
                    refuse(c, head, HTTPError(408, "request_timeout", "The request body did not arrive in time."))
                    advance(c)
                default: break
                }
            } else if let since = c.waitingSince, now - since > head {
                if c.lineSeen { server.connections.report(.headTimeout, c.address) }
                finish(c)
            } else if now - c.lastActivity > idle {
                switch c.phase {
                case .body, .chunked: finish(c)
                default: if c.sent < c.output.count { finish(c) }
                }
            }
        }
    }
}

private let crlf: [UInt8] = [13, 10]

private func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// A connection's state, touched only by its worker.
private final class Connection {
    enum Phase {
        /// Waiting for (or reading) a request head.
        case head
        case body(Parser.Head, RouteMatch, Int)
        case chunked(Parser.Head, RouteMatch, Parser.Chunked)
        /// A handler thread is answering the request.
        case handling(minor: Int, isHead: Bool)
        /// Sending a stream's events; chunked for HTTP/1.1.
        case stream(EventStream, Bool)
        /// The last bytes are queued; close once written.
        case closing
        /// Answered early and half-closed: input is dropped until the time or the byte budget runs out.
        case draining(until: Double, budget: Int)
    }

    let fd: Int32
    let address: String
    let serial: UInt64
    var phase = Phase.head
    var input: [UInt8] = []
    /// Where the reading of a head arriving in pieces stands.
    var scan = Parser.Scan()
    /// Bytes of the server's body memory this connection's request holds, and the client they count against.
    var reserved = 0
    var bodyClient = ""
    /// When the body being read must be complete.
    var bodyDeadline = 0.0
    var body: [UInt8] = []
    var output: [UInt8] = []
    var sent = 0
    /// The queued output ends a response.
    var responseDone = false
    var keepAlive = true
    var linger = false
    /// Bytes of a request head arrived since the last answer.
    var lineSeen = false
    /// Since when it has waited for a request head (nil while a request is read or answered).
    var waitingSince: Double?
    var inFlight = false
    var peerClosed = false
    var closed = false
    var interest: UInt32 = 0
    var lastActivity: Double

    var isReadingBody: Bool {
        switch phase {
        case .body, .chunked: return true
        default: return false
        }
    }

    /// Between requests (or before the first): nothing begun, nothing to send.
    var isIdle: Bool {
        guard case .head = phase else { return false }
        return input.isEmpty && !inFlight && sent >= output.count && !responseDone
    }

    /// Requests answered on this connection.
    var answered = 0

    init(fd: Int32, address: String, serial: UInt64, now: Double) {
        self.fd = fd; self.address = address; self.serial = serial; lastActivity = now; waitingSince = now
    }
}

/// The `Date` header's value, formatted once a second.
private struct HTTPDate {
    private var second = 0
    private var text: [UInt8] = []
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    mutating func bytes() -> [UInt8] {
        var now = time(nil)
        if now != second || text.isEmpty {
            second = now
            var parts = tm()
            gmtime_r(&now, &parts)
            func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
            text = Array("\(Self.days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(Self.months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT".utf8)
        }
        return text
    }
}

extension Response {
    /// Appends the status line, headers and body as HTTP/1.1 sends them. Headers holding CR or LF are left out (a
    /// value from a request must never start a header of its own).
    func write(into out: inout [UInt8], date: [UInt8], minor: Int, keepAlive: Bool, isHead: Bool, chunked: Bool) {
        out.reserveCapacity(out.count + body.count + 256)
        // Bytes from contiguous storage, piece by piece: walking each `String.UTF8View` byte by byte was a fifth of
        // an answer to `/healthz` (interpolation, before that, made two strings and an array an answer).
        out += Self.statusLineStart
        Self.appendDecimal(status, to: &out)
        out.append(UInt8(ascii: " "))
        Self.append(Self.reason(status), to: &out)
        out += Self.dateStart
        out += date
        out += crlf
        for (name, value) in headers {
            Self.withBytes(name) { name in
                Self.withBytes(value) { value in
                    guard !name.contains(where: Self.isLineBreak), !value.contains(where: Self.isLineBreak) else { return }
                    out.append(contentsOf: name)
                    out += Self.fieldSeparator
                    out.append(contentsOf: value)
                    out += crlf
                }
            }
        }
        let bodyless = status == 204 || status == 304 || status < 200
        if stream != nil {
            if chunked { out += Self.chunkedField }
        } else if !bodyless {
            out += Self.lengthStart
            Self.appendDecimal(body.count, to: &out)
            out += crlf
        }
        if !keepAlive {
            out += Self.closeField
        } else if minor == 0 {
            out += Self.keepAliveField
        }
        out += crlf
        if !isHead && !bodyless && stream == nil { out += body }
    }

    private static let statusLineStart = Array("HTTP/1.1 ".utf8), dateStart = Array("\r\nDate: ".utf8)
    private static let fieldSeparator = Array(": ".utf8), lengthStart = Array("Content-Length: ".utf8)
    private static let chunkedField = Array("Transfer-Encoding: chunked\r\n".utf8), closeField = Array("Connection: close\r\n".utf8)
    private static let keepAliveField = Array("Connection: keep-alive\r\n".utf8)

    private static func isLineBreak(_ b: UInt8) -> Bool { b == 13 || b == 10 }

    /// `text`'s UTF-8 bytes, in place (`withUTF8` copies only a string not stored as UTF-8).
    private static func withBytes<R>(_ text: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        var text = text
        return text.withUTF8(body)
    }

    private static func append(_ text: String, to out: inout [UInt8]) { withBytes(text) { out.append(contentsOf: $0) } }

    private static func appendDecimal(_ n: Int, to out: inout [UInt8]) {
        if n >= 10 { appendDecimal(n / 10, to: &out) }
        out.append(UInt8(ascii: "0") + UInt8(n % 10))
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 200: return "OK"
        case 201: return "Created"
        case 202: return "Accepted"
        case 204: return "No Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 304: return "Not Modified"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 410: return "Gone"
        case 412: return "Precondition Failed"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 415: return "Unsupported Media Type"
        case 422: return "Unprocessable Content"
        case 428: return "Precondition Required"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        default: return "Status"
        }
    }
}
