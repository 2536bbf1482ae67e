import Features
import HTTP
import Web

/// The curation API: the table of routes, nothing else. Catalogue reads are public (a token adds what the reader
/// did); everything personal needs a user's bearer token.
func makeRoutes(_ h: CurationHandlers, _ auth: any Authenticator, moderators: SharedSecret, services: SharedSecret) -> Router {
    var r = Router()
    r.addExport(services: services) { user in try h.pool.withConnection { try h.storage.export($0, user) } }
    // The catalogue
    r.add("GET", "/v1/subjects", summary: "Every subject", response: (200, ItemList<SubjectView>.shape), h.subjects)
    r.add("GET", "/v1/subjects/{id}/topics", summary: "A subject's topics, in curriculum order",
          response: (200, ItemList<TopicView>.shape), h.topics)
    r.add("GET", "/v1/topics/{id}/videos", summary: "A topic's starter videos: its sequence, the first unwatched first",
          response: (200, PageResponse<VideoView>.shape), h.topicVideos)
    r.add("GET", "/v1/videos/{id}", summary: "A video with its like and comment counts (and, with a token, whether I liked it)",
          response: (200, VideoView.shape), h.video)
    r.add("GET", "/v1/videos/{id}/recommendations", summary: "Endless recommendations that never leave the video's topic",
          response: (200, PageResponse<VideoView>.shape), h.recommendations)
    r.add("GET", "/v1/search", summary: "Ranked full-text search of the catalogue (?q=, ?topic=)",
          response: (200, PageResponse<VideoView>.shape), h.search)
    r.add("GET", "/v1/videos/{id}/comments", summary: "A video's comments, newest first",
          response: (200, PageResponse<CommentView>.shape), h.comments)
    // What I do
    r.add("POST", "/v1/videos/{id}/watched", summary: "I watched (part of) this video", body: WatchedBody.self,
          response: (204, nil), auth: auth, h.watched)
    r.add("GET", "/v1/users/me/history", summary: "What I watched, latest first", response: (200, PageResponse<HistoryView>.shape),
          auth: auth, h.history)
    r.add("PUT", "/v1/videos/{id}/like", summary: "Like a video", response: (204, nil), auth: auth, h.like)
    r.add("DELETE", "/v1/videos/{id}/like", summary: "Take a like back", response: (204, nil), auth: auth, h.unlike)
    r.add("GET", "/v1/users/me/likes", summary: "What I liked, latest first", response: (200, PageResponse<VideoView>.shape),
          auth: auth, h.likes)
    r.add("POST", "/v1/videos/{id}/comments", summary: "Comment on a video", body: CommentBody.self,
          response: (201, CommentView.shape), auth: auth, h.addComment)
    r.add("DELETE", "/v1/comments/{id}", summary: "Delete my comment", response: (204, nil), auth: auth, h.deleteComment)
    r.add("POST", "/v1/comments/{id}/reports", summary: "Report a comment to the operators", body: ReportBody.self,
          response: (201, ReportView.shape), auth: auth, h.reportComment)
    // Without OPERATOR_TOKEN (the moderators' credential here) the queue of reports does not exist (404).
    r.addModeration("curation", what: "comment", moderators: moderators, pool: h.pool, reports: h.library.reports, takeDown: h.library.takeDown)
    // Playlists
    r.add("POST", "/v1/playlists", summary: "Create a playlist", body: CreatePlaylistBody.self, response: (201, PlaylistView.shape),
          auth: auth, h.createPlaylist)
    r.add("GET", "/v1/playlists", summary: "My playlists", response: (200, ItemList<PlaylistView>.shape), auth: auth, h.myPlaylists)
    r.add("GET", "/v1/playlists/{id}", summary: "A playlist: mine, or anyone's public one", response: (200, PlaylistView.shape),
          auth: auth, h.playlist)
    r.add("PATCH", "/v1/playlists/{id}", summary: "Rename, describe, make public or private (owner)", body: UpdatePlaylistBody.self,
          response: (200, PlaylistView.shape), auth: auth, h.updatePlaylist)
    r.add("DELETE", "/v1/playlists/{id}", summary: "Delete a playlist (owner)", response: (204, nil), auth: auth, h.deletePlaylist)
    r.add("POST", "/v1/playlists/{id}/items", summary: "Add a video (owner)", body: PlaylistItemBody.self,
          response: (200, PlaylistView.shape), auth: auth, h.addItem)
    r.add("DELETE", "/v1/playlists/{id}/items/{videoId}", summary: "Remove a video (owner)", response: (200, PlaylistView.shape),
          auth: auth, h.removeItem)
    r.add("PUT", "/v1/playlists/{id}/order", summary: "Put the videos in this order (owner)", body: PlaylistOrderBody.self,
          response: (200, PlaylistView.shape), auth: auth, h.reorder)
    // People
    r.add("GET", "/v1/users/{id}/profile", summary: "Someone's name, avatar and public playlists", response: (200, ProfileView.shape),
          auth: auth, h.profile)
    r.add("GET", "/v1/users/me/preferences", summary: "My theme and autoplay", response: (200, PreferencesView.shape), auth: auth,
          h.preferences)
    r.add("PUT", "/v1/users/me/preferences", summary: "Set my theme and autoplay", body: PreferencesBody.self,
          response: (200, PreferencesView.shape), auth: auth, h.setPreferences)
    r.query("GET", "/v1/topics/{id}/videos", QueryParameter.page)
    r.query("GET", "/v1/videos/{id}/recommendations", QueryParameter.page)
    r.query("GET", "/v1/search", QueryParameter.page + [QueryParameter("q", .text(max: 200), "Words to find"),
                                                        QueryParameter("topic", .uuid, "Only within this topic")])
    r.query("GET", "/v1/videos/{id}/comments", QueryParameter.page)
    r.query("GET", "/v1/users/me/history", QueryParameter.page)
    r.query("GET", "/v1/users/me/likes", QueryParameter.page)
    r.idempotent("POST", ["/v1/videos/{id}/comments", "/v1/playlists"])
    return r
}
