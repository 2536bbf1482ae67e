import Events
import Features
import Foundation
import Models
import Postgres
import Web

/// What the group, story and profile rules refuse.
enum StoriesError: DomainError, Equatable {
    /// No such group or story, or the caller is not in it (outsiders learn nothing).
    case notFound
    /// A member doing what only an administrator may.
    case notAdmin
    /// Someone other than the author changing a story.
    case notAuthor(verb: String)
    /// A journal has no invite code and cannot be left.
    case journal(String)
    /// The person to remove is not a member.
    case notAMember
    /// No group has the invite code.
    case unknownInviteCode
    /// A story posted to a group the author is not in.
    case notInGroups
    /// A story with neither text nor media.
    case emptyStory
    /// The same id twice in a list.
    case repeated(field: String, index: Int, id: UUID)
    /// A random code collided; the client may try again.
    case collision(String)

    var refusal: Refusal {
        switch self {
        case .notFound, .notAMember, .unknownInviteCode, .notInGroups: return .notFound
        case .notAdmin, .notAuthor: return .forbidden
        case .journal, .collision: return .conflict
        case .emptyStory, .repeated: return .invalid
        }
    }

    var message: String {
        switch self {
        case .notFound: return "Not found."
        case .notAdmin: return "Only an administrator can do this."
        case .notAuthor(let verb): return "Only the author can \(verb) a story."
        case .journal(let message): return message
        case .notAMember: return "That person is not a member."
        case .unknownInviteCode: return "No group has that invite code."
        case .notInGroups: return "One of the groups does not exist or you are not in it."
        case .emptyStory: return "A story needs text or media."
        case .repeated(let field, _, let id): return "\(field) repeats \(id.lowercased)."
        case .collision(let message): return message
        }
    }

    var field: String? {
        switch self {
        case .emptyStory: return "text"
        case .repeated(let field, let index, _): return "\(field)[\(index)]"
        default: return nil
        }
    }
}

/// The group rules: who is in a group and who administers it, creating, joining by invite code, rotating the code,
/// leaving and removing, each with its event. Handlers and the profile consumer call them in a transaction.
struct Groups: Sendable {
    let storage: StoriesStorage
    let outbox: Outbox

    /// The group if `user` is a member; `notFound` otherwise.
    func member(_ c: Connection, _ id: UUID, _ user: UUID, lock: Bool = false) throws -> GroupRecord {
        guard let group = try storage.group(c, id, reader: user, lock: lock), group.role != nil else { throw StoriesError.notFound }
        return group
    }

    /// The group if `user` administers it; `notFound` for outsiders, `notAdmin` for other members.
    func admin(_ c: Connection, _ id: UUID, _ user: UUID, lock: Bool = false) throws -> GroupRecord {
        let group = try member(c, id, user, lock: lock)
        guard group.role == "admin" else { throw StoriesError.notAdmin }
        return group
    }

    /// A new group (with an invite code) or journal, its creator its administrator.
    func create(_ c: Connection, kind: GroupKind, name: String, image: UUID?, creator: UUID, defaultJournal: Bool = false) throws -> GroupRecord {
        guard let group = try storage.createGroup(c, kind: kind, name: name, image: image,
                                                  inviteCode: kind == .group ? InviteCode.generate() : nil, creator: creator,
                                                  defaultJournal: defaultJournal) else {
            throw StoriesError.collision("Could not create the \(kind); try again.")
        }
        try outbox.add(GroupCreated(groupId: group.id, kind: kind, name: group.name,
                                    createdBy: group.createdBy, createdAt: group.createdAt),
                       subject: group.id.lowercased, on: c)
        return group
    }

    /// Adds `user` to the group with the invite code `code` (its stored form); nothing changes for a member. Nil when
    /// no group has it.
    func join(_ c: Connection, code: String, user: UUID) throws -> GroupRecord? {
        guard let group = try storage.groupByInviteCode(c, code, reader: user) else { return nil }
        // Someone who runs it blocked them: as if the code held nothing.
        let admins: SQL = "SELECT user_id FROM stories.memberships WHERE group_id = \(group.id) AND role = 'admin'"
        guard try !Blocks(schema: "stories").isBlocked(user, byAnyOf: admins, on: c) else { return nil }
        if group.role == nil, let joinedAt = try storage.addMember(c, group: group.id, user: user) {
            try outbox.add(GroupMemberJoined(groupId: group.id, userId: user, role: .member,
                                             joinedAt: joinedAt), subject: group.id.lowercased, on: c)
        }
        guard let joined = try storage.group(c, group.id, reader: user) else { throw StoriesError.unknownInviteCode }
        return joined
    }

    /// A new invite code (the old one stops working), by an administrator.
    func rotateInviteCode(_ c: Connection, _ id: UUID, by user: UUID) throws -> GroupRecord {
        var group = try admin(c, id, user, lock: true)
        guard group.kind == .group else { throw StoriesError.journal("A journal has no invite code.") }
        group.inviteCode = InviteCode.generate()
        try storage.updateGroup(c, group)
        guard let updated = try storage.group(c, id, reader: user) else { throw StoriesError.notFound }
        return updated
    }

    /// `target` leaves (when it is `user`) or is removed by an administrator; the group is locked so two leaving
    /// administrators cannot both leave it without one.
    func remove(_ c: Connection, _ id: UUID, member target: UUID, by user: UUID) throws {
        let group = try member(c, id, user, lock: true)
        let leaving = target == user
        if !leaving && group.role != "admin" { throw StoriesError.notAdmin }
        if group.kind == .journal { throw StoriesError.journal("A journal cannot be left.") }
        let outcome = try storage.removeMember(c, group: id, user: target)
        guard outcome.removed else { throw StoriesError.notAMember }
        try outbox.add(GroupMemberLeft(groupId: id, userId: target, reason: leaving ? .left : .removed,
                                       removedBy: user, newAdminId: outcome.newAdmin,
                                       leftAt: Date()), subject: id.lowercased, on: c)
    }

    // MARK: Profiles, from auth's events

    /// `user.registered` and `user.updated`: remember the names and avatars members see, and open a new user's
    /// journal (once, whatever the replays).
    func profile(_ event: ReceivedEvent, _ c: Connection) throws {
        guard let (user, registered) = try Profiles(schema: "stories").apply(event, on: c), registered else { return }
        do {
            _ = try create(c, kind: .journal, name: "Journal", image: nil, creator: user, defaultJournal: true)
        } catch StoriesError.collision {
            // The default journal exists already: a replay.
        }
    }
}

/// `ids` with none repeated; else `repeated` naming the first repetition.
func unique(_ ids: [UUID], field: String) throws -> [UUID] {
    var seen = Set<UUID>()
    for (i, id) in ids.enumerated() where !seen.insert(id).inserted { throw StoriesError.repeated(field: field, index: i, id: id) }
    return ids
}
