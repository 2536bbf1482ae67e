import Features
import Foundation
import Postgres

extension ChatStorage {
    /// What chat holds of `user`, for their export: rooms, messages, todos and images.
    func export(_ c: Connection, _ user: UUID, media: MediaStore) throws -> [String: Any] {
        try Export.document(c, """
            SELECT json_build_object(
                'rooms', (SELECT coalesce(json_agg(json_build_object('id', r.id, 'kind', r.kind, 'name', r.name, 'role', m.role,
                                                                     'joinedAt', m.joined_at) ORDER BY m.joined_at), '[]'::json)
                          FROM chat.members m JOIN chat.rooms r ON r.id = m.room_id WHERE m.user_id = \(user)),
                'messages', (SELECT coalesce(json_agg(json_build_object('id', id, 'roomId', room_id, 'seq', seq, 'text', text, 'imageIds', media_ids,
                                                                        'createdAt', created_at, 'editedAt', edited_at, 'deletedAt', deleted_at)
                                                      ORDER BY created_at), '[]'::json) FROM chat.messages WHERE author_id = \(user)),
                'todos', (SELECT coalesce(json_agg(json_build_object('id', id, 'roomId', room_id, 'title', title, 'done', done,
                                                                     'createdAt', created_at) ORDER BY created_at), '[]'::json)
                          FROM chat.todos WHERE created_by = \(user) OR assignee_id = \(user) OR done_by = \(user)),
                'images', (SELECT coalesce(json_agg(json_build_object('id', id, 'contentType', content_type, 'size', size, 'createdAt', created_at)
                                                    ORDER BY created_at), '[]'::json) FROM chat.media WHERE owner_id = \(user))
            )::text AS export
            """, media: media)
    }
}
