import Foundation

/// The command line. Every option has a default that gives a run of about a minute against `deploy/local/stack up`.
struct Options: Sendable {
    var dispatch = "http://127.0.0.1:8084"
    var auth = "http://127.0.0.1:8081"
    var operatorToken = ProcessInfo.processInfo.environment["OPERATOR_TOKEN"] ?? ""
    var databaseURL = ProcessInfo.processInfo.environment["DATABASE_URL"] ?? ""
    var couriers = 2_000
    var actingCouriers = 10
    var senders = 10
    var capacity = 3
    var fixRate = 500.0
    var parcelRate = 10.0
    var duration = 60.0
    var parcels = 0
    var areaKm = 20.0
    var center = (lat: 44.4268, lon: 26.1025)
    var expressShare = 0.3
    var cardShare = 0.0
    /// The fraction of card parcels whose card needs 3-D Secure (completed on the stand-in, as the app's SDK would).
    var authenticationShare = 0.0
    var centreShare = 0.0
    var deliver = false
    /// The Stripe stand-in the dispatch service pays through, to check no card was charged twice.
    var provider = ProcessInfo.processInfo.environment["STRIPE_STANDIN_URL"] ?? ""
    var threads = 4
    var creators = 16
    var out = "dispatch-load-report"
    var quiet = false
    var thresholds: [Threshold] = []
    /// An earlier run's report (JSON), shown beside this one.
    var compare = ""

    static let help = """
        dispatch-load: load-test the dispatch path of a running dispatch service, over HTTP.

        It signs up senders and a few couriers who act for themselves, seeds the other couriers through the operator
        path (no sign-ups), moves every courier around a square area sending location fixes, creates parcels at a
        steady rate, accepts every offer (the seeded couriers' through the operator, the others' with their own
        tokens), then checks the invariants from the API and, given a database URL, from PostgreSQL.

        Usage: dispatch-load [options]

        Targets
          --dispatch URL[,URL...] dispatch service (default http://127.0.0.1:8084); several instances: the client
                                  threads spread over them and move to the next when theirs does not answer
          --auth URL              auth service, for sign-ups (default http://127.0.0.1:8081)
          --operator-token TOKEN  the dispatch service's OPERATOR_TOKEN (default: $OPERATOR_TOKEN): seeds couriers and
                                  approves the acting ones
          --database-url URL      dispatch's PostgreSQL, for the invariant checks (default: $DATABASE_URL; without
                                  it only the API checks run)
        Fleet
          --couriers N            couriers online, in all (default 2000)
          --acting-couriers N     of those, couriers signed up who send their own fixes and accept their own
                                  offers (default 10)
          --deliver               acting couriers also pick up and deliver what they accept, so that cards are
                                  captured (checked against the delivered card parcels)
          --capacity N            parcels each courier can carry, 1 to 50 (default 3)
          --fix-rate R            location fixes per second, in all (default 500)
          --area-km K             side of the square the couriers and pickups are in (default 20)
          --center LAT,LON        its centre (default 44.4268,26.1025, Bucharest)
        Parcels
          --senders N             people sending parcels (default 10)
          --parcel-rate R         parcels created per second (default 10)
          --express-share F       fraction sent express, 0 to 1 (default 0.3)
          --card-share F          fraction paid by card (held when booked), the rest in cash, 0 to 1 (default 0);
                                  dispatch needs a payment provider (the local stack's Stripe stand-in)
          --authentication-share F
                                  fraction of those whose card needs 3-D Secure, 0 to 1 (default 0): the booking
                                  answers requires_action, the run completes it on the stand-in as the app's SDK
                                  would, and the stand-in's signed webhook moves the parcel on (needs --provider)
          --centre-share F        fraction brought to one of 5 reception centres the run creates, checked in there by
                                  its staff at once, instead of picked up, 0 to 1 (default 0; needs --operator-token)
          --provider URL          that Stripe stand-in, to check no card is held or charged twice (default:
                                  $STRIPE_STANDIN_URL, which `deploy/local/stack load` sets)
          --duration S            seconds to create parcels for (default 60)
          --parcels N             stop after N parcels instead (default: no limit)
          --creators N            threads creating parcels on one schedule, the n-th due n / rate seconds after the
                                  start, as k6's constant-arrival-rate with N VUs: a slow answer holds one of them,
                                  not the rate; when all N wait, the schedule runs late and catches up; as many
                                  accept the seeded couriers' offers (default 16)
          --threads N             client threads sending fixes and setting up (default 4)
        Output
          --out PATH              report files PATH.json and PATH.html (default dispatch-load-report); the JSON holds
                                  `series`, one object a second: {t, created, assigned, fixes, errors, latencyMs:
                                  {offered, assigned, create, fix, batch, accept: {count, p50, p95, p99}}}
          --quiet                 no progress lines
          --threshold EXPR        fail the run (exit 1) unless EXPR holds, as in k6; repeatable. EXPR is
                                  metric.figure, <, <=, > or >=, and a number: offered.p99<50ms, assigned.p95<=200,
                                  created.rate>=9.5, fixes.rate>400, errors.count<1. Latencies (offered, assigned,
                                  create, fix, batch, accept) take p50, p90, p95, p99, max, mean, count, in ms
          --compare REPORT.json   show an earlier run's figures beside this one's, with their ratios
          --help                  this text

        At the end it takes its couriers offline and, given the database, deletes the seeded ones holding no parcel.
        Ctrl-C ends the run early: it still checks, reports and takes its couriers offline (a second Ctrl-C quits).
        Latencies are measured on the service's own clock from each parcel's history (created → offered,
        created → assigned); location-update latency is the round trip of each fix request.
        """

    static func parse(_ arguments: [String]) throws -> Options {
        var o = Options()
        var rest = arguments[...]
        func value(_ name: String) throws -> String {
            guard let v = rest.popFirst() else { throw UsageError("\(name) needs a value") }
            return v
        }
        func number(_ name: String, _ range: ClosedRange<Double>) throws -> Double {
            let text = try value(name)
            guard let v = Double(text), v.isFinite, range.contains(v) else {
                throw UsageError("\(name) must be a number from \(range.lowerBound) to \(range.upperBound) (got \"\(text)\")")
            }
            return v
        }
        func whole(_ name: String, _ range: ClosedRange<Int>) throws -> Int {
            let text = try value(name)
            guard let v = Int(text), range.contains(v) else {
                throw UsageError("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound) (got \"\(text)\")")
            }
            return v
        }
        while let arg = rest.popFirst() {
            switch arg {
            case "--help", "-h": throw UsageError.help
            case "--dispatch": o.dispatch = try value(arg)
            case "--auth": o.auth = try value(arg)
            case "--operator-token": o.operatorToken = try value(arg)
            case "--database-url": o.databaseURL = try value(arg)
            case "--couriers": o.couriers = try whole(arg, 1...1_000_000)
            case "--acting-couriers": o.actingCouriers = try whole(arg, 0...1_000)
            case "--capacity": o.capacity = try whole(arg, 1...50)
            case "--fix-rate": o.fixRate = try number(arg, 0...1_000_000)
            case "--area-km": o.areaKm = try number(arg, 0.1...2_000)
            case "--center":
                let text = try value(arg)
                let parts = text.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
                guard parts.count == 2, (-80...80).contains(parts[0]), (-180...180).contains(parts[1]) else {
                    throw UsageError("--center must be LAT,LON with LAT from -80 to 80 (got \"\(text)\")")
                }
                o.center = (parts[0], parts[1])
            case "--senders": o.senders = try whole(arg, 1...1_000)
            case "--parcel-rate": o.parcelRate = try number(arg, 0.01...100_000)
            case "--express-share": o.expressShare = try number(arg, 0...1)
            case "--card-share": o.cardShare = try number(arg, 0...1)
            case "--authentication-share": o.authenticationShare = try number(arg, 0...1)
            case "--centre-share": o.centreShare = try number(arg, 0...1)
            case "--provider": o.provider = try value(arg)
            case "--deliver": o.deliver = true
            case "--duration": o.duration = try number(arg, 1...86_400)
            case "--parcels": o.parcels = try whole(arg, 1...10_000_000)
            case "--threads": o.threads = try whole(arg, 1...256)
            case "--creators": o.creators = try whole(arg, 1...1_024)
            case "--out": o.out = try value(arg)
            case "--quiet": o.quiet = true
            case "--threshold": o.thresholds.append(try Threshold(try value(arg)))
            case "--compare": o.compare = try value(arg)
            default: throw UsageError("unknown option \(arg)")
            }
        }
        if o.authenticationShare > 0 && o.provider.isEmpty { throw UsageError("--authentication-share needs --provider") }
        guard o.actingCouriers <= o.couriers else { throw UsageError("--acting-couriers cannot exceed --couriers") }
        if o.couriers > o.actingCouriers && o.operatorToken.isEmpty {
            throw UsageError("seeding couriers needs the operator token: --operator-token or OPERATOR_TOKEN")
        }
        for (name, url) in o.dispatch.split(separator: ",").map({ ("--dispatch", String($0)) }) + [("--auth", o.auth)]
            where URL(string: url)?.host == nil {
            throw UsageError("\(name) must be a URL such as http://127.0.0.1:8084 (got \"\(url)\")")
        }
        return o
    }
}

struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ text: String) { description = text }
    static let help = UsageError("")
}
