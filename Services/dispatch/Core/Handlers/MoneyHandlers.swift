import Foundation
import HTTP
import Postgres
import Web

/// A sender's money beyond one parcel: loyalty points, the wallet and its top-ups, plans. A top-up or a plan's
/// month is a card payment taken at once: the request asks the provider (bounded by its timeout) and answers with
/// what it knows; the settler finishes what the provider did not answer in time.
extension DispatchHandlers {
    var wallet: Wallet { parcels.payments.wallet }
    var plans: Plans { parcels.payments.plans }

    func loyaltyStatement(_ context: Context<Caller>) throws -> Response {
        let limit = try Page(context.request, maxLimit: 100, defaultLimit: 20).limit
        return .json(try pool.withConnection { try parcels.loyalty.statement($0, context.caller.userId, limit: limit) })
    }

    func walletStatement(_ context: Context<Caller>) throws -> Response {
        let limit = try Page(context.request, maxLimit: 100, defaultLimit: 20).limit
        return .json(try pool.withConnection { try wallet.statement($0, context.caller.userId, currency: tariff.currency, limit: limit) })
    }

    /// `POST /v1/wallet/top-ups`: 201 with the top-up, `captured` when the provider answered in time.
    func topUp(_ context: Context<Caller>, _ body: TopUpBody) throws -> Response {
        guard let payments else { throw PaymentError.cardsOff }
        let caller = context.caller
        let opened = Opened()
        return try idempotency.run(context.request, caller: caller.userId.lowercased, finishingWithin: 2 * payments.lease) { c in
            try parcels.payments.admitCard(c, payer: caller.userId)
            let p = try storage.insertPayment(c, id: UUID.v7(), purpose: .topUp, parcel: nil, subscription: nil, payer: caller.userId,
                                              method: .card, amountMinor: body.amountMinor, currency: tariff.currency,
                                              card: body.cardPaymentMethod, status: .pending, due: .authorise, dueIn: payments.lease)
            opened.id = p.id
            return .json(TopUpView(payment: p), status: 201)
        } then: { response in  // (a first request's only: its answer is the one a retry gets)
            guard let id = opened.id else { return response }
            askNow(id, payments)
            return try pool.withConnection { c in try storage.payment(c, id: id).map { .json(TopUpView(payment: $0), status: 201) } ?? response }
        }
    }

    /// `GET /v1/wallet/top-ups/{id}`: the payer's own top-up; anyone else's is not found.
    func getTopUp(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withConnection { c in
            guard let p = try storage.payment(c, id: id), p.purpose == .topUp, p.payerId == context.caller.userId else {
                throw HTTPError.notFound("No such top-up.")
            }
            return .json(TopUpView(payment: p))
        }
    }

    func listPlans(_ context: Context<Caller>) throws -> Response {
        .json(ItemList(try pool.withConnection { try plans.catalogue($0, currency: tariff.currency) }.map(PlanView.init)))
    }

    /// `POST /v1/plans/subscription`: 201 with the subscription, `active` when the provider took the first month in time.
    func subscribe(_ context: Context<Caller>, _ body: SubscribeBody) throws -> Response {
        guard let payments else { throw PaymentError.cardsOff }
        let caller = context.caller
        let catalogue = try pool.withConnection { try plans.catalogue($0, currency: tariff.currency) }
        guard let plan = catalogue.first(where: { $0.id == body.planId }) else { throw Plans.Refused.unknownPlan }
        let opened = Opened()
        return try idempotency.run(context.request, caller: caller.userId.lowercased, finishingWithin: 2 * payments.lease) { c in
            try parcels.payments.admitCard(c, payer: caller.userId)
            let (s, p) = try plans.subscribe(c, caller.userId, plan: plan, card: body.cardPaymentMethod, storage: storage, lease: payments.lease)
            opened.id = p.id
            return .json(SubscriptionView(subscription: s), status: 201)
        } then: { response in  // (a first request's only: its answer is the one a retry gets)
            guard let id = opened.id else { return response }
            askNow(id, payments)
            return try pool.withConnection { c in
                try plans.current(c, caller.userId).map { .json(SubscriptionView(subscription: $0, month: try storage.payment(c, id: id)), status: 201) }
                    ?? response
            }
        }
    }

    func getSubscription(_ context: Context<Caller>) throws -> Response {
        try pool.withConnection { c in
            guard let s = try plans.current(c, context.caller.userId) else { throw Plans.Refused.notSubscribed }
            return .json(SubscriptionView(subscription: s, month: try storage.monthAwaitingHolder(c, subscription: s.id)))
        }
    }

    /// `DELETE /v1/plans/subscription`: the plan will not renew (it runs until its period ends).
    func stopRenewing(_ context: Context<Caller>) throws -> Response {
        .json(SubscriptionView(subscription: try pool.withTransaction { try plans.stopRenewing($0, context.caller.userId, currency: tariff.currency) }))
    }

    /// Makes payment `id`'s due call now, and the capture it leads to at once (a top-up's or a plan's), if the
    /// provider answers in time; else the settler goes on.
    func askNow(_ id: UUID, _ payments: PaymentSettler) {
        _ = try? payments.run(only: id)
        if (try? pool.withConnection({ try storage.payment($0, id: id)?.due })) == .capture { _ = try? payments.run(only: id) }
    }
}

/// The payment or parcel a request opened, set in its transaction and read after it (`@unchecked Sendable`: never
/// shared across threads at once); `waiting`: a parcel left for the matcher to offer.
final class Opened: @unchecked Sendable { var id: UUID?; var waiting = false }
