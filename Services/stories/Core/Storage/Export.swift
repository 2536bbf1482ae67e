import Features
import Foundation
import Postgres

extension StoriesStorage {
    /// What stories holds of `user`, for their export: groups and journals (with how they take each newsletter),
    /// stories, comments, images, the people whose stories they hide, and their habits with the days they did them.
    func export(_ c: Connection, _ user: UUID, media: MediaStore) throws -> [String: Any] {
        try Export.document(c, """
            SELECT json_build_object(
                'groups', (SELECT coalesce(json_agg(json_build_object('id', g.id, 'kind', g.kind, 'name', g.name, 'role', m.role,
                                                                      'newsletterDelivery', m.newsletter, 'joinedAt', m.joined_at) ORDER BY m.joined_at), '[]'::json)
                           FROM stories.memberships m JOIN stories.groups g ON g.id = m.group_id WHERE m.user_id = \(user)),
                'stories', (SELECT coalesce(json_agg(json_build_object('id', s.id, 'text', s.text, 'backgroundColor', s.background_color,
                               'createdAt', s.created_at, 'updatedAt', s.updated_at,
                               'place', CASE WHEN s.place_name IS NOT NULL THEN json_build_object('name', s.place_name,
                                   'latitude', s.place_latitude, 'longitude', s.place_longitude, 'precision', s.place_precision) END,
                               'promptId', s.prompt_id,
                               'groupIds', (SELECT coalesce(json_agg(sg.group_id), '[]'::json) FROM stories.story_groups sg WHERE sg.story_id = s.id),
                               'imageIds', (SELECT coalesce(json_agg(sm.media_id ORDER BY sm.position), '[]'::json)
                                            FROM stories.story_media sm WHERE sm.story_id = s.id)) ORDER BY s.created_at), '[]'::json)
                            FROM stories.stories s WHERE s.author_id = \(user)),
                'comments', (SELECT coalesce(json_agg(json_build_object('id', id, 'storyId', story_id, 'text', text, 'createdAt', created_at)
                                                      ORDER BY created_at), '[]'::json) FROM stories.comments WHERE author_id = \(user)),
                'images', (SELECT coalesce(json_agg(json_build_object('id', id, 'contentType', content_type, 'size', size, 'createdAt', created_at)
                                                    ORDER BY created_at), '[]'::json) FROM stories.media WHERE owner_id = \(user)),
                'hiddenAuthors', (SELECT coalesce(json_agg(json_build_object('userId', author_id, 'hiddenAt', hidden_at) ORDER BY hidden_at),
                                                  '[]'::json) FROM stories.hidden_authors WHERE user_id = \(user)),
                'habits', (SELECT coalesce(json_agg(json_build_object('id', h.id, 'title', h.title, 'target', h.target_count, 'per', h.target_per,
                               'timeZone', h.time_zone, 'createdAt', h.created_at, 'updatedAt', h.updated_at,
                               'days', (SELECT coalesce(json_agg(json_build_object('date', d.day, 'storyId', d.story_id, 'markedAt', d.marked_at)
                                                                 ORDER BY d.day), '[]'::json) FROM stories.habit_days d WHERE d.habit_id = h.id),
                               'sharedGroupIds', (SELECT coalesce(json_agg(hs.group_id ORDER BY hs.shared_at), '[]'::json)
                                                  FROM stories.habit_shares hs WHERE hs.habit_id = h.id)) ORDER BY h.created_at), '[]'::json)
                           FROM stories.habits h WHERE h.owner_id = \(user))
            )::text AS export
            """, media: media)
    }
}
