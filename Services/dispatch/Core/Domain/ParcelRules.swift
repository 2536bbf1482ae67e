import Foundation
import Models

/// What can happen to a parcel, each done by one kind of actor.
public enum ParcelAction: String, Codable, Sendable, CaseIterable {
    /// The card holds the price: the parcel may be offered.
    case paymentAuthorised = "payment_authorised"
    /// The card was declined: the parcel is called off.
    case paymentDeclined = "payment_declined"
    /// The matching engine offers the parcel to a courier.
    case offer
    /// The offered courier takes it.
    case accept
    /// The offered courier refuses it.
    case decline
    /// Nobody answered the offer in time.
    case expire
    /// The assigned courier may no longer carry it (suspended, or their account is gone) before they picked it up:
    /// it waits for another, never offered to them again.
    case withdraw
    /// The assigned courier has it.
    case pickup
    /// The courier's first fix more than 50 m from the pickup after picking up.
    case depart
    /// The courier handed it over (with a photo); the recipient confirms later.
    case deliver
    /// The courier handed it over to the recipient, who proved it with their delivery PIN (and a photo).
    case handOver = "hand_over"
    /// The courier could not deliver it.
    case fail
    /// The recipient confirms receipt (with a photo).
    case confirm
    /// The sender calls it off before pickup.
    case cancel
    /// A centre's staff took in a parcel brought for drop-off: it waits for a courier there.
    case checkIn = "check_in"
    /// The courier left a parcel at the centre its recipient collects from.
    case leaveAtCentre = "leave_at_centre"
    /// The centre's staff handed it to its recipient, who showed the delivery PIN.
    case collect

    /// The only kind of actor allowed to do this.
    public var actor: ParcelActor {
        switch self {
        case .offer, .expire, .withdraw, .depart, .paymentAuthorised, .paymentDeclined: return .system
        case .accept, .decline, .pickup, .deliver, .handOver, .fail, .leaveAtCentre: return .courier
        case .checkIn, .collect: return .staff
        case .confirm: return .recipient
        case .cancel: return .sender
        }
    }
}

/// The parcel status machine: the one place that says which transitions exist.
public enum ParcelLifecycle {
    /// The status after `action` from `status`, or nil when the transition is not allowed (a 409).
    public static func next(from status: ParcelStatus, on action: ParcelAction) -> ParcelStatus? {
        switch (status, action) {
        case (.awaitingPayment, .paymentAuthorised): return .awaitingCourier
        case (.awaitingPayment, .paymentDeclined), (.awaitingDropOff, .paymentDeclined): return .cancelled
        case (.awaitingDropOff, .checkIn): return .awaitingCourier
        case (.awaitingCourier, .offer): return .offered
        case (.offered, .accept): return .assigned
        case (.offered, .decline), (.offered, .expire), (.assigned, .withdraw): return .awaitingCourier
        case (.assigned, .pickup): return .pickedUp
        case (.pickedUp, .depart): return .inTransit
        case (.pickedUp, .deliver), (.inTransit, .deliver): return .delivered
        case (.pickedUp, .handOver), (.inTransit, .handOver), (.readyForCollection, .collect): return .received
        case (.pickedUp, .leaveAtCentre), (.inTransit, .leaveAtCentre): return .readyForCollection
        case (.assigned, .fail), (.pickedUp, .fail), (.inTransit, .fail): return .failed
        case (.delivered, .confirm): return .received
        case (.awaitingPayment, .cancel), (.awaitingDropOff, .cancel), (.awaitingCourier, .cancel), (.offered, .cancel), (.assigned, .cancel): return .cancelled
        default: return nil
        }
    }

    /// Whether a status is final.
    public static func isFinal(_ status: ParcelStatus) -> Bool {
        [.received, .cancelled, .failed].contains(status)
    }

    /// Distance from the pickup beyond which a picked-up parcel counts as in transit.
    public static let departureMeters = 50.0
}

/// A price and an estimated time of arrival.
public struct Quote: Codable, Sendable, Equatable {
    /// ISO 4217.
    public var currency: String
    /// The price in minor units (cents).
    public var amountMinor: Int
    /// Estimated seconds from booking to delivery.
    public var etaSeconds: Int
    /// The great-circle distance from pickup to drop-off, in metres.
    public var distanceMeters: Int
    /// The plan whose benefits lowered the price, and by how much (only in a quote, not kept with a parcel).
    public var planId: String?
    public var planSavingMinor: Int?
    /// The tariff it was priced by (kept in the parcel's row, not read back), and until when a booking naming that
    /// tariff keeps it (`TariffBook`; only in a quote's answer).
    public var tariffId: UUID?
    public var validUntil: Date?

    public init(currency: String, amountMinor: Int, etaSeconds: Int, distanceMeters: Int) {
        self.currency = currency; self.amountMinor = amountMinor; self.etaSeconds = etaSeconds; self.distanceMeters = distanceMeters
    }
}
