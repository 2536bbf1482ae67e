import Features
import Foundation
import HTTP
import Models
import Postgres
import Web

// MARK: - Bodies

/// A courier's application: who they are (their legal name and the photo of an identity document), how to reach
/// them, what they ride (and its photo), and their consent to our keeping the documents while we vet them.
struct CourierApplicationBody: RequestBody {
    static let schema = Schema.object([
        "legalName": .required(.text(max: 200)),
        "phone": .required(.string(min: 3, max: 32, pattern: "^\\+?[0-9][0-9 ()-]*$", rule: "phone must be a phone number.")),
        "vehicle": .required(Shapes.vehicle),
        "identityPhotoMediaId": .required(.uuid), "vehiclePhotoMediaId": .required(.uuid),
        "consent": .required(.boolean),
    ])
    let legalName: String
    let phone: String
    let vehicle: String
    let identityPhotoMediaId: UUID
    let vehiclePhotoMediaId: UUID
    let consent: Bool
}

/// An operator's decision: who decides (the operator token is shared, so the name is how the history tells operators
/// apart), and why (required to reject or suspend: the courier reads it).
struct VettingDecisionBody: RequestBody {
    static let schema = Schema.object(["operator": .required(.text(max: 100)), "reason": .optional(.text(min: 0, max: 500))])
    let `operator`: String
    let reason: String?
}

// MARK: - Views

/// One step of a courier's vetting, for the operators.
struct VettingStepView: View {
    let step: VettingStep
    init(_ step: VettingStep) { self.step = step }
    static let fields: [ViewField<Self>] = [
        .field("decision", \.step.decision.rawValue, .oneOf(CourierVettingDecision.allCases.map(\.rawValue))),
        .omitted("reason", \.step.reason), .omitted("operator", \.step.operatorName), .field("at", \.step.at),
    ]
}

/// A courier's application: to the courier, where it stands and why (the reason of a rejection or suspension); to
/// the operators also the vehicle's photo (a signed URL), whether the identity photo is still kept (`GET
/// /v1/operator/couriers/{userId}/identity-photo`), and, for one courier, the history of decisions.
struct CourierApplicationView: View {
    let application: ApplicationRecord
    /// The operators' view: `media` signs the vehicle photo's URL.
    let media: MediaStore?
    let steps: [VettingStep]?

    init(_ application: ApplicationRecord, forOperator media: MediaStore? = nil, history: [VettingStep]? = nil) {
        self.application = application; self.media = media; steps = history
    }

    var identityPhotoKept: Bool? { media != nil ? application.identityMediaId != nil : nil }
    var vehiclePhotoMediaId: UUID? { media != nil ? application.vehicleMediaId : nil }
    var vehiclePhotoUrl: String? { media.flatMap { m in application.vehicleMediaId.map { m.url($0.lowercased) } } }
    var history: [VettingStepView]? { steps?.map(VettingStepView.init) }

    static let fields: [ViewField<Self>] = [
        .field("courierId", \.application.userId),
        .field("status", \.application.status.rawValue, .oneOf(VettingStatus.allCases.map(\.rawValue))),
        .omitted("reason", \.application.reason), .omitted("legalName", \.application.legalName), .omitted("phone", \.application.phone),
        .field("vehicle", \.application.vehicle, Shapes.vehicle), .omitted("consentedAt", \.application.consentedAt),
        .omitted("decidedAt", \.application.decidedAt), .omitted("identityPhotoKept", \.identityPhotoKept),
        .omitted("documentsErasedAt", \.application.documentsErasedAt), .omitted("vehiclePhotoMediaId", \.vehiclePhotoMediaId),
        .omitted("vehiclePhotoUrl", \.vehiclePhotoUrl),
        .omitted("history", \.history),
        .field("createdAt", \.application.createdAt), .field("updatedAt", \.application.updatedAt),
    ]
}

// MARK: - Handlers

extension DispatchHandlers {
    var vetting: Vetting { Vetting(storage: storage, parcels: parcels, media: media, outbox: outbox) }

    /// `POST /v1/couriers/me/application`: applies (again, while pending or after a rejection), pending an operator.
    func applyAsCourier(_ context: Context<Caller>, _ body: CourierApplicationBody, _ c: Connection) throws -> Response {
        let application = NewApplication(user: context.caller.userId, legalName: body.legalName, phone: body.phone, vehicle: body.vehicle,
                                         identityMediaId: body.identityPhotoMediaId, vehicleMediaId: body.vehiclePhotoMediaId)
        let stored = try vetting.apply(c, application, consent: body.consent)
        return .json(CourierApplicationView(stored), status: 201)
    }

    /// `GET /v1/couriers/me/application`: where the caller's vetting stands, and the reason of the last refusal.
    func myApplication(_ context: Context<Caller>) throws -> Response {
        guard let application = try pool.withConnection({ try storage.application($0, context.caller.userId) }),
              application.status != .unvetted else {
            throw HTTPError.notFound("You have not applied: POST /v1/couriers/me/application.")
        }
        return .json(CourierApplicationView(application))
    }

    /// `GET /v1/operator/couriers/applications?status=`: the applications in a status (pending by default), the
    /// longest-waiting first.
    func applicationQueue(_ context: Context<Void>) throws -> Response {
        let raw = context.request.query["status"] ?? VettingStatus.pending.rawValue
        guard let status = VettingStatus(rawValue: raw) else {
            throw HTTPError.validation("status must be one of \(VettingStatus.allCases.map(\.rawValue).joined(separator: ", ")).", field: "status")
        }
        let limit = try Page(context.request, maxLimit: 100, defaultLimit: 50).limit
        let items = try pool.withConnection { try storage.applications($0, status: status, limit: limit) }
        return .json(ItemList(items.map { CourierApplicationView($0, forOperator: media) }))
    }

    /// `GET /v1/operator/couriers/{userId}/application`: one courier's application with its history.
    func operatorApplication(_ context: Context<Void>) throws -> Response {
        let user = try context.parameters.require("userId", as: UUID.self)
        return try pool.withConnection { c in
            guard let application = try storage.application(c, user) else { throw VettingError.notFound }
            return .json(CourierApplicationView(application, forOperator: media, history: try storage.vettingHistory(c, user)))
        }
    }

    func approveCourier(_ context: Context<Void>, _ body: VettingDecisionBody) throws -> Response { try decide(context, body, .approved) }
    func rejectCourier(_ context: Context<Void>, _ body: VettingDecisionBody) throws -> Response { try decide(context, body, .rejected) }
    func suspendCourier(_ context: Context<Void>, _ body: VettingDecisionBody) throws -> Response { try decide(context, body, .suspended) }
    func reinstateCourier(_ context: Context<Void>, _ body: VettingDecisionBody) throws -> Response { try decide(context, body, .reinstated) }

    /// An operator's decision, recorded with their name; the matching index learns at once of a courier taken offline.
    private func decide(_ context: Context<Void>, _ body: VettingDecisionBody, _ decision: CourierVettingDecision) throws -> Response {
        let user = try context.parameters.require("userId", as: UUID.self)
        let reason = body.reason.flatMap { $0.isEmpty ? nil : $0 }
        let (application, courier, history) = try pool.withTransaction { c in
            let (application, courier) = try vetting.decide(c, user, decision, reason: reason, operatorName: body.operator)
            return (application, courier, try storage.vettingHistory(c, user))
        }
        matcher.update(courier)
        if decision == .suspended { matcher.wake() }  // the parcel whose offer lapsed seeks another courier
        return .json(CourierApplicationView(application, forOperator: media, history: history))
    }

    /// `GET /v1/operator/couriers/{userId}/identity-photo`: the applicant's identity document, while it is kept; for
    /// the operators alone (no signed URL is ever made for it, and the image route refuses it to everyone).
    func identityPhoto(_ context: Context<Void>) throws -> Response {
        let user = try context.parameters.require("userId", as: UUID.self)
        return try pool.withConnection { c in
            guard let photo = try storage.identityPhoto(c, of: user) else { throw HTTPError.notFound() }
            var response = try media.serve(context.request, photo, on: c)
            response.headers = response.headers.map { $0.0 == "Cache-Control" ? ($0.0, "no-store") : $0 }
            return response
        }
    }
}
