import Crypto
import Events
import Features
import Foundation
import Geo
import Models
import Postgres
import Web

/// What the parcel rules refuse.
enum ParcelError: DomainError, Equatable {
    /// No such parcel, or the caller is not one of its parties.
    case notFound
    /// A party doing another party's action (a sender accepting, a courier it was not offered to).
    case notYourRole(ParcelAction)
    /// The status machine has no such transition from where the parcel is.
    case invalidTransition(from: ParcelStatus, action: ParcelAction)
    /// The courier carries as many parcels as their capacity allows.
    case courierFull
    /// The PIN the courier entered is not the recipient's; `left` more tries.
    case wrongPin(left: Int)
    /// Too many wrong PINs: the parcel is delivered without one, and the recipient confirms.
    case pinLocked
    /// Nothing waits to be claimed with this code.
    case unknownClaimCode
    /// The sender claiming their own parcel.
    case ownParcel
    /// A recipient named by both an id and a username.
    case recipientNamedTwice

    var refusal: Refusal {
        switch self {
        case .notFound: return .notFound
        case .notYourRole: return .forbidden
        case .invalidTransition, .courierFull, .pinLocked, .ownParcel: return .conflict
        case .wrongPin, .recipientNamedTwice: return .invalid
        case .unknownClaimCode: return .notFound
        }
    }

    var field: String? {
        switch self {
        case .wrongPin: return "pin"
        case .unknownClaimCode: return "code"
        case .recipientNamedTwice: return "recipient.username"
        default: return nil
        }
    }

    var message: String {
        switch self {
        case .notFound: return "Not found."
        case .notYourRole(let action): return "Only the \(action.actor.rawValue) may \(action.rawValue) this parcel."
        case .invalidTransition(let from, let action): return "A parcel that is \(from.rawValue) cannot be \(action.rawValue)ed."
        case .courierFull: return "You are carrying as many parcels as you can."
        case .wrongPin(let left): return "That is not the recipient's PIN (\(left) \(left == 1 ? "try" : "tries") left)."
        case .pinLocked: return "Too many wrong PINs: deliver it without one, and the recipient confirms."
        case .unknownClaimCode: return "No parcel waits for that code."
        case .ownParcel: return "You sent this parcel: pass the code on to its recipient."
        case .recipientNamedTwice: return "Name the recipient by userId or by username, not both."
        }
    }
}

/// A parcel as booked, before it is stored.
struct NewParcel {
    let id: UUID
    let sender: UUID
    /// The recipient's account, when the sender named one dispatch knows; else whoever claims it with `claimCode`.
    let recipientUserId: UUID?
    let recipientName: String
    let recipientPhone: String?
    let recipientUsername: String?
    let recipientEmail: String?
    let claimCode: String?
    let deliveryPin: String
    let route: Itinerary
    let service: ParcelService
    let paymentMethod: PaymentMethod
    let insured: Bool
    let description: String?
    let documentPhotoMediaId: UUID
    /// What is paid: the price less `pointsSpent`.
    let quote: Quote
    let pointsSpent: Int
    let status: ParcelStatus
    /// The code shown at its centres, when it goes through one.
    let centreCode: String?
}

/// The parcel rules applied in a transaction: who may do what, the status machine, the courier's load, the history
/// and the `parcel.status` event. Handlers, the matcher and the fleet consumer all change parcels through here.
struct Parcels: Sendable {
    let storage: DispatchStorage
    let outbox: Outbox
    /// Where couriers are now, for the places of their actions (none: their rows' positions).
    var matcher: Matcher? = nil
    /// A courier's share of each parcel they deliver, written when they deliver it.
    let earnings: EarningsRule

    /// Wrong PINs a parcel takes before the handover needs the recipient's own confirmation.
    static let pinTries = 5

    var payments: PaymentRules { PaymentRules(storage: storage, outbox: outbox) }
    var loyalty: Loyalty { Loyalty(outbox: outbox) }

    /// Books a parcel for `sender`, waiting for a courier. Its recipient is the account named by id, by a username
    /// dispatch knows (from auth's events), or by an e-mail address its owner proved; otherwise nobody yet, and the
    /// parcel waits for whoever the sender passes its claim code to (an address nobody proved, or a phone number,
    /// never hands it to whoever registers it). Every parcel gets a delivery PIN for the recipient to show at the door.
    /// A parcel paid by card waits for its authorisation (`awaiting_payment`), due after `paymentLease`. One waiting
    /// for a courier is offered one in the same transaction when a courier in reach can take it and no parcel waits
    /// ahead of it (express first, oldest first, as the matcher offers them): then the booking answers `offered`,
    /// without the matcher's round and a transaction of its own; otherwise the matcher offers it in its turn.
    func create(_ c: Connection, sender: UUID, body: CreateParcelBody, route: Itinerary, quote: Quote,
                paymentLease: TimeInterval = 0) throws -> ParcelRecord {
        let named = body.recipient
        if named.userId != nil && named.username != nil { throw ParcelError.recipientNamedTwice }
        let recipient = try named.userId ?? named.username.flatMap { try storage.userId(c, username: $0) }
            ?? named.email.flatMap { try storage.userId(c, verifiedEmail: $0) }.flatMap { $0 == sender ? nil : $0 }
        let pin = String(format: "%04d", Int(secureRandomBytes(4).reduce(0) { $0 << 8 | UInt32($1) } % 10_000))
        // A parcel brought to a centre waits there (its card authorised meanwhile); else a card is authorised first.
        let status: ParcelStatus = route.dropOffCentre != nil ? .awaitingDropOff : body.paymentMethod == .card ? .awaitingPayment : .awaitingCourier
        // Points the sender spends come off the price: the rest is what is paid.
        let points = try loyalty.spend(c, sender, points: body.pointsToSpend ?? 0, price: quote.amountMinor,
                                       keep: body.paymentMethod == .card ? Loyalty.cardMinimumMinor : 0)
        var price = quote
        price.amountMinor -= points
        let parcel = try storage.insertParcel(c, NewParcel(
            id: UUID.v7(), sender: sender, recipientUserId: recipient, recipientName: named.name, recipientPhone: named.phone,
            recipientUsername: named.username, recipientEmail: named.email, claimCode: recipient == nil ? InviteCode.generate() : nil,
            deliveryPin: pin, route: route, service: body.service, paymentMethod: body.paymentMethod, insured: body.insured ?? false,
            description: body.description, documentPhotoMediaId: body.documentPhotoMediaId, quote: price, pointsSpent: points,
            status: status, centreCode: route.dropOffCentre != nil || route.collectionCentre != nil ? InviteCode.generate() : nil))
        try loyalty.spent(c, parcel)
        try payments.open(c, parcel, card: body.cardPaymentMethod, lease: paymentLease)
        let at = Date()
        let event = try outbox.row(ParcelCreated(parcelId: parcel.id, senderId: sender,
                                                 recipientUserId: recipient, service: parcel.service,
                                                 pickup: Place(lat: parcel.pickup.lat, lon: parcel.pickup.lon),
                                                 dropoff: Place(lat: parcel.dropoff.lat, lon: parcel.dropoff.lon),
                                                 amountMinor: price.amountMinor, currency: price.currency, createdAt: at),
                                   subject: parcel.id.lowercased, at: at)
        try storage.record(c, parcel: parcel.id, saving: nil, from: nil, to: parcel.status, actor: .sender, actorId: sender,
                           place: parcel.pickup, at: at, event: event)
        guard parcel.status == .awaitingCourier, matcher?.anyoneInReach(of: parcel.pickup) == true,
              try !storage.waitingAhead(c, of: parcel) else { return parcel }
        return try offer(c, parcel, declined: []) ?? parcel
    }

    /// `user` becomes the recipient of the parcel waiting for claim code `code` (normalised); nil when none waits
    /// for it. The code is spent: it answers its claimer again (an app sending the claim again after a lost answer)
    /// and nobody else.
    func claim(_ c: Connection, code: String, by user: UUID) throws -> ParcelRecord? {
        guard var parcel = try storage.parcel(c, claimCode: code) else { return nil }
        if let claimer = parcel.recipientUserId { return claimer == user ? parcel : nil }
        guard parcel.senderId != user else { throw ParcelError.ownParcel }
        parcel.recipientUserId = user
        try storage.save(c, parcel)
        try outbox.add(ParcelClaimed(parcelId: parcel.id, senderId: parcel.senderId,
                                     recipientUserId: user, claimedAt: Date()),
                       subject: parcel.id.lowercased, on: c)
        return parcel
    }

    /// The parcel's courier hands it over to the recipient who showed `pin`: received at once, with `photo`. A wrong
    /// PIN is counted (and committed with the transaction, so the caller returns the failure rather than throwing
    /// it); after `pinTries` the PIN no longer works and the recipient confirms instead.
    func handOver(_ c: Connection, _ id: UUID, by courier: UUID, pin: String, photo: UUID,
                  cashCollected: Int?) throws -> Result<ParcelRecord, ParcelError> {
        guard let parcel = try storage.parcel(c, id, lock: true), parcel.involves(courier) else { throw ParcelError.notFound }
        guard parcel.courierId == courier else { throw ParcelError.notYourRole(.handOver) }
        guard ParcelLifecycle.next(from: parcel.status, on: .handOver) != nil else {
            throw ParcelError.invalidTransition(from: parcel.status, action: .handOver)
        }
        if let wrong = try checkPin(c, parcel, pin) { return .failure(wrong) }
        return .success(try perform(c, id, by: courier, .handOver, cashCollected: cashCollected) { $0.deliveryPhotoMediaId = photo })
    }

    /// Nil when `pin` is the parcel's delivery PIN; else the refusal, the wrong PIN counted (the caller commits,
    /// then refuses). After `pinTries` wrong ones the PIN no longer works.
    func checkPin(_ c: Connection, _ parcel: ParcelRecord, _ pin: String) throws -> ParcelError? {
        guard parcel.pinFailures < Self.pinTries else { throw ParcelError.pinLocked }
        guard constantTimeEquals(Array(pin.utf8), Array(parcel.deliveryPin.utf8)) else {
            let failures = try storage.countWrongPin(c, parcel.id)
            return failures >= Self.pinTries ? .pinLocked : .wrongPin(left: Self.pinTries - failures)
        }
        return nil
    }

    /// One party's action on a parcel: found and locked (`notFound` for anyone not a party), authorized, changed by
    /// `change` (say, its delivery photo), then moved on by the status machine.
    func perform(_ c: Connection, _ id: UUID, by user: UUID, _ action: ParcelAction, cashCollected: Int? = nil,
                 _ change: ((inout ParcelRecord) throws -> Void)? = nil) throws -> ParcelRecord {
        guard var parcel = try storage.parcel(c, id, lock: true), parcel.involves(user) else { throw ParcelError.notFound }
        let allowed: Bool
        switch action.actor {
        case .sender: allowed = parcel.senderId == user
        case .recipient: allowed = parcel.recipientUserId == user
        // A courier answering an offer, or the parcel's own courier (a second accept is then a conflict, not a 403).
        case .courier: allowed = parcel.courierId == user
                           || ([.accept, .decline].contains(action) && parcel.offeredTo == user && parcel.status == .offered)
        case .system, .staff: allowed = false  // staff act through `Centres`
        }
        guard allowed else { throw ParcelError.notYourRole(action) }
        try change?(&parcel)
        // Where it happened: the courier's last fix (senders and recipients send none).
        let position = action.actor == .courier ? try storage.courier(c, user).map { matcher?.latest($0) ?? $0 }?.position : nil
        return try apply(c, parcel, action, actor: action.actor, actorId: user, place: position, cashCollected: cashCollected)
    }

    /// Moves a locked parcel on by `action`: the status machine, the courier's load, its payment, history and the
    /// event.
    func apply(_ c: Connection, _ parcel: ParcelRecord, _ action: ParcelAction, actor: ParcelActor, actorId: UUID?,
               place: GeoPoint?, cashCollected: Int? = nil) throws -> ParcelRecord {
        guard let next = ParcelLifecycle.next(from: parcel.status, on: action) else {
            throw ParcelError.invalidTransition(from: parcel.status, action: action)
        }
        var p = parcel
        let from = p.status
        switch action {
        case .accept:
            guard let courier = p.offeredTo, try storage.changeLoad(c, courier: courier, by: 1) else { throw ParcelError.courierFull }
            p.courierId = courier
            p.offeredTo = nil
            p.offerExpiresAt = nil
        case .decline, .expire:
            if let courier = p.offeredTo { try storage.decline(c, parcel: p.id, courier: courier) }
            p.offeredTo = nil
            p.offerExpiresAt = nil
        case .withdraw:
            if let courier = p.courierId {
                _ = try storage.changeLoad(c, courier: courier, by: -1)
                try storage.decline(c, parcel: p.id, courier: courier)
            }
            p.courierId = nil
        case .cancel:
            if from == .assigned, let courier = p.courierId { _ = try storage.changeLoad(c, courier: courier, by: -1) }
            p.offeredTo = nil
            p.offerExpiresAt = nil
        case .deliver, .handOver, .leaveAtCentre, .fail:
            if let courier = p.courierId { _ = try storage.changeLoad(c, courier: courier, by: -1) }
        default: break
        }
        p.status = next
        try payments.follow(c, p, action, cashCollected: cashCollected)
        try loyalty.follow(c, p, action)
        try CourierEarnings(rule: earnings).follow(c, p, action)
        let at = Date()
        let event = try outbox.row(ParcelStatusChanged(parcelId: p.id, from: from, to: next, actor: actor,
                                                       actorId: actorId, courierId: (p.courierId ?? parcel.offeredTo),
                                                       place: place.map { Place(lat: $0.lat, lon: $0.lon) },
                                                       centreId: (action == .checkIn ? p.dropOffCentreId
                                                                  : [.leaveAtCentre, .collect].contains(action) ? p.collectionCentreId : nil),
                                                       senderId: p.senderId, recipientUserId: p.recipientUserId,
                                                       at: at),
                                   subject: p.id.lowercased, at: at)
        // The row, its history and its event in one round trip.
        try storage.record(c, parcel: p.id, saving: p, from: from, to: next, actor: actor, actorId: actorId, place: place, at: at, event: event)
        return p
    }

    /// Takes `courier` off what was offered or assigned to them and not yet picked up: offers lapse, assignments are
    /// withdrawn; the parcels wait for another courier.
    func release(_ c: Connection, from courier: UUID) throws {
        for id in try storage.notPickedUp(c, by: courier) {
            guard let p = try storage.parcel(c, id, lock: true) else { continue }
            if p.status == .offered && p.offeredTo == courier {
                _ = try apply(c, p, .expire, actor: .system, actorId: nil, place: nil)
            } else if p.status == .assigned && p.courierId == courier {
                _ = try apply(c, p, .withdraw, actor: .system, actorId: nil, place: nil)
            }
        }
    }

    /// Sends back to waiting up to 100 offers nobody answered in time (another instance's are skipped).
    func expireOffers(_ c: Connection, now: Date = Date()) throws {
        for id in try storage.expiredOffers(c, limit: 100) {
            guard let p = try storage.parcel(c, id, lock: true, skipLocked: true), p.status == .offered,
                  (p.offerExpiresAt ?? .distantFuture) < now else { continue }
            _ = try apply(c, p, .expire, actor: .system, actorId: nil, place: nil)
        }
    }

    /// Offers a waiting parcel to the first of the matcher's candidates (nearest first) who is online, has room, has
    /// no other offer open and has not declined it. Row locks and a unique index (one open offer per courier) keep
    /// workers and instances from colliding: a courier whose row another transaction holds is passed over this round
    /// rather than waited for, and a failed attempt is undone on its own. Returns the parcel offered, nil when no offer
    /// was made.
    func offer(_ c: Connection, _ id: UUID) throws -> ParcelRecord? {
        guard matcher != nil, let (parcel, declined) = try storage.parcelToOffer(c, id) else { return nil }
        return try offer(c, parcel, declined: declined)
    }

    /// Offers `parcel`, locked by this transaction (a booking's: nobody declined it yet), to the nearest candidate
    /// not in `declined`.
    private func offer(_ c: Connection, _ parcel: ParcelRecord, declined: Set<UUID>) throws -> ParcelRecord? {
        guard let matcher, parcel.status == .awaitingCourier else { return nil }
        var parcel = parcel
        for courier in matcher.candidates(near: parcel.pickup, excluding: declined) {
            do {
                return try c.withSavepoint {
                    // Undone when they cannot take it, which gives back the courier's row lock.
                    guard try storage.canBeOffered(c, courier: courier) else { throw PassedOver() }
                    parcel.offeredTo = courier
                    parcel.offerExpiresAt = Date().addingTimeInterval(matcher.offerTimeout)
                    return try apply(c, parcel, .offer, actor: .system, actorId: nil, place: nil)
                }
            } catch is PassedOver {
                continue
            } catch let error as PostgresError where error.kind == .uniqueViolation {
                continue  // that courier got another offer meanwhile
            }
        }
        return nil
    }

    private struct PassedOver: Error {}
}
