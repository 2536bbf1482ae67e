import Features
import HTTP
import Web

/// The stories API: the table of routes, nothing else. Every route needs a bearer token.
func makeRoutes(_ h: StoriesHandlers, _ auth: any Authenticator, moderators: SharedSecret, services: SharedSecret) -> Router {
    var r = Router()
    r.addExport(services: services) { user in try h.pool.withConnection { try h.storage.export($0, user, media: h.media) } }
    let format = QueryParameter("format", .oneOf(["json", "html"]), "JSON, or the rendered HTML", default: "json")
    let html = RouteGroup<Caller>.Also.answer(200, contentType: "text/html; charset=utf-8")
    r.group("/v1/groups", .user(auth)) { groups in
        groups.add("POST", "", "Create a group; the creator is its administrator", body: CreateGroupBody.self,
                   answers: (201, GroupView.shape), idempotent: h.idempotency, h.createGroup)
        groups.add("GET", "", "My groups and journals, newest first", answers: (200, PageResponse<GroupView>.shape),
                   query: QueryParameter.page, h.listGroups)
        groups.add("GET", "/{id}", "A group with its members", answers: (200, GroupView.shape), h.getGroup)
        groups.add("PATCH", "/{id}", "Rename, set the image or the newsletter schedule (administrator)", body: UpdateGroupBody.self,
                   answers: (200, GroupView.shape), h.updateGroup)
        groups.add("POST", "/join", "Join a group by its invite code", body: JoinBody.self, answers: (200, GroupView.shape), h.join)
        groups.add("POST", "/{id}/invite-code", "Replace the invite code (administrator)", answers: (200, GroupView.shape),
                   h.rotateInviteCode)
        groups.add("DELETE", "/{id}/members/{userId}", "Remove a member (administrator) or leave", answers: (204, nil), h.removeMember)
        groups.add("PUT", "/{id}/newsletter-delivery", "How I take this group's newsletter: off, in the app, or by e-mail too",
                   body: NewsletterDeliveryBody.self, answers: (200, GroupView.shape), h.setNewsletterDelivery)
        groups.add("GET", "/{id}/stories", "A group's stories, newest first, optionally from/to",
                   answers: (200, PageResponse<StoryView>.shape),
                   query: QueryParameter.page + [QueryParameter("from", .dateTime, "Stories from this time"),
                                                 QueryParameter("to", .dateTime, "Stories before this time")], h.groupStories)
        groups.add("GET", "/{id}/newsletter", "The newsletter of a period (default: the current one); ?format=html",
                   answers: (200, NewsletterDocument.shape),
                   query: [QueryParameter("from", .dateTime, "The period's start"), QueryParameter("to", .dateTime, "The period's end"), format],
                   also: [html], h.newsletter)
        groups.add("GET", "/{id}/prompt", "The prompt my group is offered this period, the same for every member; ?language=",
                   answers: (200, PromptView.shape), query: [promptLanguage], h.groupPrompt)
        groups.add("GET", "/{id}/newsletters", "Compiled newsletters of past periods, newest first",
                   answers: (200, PageResponse<NewsletterSummaryView>.shape), query: QueryParameter.page, h.listNewsletters)
        groups.add("GET", "/{id}/newsletters/{newsletterId}", "One compiled newsletter as stored; ?format=html",
                   answers: (200, NewsletterDocument.shape), query: [format], also: [html], h.storedNewsletter)
    }
    r.group("/v1/users/me", .user(auth)) { me in
        me.add("GET", "/hidden-authors", "The people whose stories I would rather not see, the latest first",
               answers: (200, PageResponse<HiddenAuthorView>.shape), query: QueryParameter.page, h.hiddenAuthors)
        me.add("PUT", "/hidden-authors/{userId}", "Hide someone's stories from my streams and newsletters", answers: (204, nil),
               h.hideAuthor)
        me.add("DELETE", "/hidden-authors/{userId}", "Show someone's stories again", answers: (204, nil), h.showAuthor)
        me.add("GET", "/calendar", "The days I posted and my streaks, in ?timeZone= (IANA)", answers: (200, CalendarView.shape),
               query: [QueryParameter("from", Shapes.day, "First day (default: this month's first)"),
                       QueryParameter("to", Shapes.day, "Last day (default: today)"),
                       QueryParameter("timeZone", .string(max: 64), "An IANA time zone for the days", default: "UTC")], h.calendar)
        me.add("GET", "/stories", "All the stories I have woven, across my groups and journals, newest first",
               answers: (200, PageResponse<StoryView>.shape), query: QueryParameter.page, h.myStories)
    }
    r.group("/v1", .user(auth)) { v1 in
        v1.add("POST", "/journals", "Create another private journal", body: CreateJournalBody.self, answers: (201, GroupView.shape),
               idempotent: h.idempotency, h.createJournal)
        // The upload keeps its answer through Idempotency itself: its body is the image, read raw.
        v1.add("POST", "/media", "Upload a JPEG, PNG, HEIC or WebP image (raw body, 10 MiB at most)", answers: (201, MediaView.shape),
               query: [h.media.purposeParameter], bodyLimit: MediaStore.limit, idempotent: true, h.uploadMedia)
    }
    r.addImage("/v1/media/{id}", summary: "The image bytes, by the signed URL a view gave, or for its owner and the members it was shared with",
               auth: auth, urls: h.media.urls, h.getMedia)
    r.addImage(MediaURLs.avatarPattern, summary: "Someone's avatar, by the signed URL a view of them gave: only an image they uploaded as their avatar",
               auth: auth, urls: h.media.urls, h.getAvatar)
    r.group("/v1/stories", .user(auth)) { stories in
        stories.add("POST", "", "Post a story to some of my groups", body: CreateStoryBody.self, answers: (201, StoryView.shape),
                    idempotent: h.idempotency, h.createStory)
        stories.add("GET", "/{id}", "A story", answers: (200, StoryView.shape), h.getStory)
        stories.add("PATCH", "/{id}", "Change a story (author)", body: UpdateStoryBody.self, answers: (200, StoryView.shape), h.updateStory)
        stories.add("DELETE", "/{id}", "Delete a story (author)", answers: (204, nil), h.deleteStory)
        stories.add("POST", "/{id}/reports", "Report a story to the moderators", body: ReportBody.self, answers: (201, ReportView.shape),
                    h.reportStory)
        stories.add("POST", "/{id}/comments", "Comment on a story", body: CommentBody.self, answers: (201, CommentView.shape),
                    idempotent: h.idempotency, h.addComment)
        stories.add("GET", "/{id}/comments", "A story's comments, oldest first", answers: (200, PageResponse<CommentView>.shape),
                    query: QueryParameter.page, h.listComments)
    }
    r.group("/v1/habits", .user(auth)) { habits in
        habits.add("POST", "", "Set myself a habit: done once a day, or on some days of each week", body: CreateHabitBody.self,
                   answers: (201, HabitView.shape), idempotent: h.idempotency, h.createHabit)
        habits.add("GET", "", "My habits (50 at most), oldest first, with their streaks", answers: (200, ItemList<HabitView>.shape),
                   h.listHabits)
        habits.add("GET", "/{id}", "A habit of mine with its streaks", answers: (200, HabitView.shape), h.getHabit)
        habits.add("PATCH", "/{id}", "Rename a habit, or change its target or time zone", body: UpdateHabitBody.self,
                   answers: (200, HabitView.shape), h.updateHabit)
        habits.add("DELETE", "/{id}", "Delete a habit with its days", answers: (204, nil), h.deleteHabit)
        habits.add("PUT", "/{id}/days/{date}", "Mark a day (YYYY-MM-DD in the habit's time zone, a year back at most) done, alone or with a story of mine",
                   body: MarkDayBody.self, answers: (200, HabitView.shape), h.markHabitDay)
        habits.add("DELETE", "/{id}/days/{date}", "The day is not done after all", answers: (204, nil), h.unmarkHabitDay)
        habits.add("GET", "/{id}/calendar", "The days a habit was done in a month, and its streaks", answers: (200, HabitCalendarView.shape),
                   query: [QueryParameter("month", .string(max: 7, pattern: "^[0-9]{4}-[0-9]{2}$"),
                                          "YYYY-MM (default: this month in the habit's time zone)")], h.habitCalendar)
        habits.add("PUT", "/{id}/shares/{groupId}", "Show the habit's streak in a group's newsletter (a group I am in)",
                   answers: (200, HabitView.shape), h.shareHabit)
        habits.add("DELETE", "/{id}/shares/{groupId}", "Stop showing the habit's streak in a group's newsletter", answers: (204, nil),
                   h.unshareHabit)
    }
    // Without OPERATOR_TOKEN (the moderators' credential here) the queue of reports does not exist (404).
    r.addModeration("stories", what: "story", moderators: moderators, pool: h.pool, reports: Reports(schema: "stories"),
                    takeDown: h.stories.takeDown)
    if services.isEnabled {
        r.group("/v1/internal", .trusted(services)) { trusted in
            trusted.add("GET", "/users/{userId}/avatars/{id}",
                        "Services: 204 if the image is one the user uploaded as their avatar, 404 otherwise (auth asks before it accepts an avatarMediaId)",
                        answers: (204, nil), h.checkAvatar)
            trusted.add("GET", "/newsletters/{newsletterId}/copies/{userId}",
                        "Services: a stored newsletter as a member sees it, ready to mail (404 for one no longer a member)",
                        answers: (200, NewsletterCopyView.shape), h.newsletterCopy)
        }
    }
    return r
}
