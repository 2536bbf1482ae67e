import Foundation

/// `payment.action_required`: a card payment made without its holder (a plan's renewal) needs them after all: their
/// bank asks them to authenticate it (3-D Secure), in the app, by `authenticateBy`; otherwise it is given up (the
/// plan lapses). Key: the user id.
public struct PaymentActionRequired: EventPayload, Equatable {
    public static let type = "payment.action_required"
    public static let schema = EventSchema([
        "amountMinor": .init(minimum: 1), "currency": .init(pattern: "^[A-Z]{3}$"),
        "userId": .described("Whose card it is: the one asked"),
        "subscriptionId": .described("The plan renewed by the payment"),
    ])
    public var paymentId: UUID
    public var userId: UUID
    public var subscriptionId: UUID?
    public var amountMinor: Int
    public var currency: String
    public var authenticateBy: Date
    public var at: Date

    public init(paymentId: UUID, userId: UUID, subscriptionId: UUID?, amountMinor: Int, currency: String, authenticateBy: Date, at: Date) {
        self.paymentId = paymentId; self.userId = userId; self.subscriptionId = subscriptionId; self.amountMinor = amountMinor
        self.currency = currency; self.authenticateBy = authenticateBy; self.at = at
    }
}
