import Features
import Foundation
import Postgres

extension CurationStorage {
    /// What curation holds of `user`, for their export: likes, what they watched, comments, playlists, preferences.
    func export(_ c: Connection, _ user: UUID) throws -> [String: Any] {
        try Export.document(c, """
            SELECT json_build_object(
                'likes', (SELECT coalesce(json_agg(json_build_object('videoId', video_id, 'createdAt', created_at) ORDER BY created_at), '[]'::json)
                          FROM curation.likes WHERE user_id = \(user)),
                'watched', (SELECT coalesce(json_agg(json_build_object('videoId', video_id, 'seconds', seconds, 'completed', completed,
                                                                       'watchedAt', watched_at) ORDER BY watched_at), '[]'::json)
                            FROM curation.watches WHERE user_id = \(user)),
                'comments', (SELECT coalesce(json_agg(json_build_object('id', id, 'videoId', video_id, 'text', text, 'createdAt', created_at)
                                                      ORDER BY created_at), '[]'::json) FROM curation.comments WHERE author_id = \(user)),
                'playlists', (SELECT coalesce(json_agg(json_build_object('id', p.id, 'name', p.name, 'description', p.description,
                                  'public', p.public, 'createdAt', p.created_at,
                                  'videoIds', (SELECT coalesce(json_agg(i.video_id ORDER BY i.position), '[]'::json)
                                               FROM curation.playlist_items i WHERE i.playlist_id = p.id)) ORDER BY p.created_at), '[]'::json)
                              FROM curation.playlists p WHERE p.owner_id = \(user)),
                'preferences', (SELECT json_build_object('theme', theme, 'autoplay', autoplay) FROM curation.preferences WHERE user_id = \(user))
            )::text AS export
            """)
    }
}
