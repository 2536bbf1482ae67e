import Events
import Features
import Foundation
import Models
import Postgres
import Web

/// Where a courier stands with the operators. Only `approved` may go online and be offered parcels.
enum VettingStatus: String, CaseIterable, Sendable, PostgresEncodable, PostgresDecodable {
    /// Registered, never applied.
    case unvetted
    /// Applied, waiting for an operator.
    case pending
    case approved
    /// Refused, with a reason; they may apply again.
    case rejected
    /// Approved once, then stopped, with a reason, until reinstated.
    case suspended
}

/// A vetting rule broken.
enum VettingError: DomainError, Equatable {
    /// No courier (or no application) by that id, for the caller or the operator.
    case notFound
    /// The decision does not apply from where the courier stands.
    case notNow(VettingStatus, CourierVettingDecision)
    /// Applying while approved or suspended.
    case alreadyVetted(VettingStatus)
    /// Going online without being approved.
    case notApproved(VettingStatus)
    /// A courier under review or suspended asked to change the vehicle they were vetted with.
    case vehicleVetted(VettingStatus)
    case consentMissing
    case notYourImage(field: String, purpose: String)
    case reasonMissing

    var refusal: Refusal {
        switch self {
        case .notFound: return .notFound
        case .notNow, .alreadyVetted, .vehicleVetted: return .conflict
        case .notApproved: return .forbidden
        case .consentMissing, .notYourImage, .reasonMissing: return .invalid
        }
    }

    var field: String? {
        switch self {
        case .consentMissing: return "consent"
        case .notYourImage(let field, _): return field
        case .reasonMissing: return "reason"
        default: return nil
        }
    }

    var message: String {
        switch self {
        case .notFound: return "Not found."
        case .notNow(let status, let decision):
            return "A courier who is \(status.rawValue) cannot be \(decision == .reinstated ? "reinstated" : decision.rawValue)."
        case .alreadyVetted(let status): return "You are \(status.rawValue) already: there is nothing to apply for."
        case .notApproved(.suspended): return "Your account is suspended: you cannot go online until an operator reinstates you."
        case .notApproved(.pending): return "Your application is being reviewed: you can go online once an operator approves it."
        case .notApproved(.rejected): return "Your application was rejected: see why with GET /v1/couriers/me/application, and apply again."
        case .notApproved: return "Apply with POST /v1/couriers/me/application: you can go online once an operator approves you."
        case .vehicleVetted(.suspended): return "Your account is suspended: your vehicle cannot change until an operator reinstates you."
        case .vehicleVetted: return "Your application with this vehicle is being reviewed: wait for the decision before changing it."
        case .consentMissing: return "consent must be true: we keep your documents to vet you, as the privacy notice says."
        case .notYourImage(let field, let purpose):
            return "\(field) must name an image you uploaded with POST /v1/dispatch/media?purpose=\(purpose)."
        case .reasonMissing: return "Give the courier a reason."
        }
    }
}

/// The vetting rules: a courier applies with their legal name, phone, vehicle and the photos of an identity document
/// and of the vehicle; an operator approves or rejects (with a reason the applicant sees), and may later suspend
/// (taking them offline, and lapsing an offer open to them) and reinstate. Each step is in the history, with the
/// operator's name, and is a `courier.vetting` event.
struct Vetting: Sendable {
    let storage: DispatchStorage
    let parcels: Parcels
    let media: MediaStore
    let outbox: Outbox

    /// The purposes of the images an application names (`POST /v1/dispatch/media?purpose=`).
    static let identityPurpose = "identity"
    static let vehiclePurpose = "vehicle"

    /// What each operator decision needs the courier to be, and makes them.
    static func transition(_ decision: CourierVettingDecision) -> (from: Set<VettingStatus>, to: VettingStatus) {
        switch decision {
        case .applied: return ([.unvetted, .pending, .rejected], .pending)
        case .approved: return ([.pending], .approved)
        case .rejected: return ([.pending], .rejected)
        case .suspended: return ([.approved], .suspended)
        case .reinstated: return ([.suspended], .approved)
        }
    }

    /// Stores the application (again, while pending or after a rejection), pending an operator.
    func apply(_ c: Connection, _ application: NewApplication, consent: Bool) throws -> ApplicationRecord {
        guard consent else { throw VettingError.consentMissing }
        for (id, field, purpose) in [(application.identityMediaId, "identityPhotoMediaId", Self.identityPurpose),
                                     (application.vehicleMediaId, "vehiclePhotoMediaId", Self.vehiclePurpose)] {
            guard try media.owned([id], by: application.user, for: purpose, on: c) == 1 else {
                throw VettingError.notYourImage(field: field, purpose: purpose)
            }
        }
        if let status = try storage.application(c, application.user, lock: true)?.status,
           !Self.transition(.applied).from.contains(status) {
            throw VettingError.alreadyVetted(status)
        }
        for replaced in try storage.submit(c, application) { try storage.deleteMedia(c, replaced) }
        let (_, at) = try storage.decide(c, application.user, to: .pending, .applied, reason: nil, operatorName: nil)
        try outbox.add(CourierVetted(courierId: application.user, decision: .applied, reason: nil, operatorName: nil, at: at),
                       subject: application.user.lowercased, on: c)
        return try storage.application(c, application.user)!
    }

    /// An operator's decision on `courier`. A suspension takes them offline, lapses an offer open to them and
    /// withdraws the parcels assigned to them that they have not picked up.
    func decide(_ c: Connection, _ courier: UUID, _ decision: CourierVettingDecision, reason: String?, operatorName: String)
        throws -> (application: ApplicationRecord, courier: CourierRecord) {
        // A suspension takes back what the courier has not picked up first: a parcel's lock before the courier's, as
        // every step of a parcel takes them (a refused decision rolls it back).
        if decision == .suspended { try parcels.release(c, from: courier) }
        guard let current = try storage.application(c, courier, lock: true) else { throw VettingError.notFound }
        let (from, to) = Self.transition(decision)
        guard from.contains(current.status) else { throw VettingError.notNow(current.status, decision) }
        if [.rejected, .suspended].contains(decision), (reason ?? "").isEmpty { throw VettingError.reasonMissing }
        let (record, at) = try storage.decide(c, courier, to: to, decision, reason: reason, operatorName: operatorName)
        try outbox.add(CourierVetted(courierId: courier, decision: decision, reason: reason, operatorName: operatorName, at: at),
                       subject: courier.lowercased, on: c)
        return (try storage.application(c, courier)!, record)
    }
}
