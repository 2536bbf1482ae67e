import Crypto
import Foundation
import HTTP

/// What a payment provider answered one call with.
public enum ProviderOutcome: Equatable, Sendable {
    /// It did what was asked: `intent` is its id for the payment, `status` its state (`requires_capture`,
    /// `succeeded`, `canceled`).
    case done(intent: String, status: String)
    /// It refused, for good (a declined card, a payment method it does not know): `code` says why.
    case refused(code: String, message: String)
    /// No answer, or one that says "later" (a timeout, 429, 5xx): it may have acted. Ask again with the same
    /// idempotency key and it answers as it did the first time.
    case unknown(String)
    /// It needs the card's holder first (3-D Secure, which Strong Customer Authentication makes routine): the app
    /// completes `intent` with the provider's SDK and `clientSecret`; the provider then says how it ended (a webhook,
    /// or `retrieve`).
    case needsAction(intent: String, clientSecret: String)
}

/// How a payment uses its card.
public enum CardUse: Equatable, Sendable {
    /// This once, its holder present.
    case once
    /// Its holder present, and saved to `customer` for later payments without them (a plan's renewals).
    case save(customer: String)
    /// Charged again for `customer`, to whom it was saved, without its holder present.
    case offSession(customer: String)
}

/// A payment provider that holds an amount on a card when a parcel is booked and takes it when it is delivered.
/// Every call carries an idempotency key: the same key never acts twice.
public protocol PaymentProvider: Sendable {
    /// Authorises `amountMinor` of `currency` on `paymentMethod`, to be captured later.
    func authorise(amountMinor: Int, currency: String, paymentMethod: String, use: CardUse, metadata: [String: String],
                   idempotencyKey: String) -> ProviderOutcome
    /// A customer, to whom a card can be saved: `.done` with its id as `intent`.
    func createCustomer(metadata: [String: String], idempotencyKey: String) -> ProviderOutcome
    /// Takes the amount held by `intent`.
    func capture(intent: String, idempotencyKey: String) -> ProviderOutcome
    /// Releases the amount held by `intent` (a cancelled or failed parcel).
    func void(intent: String, idempotencyKey: String) -> ProviderOutcome
    /// Where `intent` stands now (after its holder was asked to authenticate): `.done` with its status,
    /// `.needsAction` while it still waits for them, `.refused` when their authentication failed.
    func retrieve(intent: String) -> ProviderOutcome
    /// Pays `amountMinor` of what `intent` took back to its card: `.done` with the refund's id as `intent`.
    func refund(intent: String, amountMinor: Int, metadata: [String: String], idempotencyKey: String) -> ProviderOutcome
}

extension PaymentProvider {
    public func refund(intent: String, amountMinor: Int, idempotencyKey: String) -> ProviderOutcome {
        refund(intent: intent, amountMinor: amountMinor, metadata: [:], idempotencyKey: idempotencyKey)
    }
}

/// Stripe's HTTP API, PaymentIntents with manual capture (https://docs.stripe.com/api/payment_intents): form-encoded
/// requests, the secret key as a bearer token, an `Idempotency-Key` on every call.
public struct StripeClient: PaymentProvider {
    let base: URL
    let secretKey: String
    let timeout: TimeInterval
    /// The API version the answers are read as.
    static let version = "2024-06-20"

    public init(base: URL, secretKey: String, timeout: TimeInterval) {
        self.base = base; self.secretKey = secretKey; self.timeout = timeout
    }

    public func authorise(amountMinor: Int, currency: String, paymentMethod: String, use: CardUse, metadata: [String: String],
                          idempotencyKey: String) -> ProviderOutcome {
        var form = [("amount", String(amountMinor)), ("currency", currency.lowercased()), ("capture_method", "manual"),
                    ("confirm", "true"), ("payment_method", paymentMethod), ("payment_method_types[]", "card")]
        switch use {
        case .once: break
        case .save(let customer): form += [("customer", customer), ("setup_future_usage", "off_session")]
        case .offSession(let customer): form += [("customer", customer), ("off_session", "true")]
        }
        form += metadata.sorted { $0.key < $1.key }.map { ("metadata[\($0.key)]", $0.value) }
        return call("/v1/payment_intents", form, idempotencyKey: idempotencyKey)
    }

    public func createCustomer(metadata: [String: String], idempotencyKey: String) -> ProviderOutcome {
        call("/v1/customers", metadata.sorted { $0.key < $1.key }.map { ("metadata[\($0.key)]", $0.value) }, idempotencyKey: idempotencyKey)
    }

    public func capture(intent: String, idempotencyKey: String) -> ProviderOutcome {
        call("/v1/payment_intents/\(Self.pathSafe(intent))/capture", [], idempotencyKey: idempotencyKey)
    }

    public func void(intent: String, idempotencyKey: String) -> ProviderOutcome {
        call("/v1/payment_intents/\(Self.pathSafe(intent))/cancel", [], idempotencyKey: idempotencyKey)
    }

    public func retrieve(intent: String) -> ProviderOutcome {
        call("/v1/payment_intents/\(Self.pathSafe(intent))", [], idempotencyKey: nil, method: "GET")
    }

    /// A refund of part or all of a captured PaymentIntent (https://docs.stripe.com/api/refunds/create). Stripe's
    /// `reason` takes only `duplicate`, `fraudulent` (which also blocks the card) or `requested_by_customer`, so an
    /// operator's own words go in `metadata[reason]` and `reason` is left out. A refund Stripe reports `failed` or
    /// `canceled` is refused; `pending` and `succeeded` are done (the money is on its way back).
    public func refund(intent: String, amountMinor: Int, metadata: [String: String], idempotencyKey: String) -> ProviderOutcome {
        let form = [("payment_intent", intent), ("amount", String(amountMinor))]
            + metadata.sorted { $0.key < $1.key }.map { ("metadata[\($0.key)]", $0.value) }
        let outcome = call("/v1/refunds", form, idempotencyKey: idempotencyKey)
        if case .done(_, let status) = outcome, status == "failed" || status == "canceled" {
            return .refused(code: "refund_\(status)", message: "The card's issuer did not take the refund back.")
        }
        return outcome
    }

    private static func pathSafe(_ id: String) -> String { id.filter { $0.isLetter || $0.isNumber || $0 == "_" } }

    /// `idempotencyKey` nil (a read): none sent.
    private func call(_ path: String, _ form: [(String, String)], idempotencyKey: String?, method: String = "POST") -> ProviderOutcome {
        guard let url = URL(string: path, relativeTo: base) else { return .unknown("bad provider URL") }
        let body = form.map { "\(Self.encode($0.0))=\(Self.encode($0.1))" }.joined(separator: "&")
        var headers = ["Authorization": "Bearer \(secretKey)", "Stripe-Version": Self.version]
        headers["Idempotency-Key"] = idempotencyKey
        if method == "POST" { headers["Content-Type"] = "application/x-www-form-urlencoded" }
        guard let (status, data) = Fetch.send(method, url, headers: headers, body: method == "POST" ? Data(body.utf8) : nil, timeout: timeout) else {
            return .unknown("no answer in \(Int(timeout)) s")
        }
        let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        switch status {
        case 200:
            guard let id = object["id"] as? String else { return .unknown("an answer without an id") }
            guard let state = object["status"] as? String else { return .done(intent: id, status: "") }  // a customer
            if state == "requires_action" {
                guard let secret = object["client_secret"] as? String else { return .unknown("an intent to authenticate without its client secret") }
                return .needsAction(intent: id, clientSecret: secret)
            }
            // Its holder's authentication failed (or never came): the card was not held.
            if state == "requires_payment_method" {
                let error = object["last_payment_error"] as? [String: Any] ?? [:]
                return .refused(code: error["decline_code"] as? String ?? error["code"] as? String ?? "authentication_required",
                                message: error["message"] as? String ?? "The card's holder did not confirm the payment.")
            }
            return .done(intent: id, status: state)
        case 402, 400, 404:
            let error = object["error"] as? [String: Any] ?? [:]
            let code = error["decline_code"] as? String ?? error["code"] as? String ?? "refused"
            // A card saved for payments without its holder that needs them after all (a renewal): the intent waits
            // for them to come back and confirm it in the app.
            if code == "authentication_required", let intent = error["payment_intent"] as? [String: Any], let id = intent["id"] as? String,
               let secret = intent["client_secret"] as? String {
                return .needsAction(intent: id, clientSecret: secret)
            }
            return .refused(code: code, message: error["message"] as? String ?? "The payment was refused.")
        case 409:
            return .unknown("the same idempotency key is still being processed")  // Stripe's idempotency_error: try again
        default:
            return .unknown("HTTP \(status)")  // 401 (a bad key), 429, 5xx: nothing to tell the customer yet
        }
    }

    /// Form encoding: everything but unreserved characters percent-encoded.
    static func encode(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")) ?? ""
    }
}

/// A Stripe webhook's `Stripe-Signature` (https://docs.stripe.com/webhooks#verify-manually): `t=<unix time>` and
/// one or more `v1=<hex HMAC-SHA256 of "t.body" under the endpoint's secret>`, within `tolerance` of now.
public struct StripeWebhookSignature: Sendable {
    let secret: [UInt8]
    let tolerance: TimeInterval

    public init(secret: String, tolerance: TimeInterval = 300) {
        self.secret = Array(secret.utf8); self.tolerance = tolerance
    }

    /// Whether `header` signs `body` now.
    public func verifies(_ header: String, body: [UInt8], now: Date = Date()) -> Bool {
        var timestamp: String?
        var signatures: [String] = []
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2 else { continue }
            if pair[0] == "t" { timestamp = pair[1] } else if pair[0] == "v1" { signatures.append(pair[1]) }
        }
        guard let timestamp, let seconds = Double(timestamp), abs(now.timeIntervalSince1970 - seconds) <= tolerance else { return false }
        let expected = Array(hexString(hmacSHA256(key: secret, Array(timestamp.utf8) + Array(".".utf8) + body)).utf8)
        return signatures.contains { constantTimeEquals(Array($0.lowercased().utf8), expected) }
    }

    /// The header for `body` at `time`, as Stripe would send it (for stand-ins and tests).
    public func header(body: [UInt8], time: Date = Date()) -> String {
        let t = String(Int(time.timeIntervalSince1970))
        return "t=\(t),v1=" + hexString(hmacSHA256(key: secret, Array(t.utf8) + Array(".".utf8) + body))
    }
}
