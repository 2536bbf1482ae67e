import Foundation

/// What happened to a courier's vetting: they applied (or applied again after a rejection), or an operator approved,
/// rejected, suspended or reinstated them. Only an approved courier may go online and be offered parcels.
public enum CourierVettingDecision: String, Codable, Sendable, CaseIterable {
    case applied, approved, rejected, suspended, reinstated
}

/// `courier.vetting`: one step of a courier's vetting. Key: the courier's user id, so a courier's steps stay in order.
/// The operator is named by what they typed (the operator token is shared); the application's documents stay out.
public struct CourierVetted: EventPayload, Equatable {
    public static let type = "courier.vetting"
    public static let schema = EventSchema([
        "reason": .init(maxLength: 500, description: "Why: given for a rejection or a suspension, shown to the courier"),
        "operatorName": .init(maxLength: 100, description: "The operator who decided (none when the courier applied)"),
    ])
    public var courierId: UUID
    public var decision: CourierVettingDecision
    public var reason: String?
    public var operatorName: String?
    public var at: Date

    public init(courierId: UUID, decision: CourierVettingDecision, reason: String?, operatorName: String?, at: Date) {
        self.courierId = courierId; self.decision = decision; self.reason = reason; self.operatorName = operatorName; self.at = at
    }
}
