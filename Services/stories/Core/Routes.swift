import Features
import HTTP
import Web

/// The stories API: the table of routes, nothing else. Every route needs a bearer token.
func makeRoutes(_ h: StoriesHandlers, _ auth: any Authenticator, moderators: SharedSecret, services: SharedSecret) -> Router {
    var r = Router()
    r.addExport(services: services) { user in try h.pool.withConnection { try h.storage.export($0, user, media: h.media) } }
    r.add("POST", "/v1/groups", summary: "Create a group; the creator is its administrator", body: CreateGroupBody.self,
          response: (201, GroupView.shape), auth: auth, h.createGroup)
    r.add("GET", "/v1/groups", summary: "My groups and journals, newest first", response: (200, PageResponse<GroupView>.shape), auth: auth, h.listGroups)
    r.add("GET", "/v1/groups/{id}", summary: "A group with its members", response: (200, GroupView.shape), auth: auth, h.getGroup)
    r.add("PATCH", "/v1/groups/{id}", summary: "Rename, set the image or the newsletter schedule (administrator)",
          body: UpdateGroupBody.self, response: (200, GroupView.shape), auth: auth, h.updateGroup)
    r.add("POST", "/v1/groups/join", summary: "Join a group by its invite code", body: JoinBody.self,
          response: (200, GroupView.shape), auth: auth, h.join)
    r.add("POST", "/v1/groups/{id}/invite-code", summary: "Replace the invite code (administrator)",
          response: (200, GroupView.shape), auth: auth, h.rotateInviteCode)
    r.add("DELETE", "/v1/groups/{id}/members/{userId}", summary: "Remove a member (administrator) or leave",
          response: (204, nil), auth: auth, h.removeMember)
    r.add("PUT", "/v1/groups/{id}/newsletter-delivery", summary: "How I take this group's newsletter: off, in the app, or by e-mail too",
          body: NewsletterDeliveryBody.self, response: (200, GroupView.shape), auth: auth, h.setNewsletterDelivery)
    r.add("GET", "/v1/users/me/hidden-authors", summary: "The people whose stories I would rather not see, the latest first",
          response: (200, PageResponse<HiddenAuthorView>.shape), auth: auth, h.hiddenAuthors)
    r.add("PUT", "/v1/users/me/hidden-authors/{userId}", summary: "Hide someone's stories from my streams and newsletters",
          response: (204, nil), auth: auth, h.hideAuthor)
    r.add("DELETE", "/v1/users/me/hidden-authors/{userId}", summary: "Show someone's stories again",
          response: (204, nil), auth: auth, h.showAuthor)
    r.add("GET", "/v1/groups/{id}/stories", summary: "A group's stories, newest first, optionally from/to",
          response: (200, PageResponse<StoryView>.shape), auth: auth, h.groupStories)
    r.add("GET", "/v1/groups/{id}/newsletter", summary: "The newsletter of a period (default: the current one); ?format=html",
          response: (200, NewsletterDocument.shape), auth: auth, h.newsletter)
    r.add("GET", "/v1/groups/{id}/newsletters", summary: "Compiled newsletters of past periods, newest first",
          response: (200, PageResponse<NewsletterSummaryView>.shape), auth: auth, h.listNewsletters)
    r.add("GET", "/v1/groups/{id}/newsletters/{newsletterId}", summary: "One compiled newsletter as stored; ?format=html",
          response: (200, NewsletterDocument.shape), auth: auth, h.storedNewsletter)
    r.add("GET", "/v1/users/me/calendar", summary: "The days I posted and my streaks, in ?timeZone= (IANA)",
          response: (200, CalendarView.shape), auth: auth, h.calendar)
    r.add("GET", "/v1/users/me/stories", summary: "All the stories I have woven, across my groups and journals, newest first",
          response: (200, PageResponse<StoryView>.shape), auth: auth, h.myStories)
    r.add("POST", "/v1/journals", summary: "Create another private journal", body: CreateJournalBody.self,
          response: (201, GroupView.shape), auth: auth, h.createJournal)
    r.add("POST", "/v1/media", summary: "Upload a JPEG, PNG, HEIC or WebP image (raw body, 10 MiB at most)",
          bodyLimit: MediaStore.limit, response: (201, MediaView.shape), auth: auth, h.uploadMedia)
    r.query("POST", "/v1/media", [h.media.purposeParameter])
    r.addImage("/v1/media/{id}", summary: "The image bytes, by the signed URL a view gave, or for its owner and the members it was shared with",
               auth: auth, urls: h.media.urls, h.getMedia)
    r.addImage(MediaURLs.avatarPattern, summary: "Someone's avatar, by the signed URL a view of them gave: only an image they uploaded as their avatar",
               auth: auth, urls: h.media.urls, h.getAvatar)
    r.add("POST", "/v1/stories", summary: "Post a story to some of my groups", body: CreateStoryBody.self,
          response: (201, StoryView.shape), auth: auth, h.createStory)
    r.add("GET", "/v1/stories/{id}", summary: "A story", response: (200, StoryView.shape), auth: auth, h.getStory)
    r.add("PATCH", "/v1/stories/{id}", summary: "Change a story (author)", body: UpdateStoryBody.self,
          response: (200, StoryView.shape), auth: auth, h.updateStory)
    r.add("DELETE", "/v1/stories/{id}", summary: "Delete a story (author)", response: (204, nil), auth: auth, h.deleteStory)
    r.add("POST", "/v1/stories/{id}/reports", summary: "Report a story to the moderators", body: ReportBody.self,
          response: (201, ReportView.shape), auth: auth, h.reportStory)
    // Without OPERATOR_TOKEN (the moderators' credential here) the queue of reports does not exist (404).
    r.addModeration("stories", what: "story", moderators: moderators, pool: h.pool, reports: Reports(schema: "stories"),
                    takeDown: h.stories.takeDown)
    r.add("POST", "/v1/stories/{id}/comments", summary: "Comment on a story", body: CommentBody.self,
          response: (201, CommentView.shape), auth: auth, h.addComment)
    r.add("GET", "/v1/stories/{id}/comments", summary: "A story's comments, oldest first",
          response: (200, PageResponse<CommentView>.shape), auth: auth, h.listComments)
    r.query("GET", "/v1/groups", QueryParameter.page)
    r.query("GET", "/v1/groups/{id}/stories", QueryParameter.page + [QueryParameter("from", .dateTime, "Stories from this time"),
                                                                     QueryParameter("to", .dateTime, "Stories before this time")])
    r.query("GET", "/v1/groups/{id}/newsletter", [QueryParameter("from", .dateTime, "The period's start"), QueryParameter("to", .dateTime, "The period's end"),
                                                  QueryParameter("format", .oneOf(["json", "html"]), "JSON, or the rendered HTML", default: "json")])
    if services.isEnabled {
        r.add("GET", "/v1/internal/users/{userId}/avatars/{id}",
              summary: "Services: 204 if the image is one the user uploaded as their avatar, 404 otherwise (auth asks before it accepts an avatarMediaId)",
              response: (204, nil), trusted: services, h.checkAvatar)
        r.add("GET", "/v1/internal/newsletters/{newsletterId}/copies/{userId}",
              summary: "Services: a stored newsletter as a member sees it, ready to mail (404 for one no longer a member)",
              response: (200, NewsletterCopyView.shape), trusted: services, h.newsletterCopy)
    }
    r.query("GET", "/v1/groups/{id}/newsletters", QueryParameter.page)
    r.query("GET", "/v1/groups/{id}/newsletters/{newsletterId}", [QueryParameter("format", .oneOf(["json", "html"]), "JSON, or the rendered HTML", default: "json")])
    r.query("GET", "/v1/users/me/calendar", [QueryParameter("from", Shapes.day, "First day (default: this month's first)"),
                                             QueryParameter("to", Shapes.day, "Last day (default: today)"),
                                             QueryParameter("timeZone", .string(max: 64), "An IANA time zone for the days", default: "UTC")])
    r.query("GET", "/v1/stories/{id}/comments", QueryParameter.page)
    r.query("GET", "/v1/users/me/stories", QueryParameter.page)
    r.query("GET", "/v1/users/me/hidden-authors", QueryParameter.page)
    r.alsoAnswers("GET", "/v1/groups/{id}/newsletter", 200, contentType: "text/html; charset=utf-8")
    r.alsoAnswers("GET", "/v1/groups/{id}/newsletters/{newsletterId}", 200, contentType: "text/html; charset=utf-8")
    r.idempotent("POST", ["/v1/groups", "/v1/journals", "/v1/media", "/v1/stories", "/v1/stories/{id}/comments"])
    return r
}
