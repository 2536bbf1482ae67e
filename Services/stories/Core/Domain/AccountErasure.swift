import Events
import Features
import Foundation
import Models
import Postgres
import Web

/// What stories does when an account is erased (`user.deleted`): the person's stories (with their photos and the
/// comments on them) and comments go; a group they ran passes to its longest member, one nobody else is in goes
/// (their journals with it); their habits go; the newsletters already compiled lose what was theirs; their name, face
/// and images are forgotten.
struct AccountErasure: Sendable {
    let storage: StoriesStorage
    let media: MediaStore

    func userDeleted(_ event: ReceivedEvent, _ c: Connection) throws {
        let user = try event.decode(UserDeleted.self).userId
        try storage.forget(user, on: c)
        try HabitStorage().forget(user, on: c)
        for (id, content) in try storage.newsletters(c, naming: user) {
            let document = try JSONDecoder().decode(NewsletterDocument.self, from: Data(content.utf8)).without([user])
            try storage.replaceNewsletter(c, id, content: String(decoding: JSON.encode(document), as: UTF8.self),
                                          storyCount: document.storyCount)
        }
        try media.forget(owner: user, on: c)
        try Profiles(schema: "stories").forget(user, on: c)
        try Blocks(schema: "stories").forget(user, on: c)
        try Reports(schema: "stories").forget(user, on: c)
        try Erasure.forget(user, schema: "stories", on: c)
    }
}

extension StoriesStorage {
    /// Erases what names `user` in stories' own tables (their images and profile are the kit's).
    func forget(_ user: UUID, on c: Connection) throws {
        try c.execute("DELETE FROM stories.stories WHERE author_id = \(user)")
        try c.execute("DELETE FROM stories.comments WHERE author_id = \(user)")
        let theirs: [UUID] = try c.rows("SELECT group_id FROM stories.memberships WHERE user_id = \(user)").map { try $0["group_id"] }
        // A group they ran with nobody else running it: its longest member runs it now.
        try Succession.promoteHeirs(c, table: "stories.memberships", container: "group_id", role: "admin", leaving: user)
        try c.execute("DELETE FROM stories.memberships WHERE user_id = \(user)")
        // What they created is credited to whoever runs it now; what nobody is left in goes (their journals too).
        try c.execute("""
            UPDATE stories.groups g SET created_by = heir.user_id FROM (
                SELECT DISTINCT ON (group_id) group_id, user_id FROM stories.memberships
                ORDER BY group_id, role = 'admin' DESC, joined_at, user_id) heir
            WHERE g.created_by = \(user) AND heir.group_id = g.id
            """)
        try c.execute("""
            DELETE FROM stories.groups g WHERE (g.created_by = \(user) OR g.id = ANY(\(PostgresArray(theirs))::uuid[]))
                AND NOT EXISTS (SELECT 1 FROM stories.memberships m WHERE m.group_id = g.id)
            """)
        try c.execute("""
            UPDATE stories.groups SET image_media_id = NULL WHERE image_media_id IN (SELECT id FROM stories.media WHERE owner_id = \(user))
            """)
        try c.execute("DELETE FROM stories.join_failures WHERE user_id = \(user)")
        try c.execute("DELETE FROM stories.hidden_authors WHERE user_id = \(user) OR author_id = \(user)")
    }

    /// The newsletters whose document names `id` (a person, a story).
    func newsletters(_ c: Connection, naming id: UUID) throws -> [(UUID, String)] {
        try c.rows("SELECT id, content FROM stories.newsletters WHERE strpos(content, \(id.lowercased)) > 0")
            .map { (try $0["id"], try $0["content"]) }
    }

    func replaceNewsletter(_ c: Connection, _ id: UUID, content: String, storyCount: Int) throws {
        try c.execute("UPDATE stories.newsletters SET content = \(content), story_count = \(storyCount) WHERE id = \(id)")
    }
}
