import Events
import Features
import Foundation
import Models
import Postgres
import Web

/// What the chat rules refuse.
enum ChatError: DomainError, Equatable {
    /// No such room, message or item, or the caller is not in its room (outsiders learn nothing).
    case notFound
    /// A member doing what only the owner, or the author, may.
    case forbidden(String)
    /// The room does not allow it (read-only, not a team room, a direct room with a stranger).
    case conflict(String)
    /// No room has the invite code.
    case unknownInviteCode
    /// A value that names something that is not there (an assignee who is not a member, a reply to another room).
    case invalid(String, field: String)

    var refusal: Refusal {
        switch self {
        case .notFound, .unknownInviteCode: return .notFound
        case .forbidden: return .forbidden
        case .conflict: return .conflict
        case .invalid: return .invalid
        }
    }

    var message: String {
        switch self {
        case .notFound: return "Not found."
        case .forbidden(let m), .conflict(let m), .invalid(let m, _): return m
        case .unknownInviteCode: return "No room has that invite code."
        }
    }

    var field: String? { if case .invalid(_, let field) = self { return field }; return nil }
}

/// Writes a room's changes: each takes the room's next sequence (the row lock keeps them gap-free and in commit
/// order), is stored with the JSON a stream sends for it, and goes out as its event through the outbox.
struct RoomLog: Sendable {
    let storage: ChatStorage
    let outbox: Outbox
    /// Signs the avatars in what streams send.
    let urls: MediaURLs

    /// Stores change `seq` of `room` as SSE `event` with `view` as its data.
    func record(_ c: Connection, room: UUID, seq: Int64, event: String, view: some View, message: UUID? = nil) throws {
        try storage.addChange(c, room: room, seq: seq, event: event, body: String(decoding: JSON.encode(view), as: UTF8.self),
                              message: message)
    }

    /// A member joined: the change and its event.
    func joined(_ c: Connection, room: UUID, _ member: MemberRecord) throws {
        let seq = try storage.nextSeq(c, room).change
        try record(c, room: room, seq: seq, event: "member_joined",
                   view: MembershipView(roomId: room, user: PersonView(member.person, urls: urls), role: member.role.rawValue, reason: nil,
                                        at: member.joinedAt))
        try outbox.add(ChatMemberJoined(roomId: room, userId: member.person.id, role: member.role, seq: seq,
                                        joinedAt: member.joinedAt), subject: room.lowercased, on: c)
    }
}

/// The room rules: who is in a room and who owns it; team rooms with invite codes, the one direct room of a pair
/// of people who know each other, and the conversation of a parcel's sender, courier and recipient.
struct Rooms: Sendable {
    let storage: ChatStorage
    let log: RoomLog

    /// The room if `user` is a member; `notFound` otherwise.
    func member(_ c: Connection, _ id: UUID, _ user: UUID, lock: Bool = false) throws -> RoomRecord {
        guard let room = try storage.room(c, id, reader: user, lock: lock), room.role != nil else { throw ChatError.notFound }
        return room
    }

    /// The room if `user` owns it; `notFound` for outsiders, `forbidden` for other members.
    func owner(_ c: Connection, _ id: UUID, _ user: UUID, lock: Bool = false) throws -> RoomRecord {
        let room = try member(c, id, user, lock: lock)
        guard room.role == .owner else { throw ChatError.forbidden("Only the room's owner can do this.") }
        return room
    }

    /// A room `user` may write in: a member, and the room not closed.
    func writable(_ c: Connection, _ id: UUID, _ user: UUID) throws -> RoomRecord {
        let room = try member(c, id, user)
        guard !room.readOnly else { throw ChatError.conflict("This conversation is closed.") }
        return room
    }

    /// A new team room; its creator owns it.
    func createTeam(_ c: Connection, name: String, topic: String?, by user: UUID) throws -> RoomRecord {
        let id = UUID.v7()
        guard try storage.insertRoom(c, id: id, kind: .team, name: name, topic: topic, inviteCode: InviteCode.generate(),
                                     directKey: nil, parcel: nil, createdBy: user) else {
            throw ChatError.conflict("Could not create the room; try again.")
        }
        try opened(c, id, kind: .team, by: user, parcel: nil, members: [(user, .owner)])
        return try member(c, id, user)
    }

    /// The key of two people's direct room, whoever opens it.
    static func directKey(_ a: UUID, _ b: UUID) -> String { [a, b].map(\.lowercased).sorted().joined(separator: ":") }

    /// The one direct room of `user` and `other` (made on first use, whatever the concurrency), for two people who
    /// share a stories group or a parcel; one closed when a parcel was their only tie opens again.
    func direct(_ c: Connection, _ user: UUID, with other: UUID) throws -> RoomRecord {
        guard other != user else { throw ChatError.invalid("A direct room needs someone else.", field: "userId") }
        guard try !Blocks(schema: "chat").between(user, other, on: c) else { throw ChatError.forbidden("You cannot message this person.") }
        guard try storage.know(c, user, other) else {
            throw ChatError.forbidden("You can message someone you share a group or a parcel with.")
        }
        let key = Self.directKey(user, other)
        let id = UUID.v7()
        if try storage.insertRoom(c, id: id, kind: .direct, name: "", topic: nil, inviteCode: nil, directKey: key, parcel: nil,
                                  createdBy: user) {
            try opened(c, id, kind: .direct, by: user, parcel: nil, members: [(user, .member), (other, .member)])
            return try member(c, id, user)
        }
        // The pair's room exists (perhaps made this instant by the other): both are in it again.
        guard let existing = try storage.roomId(c, directKey: key) else { throw ChatError.conflict("Try again.") }
        if try storage.reopen(c, existing) { try changed(c, existing, by: user) }  // closed when a parcel was their only tie
        for person in [user, other] {
            if let joined = try storage.addMember(c, room: existing, user: person, role: .member) { try log.joined(c, room: existing, joined) }
        }
        return try member(c, existing, user)
    }

    /// Records a new room's first changes: the room itself, then each first member.
    private func opened(_ c: Connection, _ id: UUID, kind: RoomKind, by user: UUID?, parcel: UUID?, members: [(UUID, RoomRole)]) throws {
        let seq = try storage.nextSeq(c, id).change
        let room = try storage.room(c, id, reader: user ?? UUID())!
        try log.record(c, room: id, seq: seq, event: "room_created", view: RoomView(room))
        try log.outbox.add(ChatRoomCreated(roomId: id, kind: kind, createdBy: user, parcelId: parcel,
                                           seq: seq, createdAt: room.createdAt), subject: id.lowercased, on: c)
        for (member, role) in members {
            if let joined = try storage.addMember(c, room: id, user: member, role: role) { try log.joined(c, room: id, joined) }
        }
    }

    /// Joins the team room with the invite code `code` (its stored form); nothing changes for a member. Nil when no
    /// room has it.
    func join(_ c: Connection, code: String, user: UUID) throws -> RoomRecord? {
        guard let id = try storage.roomId(c, inviteCode: code) else { return nil }
        // Its owner blocked them: as if the code held nothing.
        let owners: SQL = "SELECT user_id FROM chat.members WHERE room_id = \(id) AND role = 'owner'"
        guard try !Blocks(schema: "chat").isBlocked(user, byAnyOf: owners, on: c) else { return nil }
        if let joined = try storage.addMember(c, room: id, user: user, role: .member) { try log.joined(c, room: id, joined) }
        return try member(c, id, user)
    }

    /// Renames a team room or changes its topic, by its owner.
    func update(_ c: Connection, _ id: UUID, by user: UUID, name: String?, topic: Patch<String>) throws -> RoomRecord {
        var room = try owner(c, id, user, lock: true)
        guard room.kind == .team else { throw ChatError.conflict("Only a team room has a name and a topic.") }
        if let name { room.name = name }
        if topic.isPresent { room.topic = topic.value.flatMap { $0.isEmpty ? nil : $0 } }
        try storage.updateRoom(c, room)
        try changed(c, id, by: user)
        return try member(c, id, user)
    }

    /// A new invite code for a team room (the old one stops working), by its owner.
    func rotateInviteCode(_ c: Connection, _ id: UUID, by user: UUID) throws -> RoomRecord {
        var room = try owner(c, id, user, lock: true)
        guard room.kind == .team else { throw ChatError.conflict("Only a team room has an invite code.") }
        room.inviteCode = InviteCode.generate()
        try storage.updateRoom(c, room)
        return try member(c, id, user)
    }

    /// `target` leaves (when it is `user`) or is removed by the owner; their streams of the room end.
    func remove(_ c: Connection, _ id: UUID, member target: UUID, by user: UUID) throws {
        let room = try member(c, id, user, lock: true)
        let leaving = target == user
        if !leaving && room.role != .owner { throw ChatError.forbidden("Only the room's owner can remove members.") }
        if room.kind == .parcel { throw ChatError.conflict("A parcel's conversation cannot be left.") }
        guard try removeMember(c, id, target, leaving ? .left : .removed, by: user) else {
            throw ChatError.invalid("That person is not a member.", field: "userId")
        }
    }

    /// Takes `target` out of room `id` and records it; false when they were not a member.
    private func removeMember(_ c: Connection, _ id: UUID, _ target: UUID, _ reason: LeaveReason, by user: UUID) throws -> Bool {
        let person = try storage.members(c, of: id).first { $0.person.id == target }?.person
        guard let person, try storage.removeMember(c, room: id, user: target) else { return false }
        let seq = try storage.nextSeq(c, id).change
        let now = Date()
        try log.record(c, room: id, seq: seq, event: "member_left",
                       view: MembershipView(roomId: id, user: PersonView(person, urls: log.urls), role: nil, reason: reason.rawValue, at: now))
        try log.outbox.add(ChatMemberLeft(roomId: id, userId: target, reason: reason, removedBy: user, seq: seq, leftAt: now),
                           subject: id.lowercased, on: c)
        return true
    }

    /// Records that a room's name, topic or state changed.
    private func changed(_ c: Connection, _ id: UUID, by user: UUID?) throws {
        let seq = try storage.nextSeq(c, id).change
        guard let room = try storage.room(c, id, reader: user ?? UUID()) else { return }
        try log.record(c, room: id, seq: seq, event: "room_updated", view: RoomView(room))
        try log.outbox.add(ChatRoomUpdated(roomId: id, updatedBy: user, readOnly: room.readOnly, seq: seq,
                                           updatedAt: room.updatedAt), subject: id.lowercased, on: c)
    }

    // MARK: Parcel conversations, from dispatch's events

    /// `parcel.created`: its sender and recipient are parties (and members of its conversation, if it is open).
    func parcelCreated(_ parcel: ParcelCreated, _ c: Connection) throws {
        let id = parcel.parcelId
        try storage.addParcelParty(c, parcel: id, user: parcel.senderId, role: "sender")
        if let recipient = parcel.recipientUserId {
            try storage.addParcelParty(c, parcel: id, user: recipient, role: "recipient")
        }
        try admitParties(c, parcel: id)
    }

    /// `parcel.claimed`: the recipient who claimed it is a party (and a member of its conversation, if it is open).
    func parcelClaimed(_ claim: ParcelClaimed, _ c: Connection) throws {
        let id = claim.parcelId
        try storage.addParcelParty(c, parcel: id, user: claim.recipientUserId, role: "recipient")
        try admitParties(c, parcel: id)
    }

    /// `parcel.status`: on assignment the courier is a party and the conversation opens; when the courier's part
    /// ends (delivered, left at a centre, received, cancelled, failed) they are no longer a party: no new direct room
    /// with its sender or recipient through it (the conversation keeps them); when the parcel is received, cancelled
    /// or failed it becomes read-only. A courier taken off it before pickup (back to waiting) leaves the conversation
    /// too, removed by nobody: the next courier's conversation is not theirs to read.
    func parcelStatus(_ change: ParcelStatusChanged, _ c: Connection) throws {
        let id = change.parcelId
        switch change.to {
        case .assigned:
            guard let courier = change.courierId else { return }
            try storage.addParcelParty(c, parcel: id, user: courier, role: "courier")
            let room = UUID.v7()
            if try storage.insertRoom(c, id: room, kind: .parcel, name: "Parcel", topic: nil, inviteCode: nil, directKey: nil,
                                      parcel: id, createdBy: nil) {
                try opened(c, room, kind: .parcel, by: nil, parcel: id, members: [])
            }
            try admitParties(c, parcel: id)
        case .awaitingCourier where change.from == .assigned:
            if let courier = try courierLeaves(c, parcel: id), let room = try storage.roomId(c, parcel: id) {
                _ = try removeMember(c, room, courier, .removed, by: Erasure.nobody)
            }
        case .delivered, .readyForCollection:
            try courierLeaves(c, parcel: id)
        case .received, .cancelled, .failed:
            try courierLeaves(c, parcel: id)
            if let room = try storage.roomId(c, parcel: id), try storage.setReadOnly(c, room) { try changed(c, room, by: nil) }
        default:
            return
        }
    }

    /// The courier's part in a parcel is over: they are no longer a party, and a direct room they opened with its
    /// sender or recipient through it closes (read-only) unless the two still know each other otherwise (a group,
    /// another parcel). It opens again if they come to know each other again (`direct`).
    @discardableResult
    private func courierLeaves(_ c: Connection, parcel: UUID) throws -> UUID? {
        guard let (courier, others) = try storage.removeCourierParty(c, parcel: parcel) else { return nil }
        for other in others where try !storage.know(c, courier, other) {
            if let room = try storage.roomId(c, directKey: Self.directKey(courier, other)), try storage.setReadOnly(c, room) {
                try changed(c, room, by: nil)
            }
        }
        return courier
    }

    /// Makes every known party of a parcel a member of its conversation, once it exists.
    private func admitParties(_ c: Connection, parcel: UUID) throws {
        guard let (room, joined) = try storage.admitParties(c, parcel: parcel) else { return }
        for member in joined { try log.joined(c, room: room, member) }
    }

    // MARK: What chat learns from auth and stories

    /// `group.created`, `group.member_joined`, `group.member_left`: who shares a stories group with whom (a journal
    /// is shared with nobody).
    func groupCreated(_ g: GroupCreated, _ c: Connection) throws {
        guard g.kind == .group else { return }
        try storage.addGroupMember(c, group: g.groupId, user: g.createdBy)
    }

    func memberJoined(_ g: GroupMemberJoined, _ c: Connection) throws {
        try storage.addGroupMember(c, group: g.groupId, user: g.userId)
    }

    func memberLeft(_ g: GroupMemberLeft, _ c: Connection) throws {
        try storage.removeGroupMember(c, group: g.groupId, user: g.userId)
    }
}
