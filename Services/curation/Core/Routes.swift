import Features
import HTTP
import Web

/// The curation API: the table of routes, nothing else. Catalogue reads are public (a token adds what the reader
/// did); everything personal needs a user's bearer token.
func makeRoutes(_ h: CurationHandlers, _ auth: any Authenticator, moderators: SharedSecret, services: SharedSecret) -> Router {
    var r = Router()
    r.addExport(services: services) { user in try h.pool.withConnection { try h.storage.export($0, user) } }
    r.group("/v1", .everyone) { catalogue in
        catalogue.add("GET", "/subjects", "Every subject", answers: (200, ItemList<SubjectView>.shape), h.subjects)
        catalogue.add("GET", "/subjects/{id}/topics", "A subject's topics, in curriculum order",
                      answers: (200, ItemList<TopicView>.shape), h.topics)
        catalogue.add("GET", "/topics/{id}/videos", "A topic's starter videos: its sequence, the first unwatched first",
                      answers: (200, PageResponse<VideoView>.shape), query: QueryParameter.page, h.topicVideos)
        catalogue.add("GET", "/videos/{id}", "A video with its like and comment counts (and, with a token, whether I liked it)",
                      answers: (200, VideoView.shape), h.video)
        catalogue.add("GET", "/videos/{id}/recommendations", "Endless recommendations that never leave the video's topic",
                      answers: (200, PageResponse<VideoView>.shape), query: QueryParameter.page, h.recommendations)
        catalogue.add("GET", "/search", "Ranked full-text search of the catalogue (?q=, ?topic=)",
                      answers: (200, PageResponse<VideoView>.shape),
                      query: QueryParameter.page + [QueryParameter("q", .text(max: 200), "Words to find"),
                                                    QueryParameter("topic", .uuid, "Only within this topic")], h.search)
        catalogue.add("GET", "/videos/{id}/comments", "A video's comments, newest first",
                      answers: (200, PageResponse<CommentView>.shape), query: QueryParameter.page, h.comments)
    }
    r.group("/v1", .user(auth)) { me in
        me.add("POST", "/videos/{id}/watched", "I watched (part of) this video", body: WatchedBody.self,
               answers: (204, nil), h.watched)
        me.add("GET", "/users/me/history", "What I watched, latest first", answers: (200, PageResponse<HistoryView>.shape),
               query: QueryParameter.page, h.history)
        me.add("PUT", "/videos/{id}/like", "Like a video", answers: (204, nil), h.like)
        me.add("DELETE", "/videos/{id}/like", "Take a like back", answers: (204, nil), h.unlike)
        me.add("GET", "/users/me/likes", "What I liked, latest first", answers: (200, PageResponse<VideoView>.shape),
               query: QueryParameter.page, h.likes)
        me.add("POST", "/videos/{id}/comments", "Comment on a video", body: CommentBody.self,
               answers: (201, CommentView.shape), idempotent: h.idempotency, h.addComment)
        me.add("DELETE", "/comments/{id}", "Delete my comment", answers: (204, nil), h.deleteComment)
        me.add("POST", "/comments/{id}/reports", "Report a comment to the operators", body: ReportBody.self,
               answers: (201, ReportView.shape), h.reportComment)
    }
    // Without OPERATOR_TOKEN (the moderators' credential here) the queue of reports does not exist (404).
    r.addModeration("curation", what: "comment", moderators: moderators, pool: h.pool, reports: h.library.reports, takeDown: h.library.takeDown)
    r.group("/v1/playlists", .user(auth)) { playlists in
        playlists.add("POST", "", "Create a playlist", body: CreatePlaylistBody.self, answers: (201, PlaylistView.shape),
                      idempotent: h.idempotency, h.createPlaylist)
        playlists.add("GET", "", "My playlists", answers: (200, ItemList<PlaylistView>.shape), h.myPlaylists)
        playlists.add("GET", "/{id}", "A playlist: mine, or anyone's public one", answers: (200, PlaylistView.shape), h.playlist)
        playlists.add("PATCH", "/{id}", "Rename, describe, make public or private (owner)", body: UpdatePlaylistBody.self,
                      answers: (200, PlaylistView.shape), h.updatePlaylist)
        playlists.add("DELETE", "/{id}", "Delete a playlist (owner)", answers: (204, nil), h.deletePlaylist)
        playlists.add("POST", "/{id}/items", "Add a video (owner)", body: PlaylistItemBody.self,
                      answers: (200, PlaylistView.shape), h.addItem)
        playlists.add("DELETE", "/{id}/items/{videoId}", "Remove a video (owner)", answers: (200, PlaylistView.shape),
                      h.removeItem)
        playlists.add("PUT", "/{id}/order", "Put the videos in this order (owner)", body: PlaylistOrderBody.self,
                      answers: (200, PlaylistView.shape), h.reorder)
    }
    r.group("/v1/users", .user(auth)) { people in
        people.add("GET", "/{id}/profile", "Someone's name, avatar and public playlists", answers: (200, ProfileView.shape),
                   h.profile)
        people.add("GET", "/me/preferences", "My theme and autoplay", answers: (200, PreferencesView.shape), h.preferences)
        people.add("PUT", "/me/preferences", "Set my theme and autoplay", body: PreferencesBody.self,
                   answers: (200, PreferencesView.shape), h.setPreferences)
    }
    return r
}
