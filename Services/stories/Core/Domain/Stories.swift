import Events
import Features
import Foundation
import Models
import Postgres
import Web

/// The story rules: a story goes to groups its author is in, carries text or media (the author's own images), is
/// changed or deleted only by its author, and is seen and commented on by the members of its groups.
struct Stories: Sendable {
    let storage: StoriesStorage
    let outbox: Outbox
    let media: MediaStore

    /// The story if `reader` may see it; `notFound` otherwise.
    func visible(_ c: Connection, _ id: UUID, to reader: UUID, lock: Bool = false) throws -> StoryRecord {
        guard let story = try storage.story(c, id, reader: reader, lock: lock) else { throw StoriesError.notFound }
        return story
    }

    /// Posts a story to `groups` (each once, all the author's) with `text`, the author's `images` and the `place` they
    /// chose; `promptId` says it answers the current prompt of one of its groups.
    func create(_ c: Connection, by author: UUID, text: String, color: String?, place: StoryPlace? = nil, promptId: String? = nil,
                groups: [UUID], images: [UUID]) throws -> StoryRecord {
        let groups = try unique(groups, field: "groupIds")
        let images = try unique(images, field: "mediaIds")
        guard !text.isEmpty || !images.isEmpty else { throw StoriesError.emptyStory }
        guard try storage.memberGroups(c, groups, user: author).count == groups.count else { throw StoriesError.notInGroups }
        try media.requireOwned(images, by: author, field: "mediaIds", on: c)
        if let promptId {
            try GroupPrompts(storage: storage).requireAnswerable(c, promptId, groups: try groups.compactMap { try storage.group(c, $0, reader: author) })
        }
        let story = try storage.createStory(c, author: author, text: text, color: color, place: place, promptId: promptId, groups: groups,
                                            media: images)
        try outbox.add(StoryCreated(storyId: story.id, authorId: author, groupIds: groups,
                                    mediaCount: images.count, createdAt: story.createdAt,
                                    audiences: try storage.audiences(c, groups), place: story.place),
                       subject: story.id.lowercased, on: c)
        return story
    }

    /// Changes what is given of a story, by its author; it must still carry text or media.
    func update(_ c: Connection, _ id: UUID, by user: UUID, text: String?, color: Patch<String>, place: Patch<StoryPlace> = .absent,
                images: [UUID]?) throws -> StoryRecord {
        var story = try visible(c, id, to: user, lock: true)
        guard story.authorId == user else { throw StoriesError.notAuthor(verb: "change") }
        if let text { story.text = text }
        if color.isPresent { story.backgroundColor = color.value }
        if place.isPresent { story.place = place.value }
        if let images {
            let images = try unique(images, field: "mediaIds")
            try media.requireOwned(images, by: user, field: "mediaIds", on: c)
            try storage.setStoryMedia(c, id, images)
            story.mediaIds = images
            story.images = try media.meta(images, on: c)
        }
        guard !story.text.isEmpty || !story.mediaIds.isEmpty else { throw StoriesError.emptyStory }
        story.updatedAt = try storage.updateStory(c, story)
        return story
    }

    /// Deletes a story, by its author.
    func delete(_ c: Connection, _ id: UUID, by user: UUID) throws {
        let story = try visible(c, id, to: user, lock: true)
        guard story.authorId == user else { throw StoriesError.notAuthor(verb: "delete") }
        try storage.deleteStory(c, id)
    }

    /// `reporter` reports a story they can see to the moderators.
    func report(_ c: Connection, _ id: UUID, by reporter: UUID, reason: String, note: String?) throws -> ReportRecord {
        let story = try visible(c, id, to: reporter)
        return try Reports(schema: "stories").file(c, kind: "story", target: id, author: story.authorId, reporter: reporter,
                                                   reason: reason, note: note)
    }

    /// A reported story an operator takes down: gone from every group, comment and newsletter it was in, and
    /// `story.taken_down` says so.
    func takeDown(_ c: Connection, _ report: ReportRecord) throws {
        guard let author = report.authorId, let story = try storage.story(c, report.targetId, reader: author, lock: true) else { return }
        try storage.deleteStory(c, story.id)
        try storage.deletePhotos(c, story.mediaIds)
        for (id, content) in try storage.newsletters(c, naming: story.id) {
            let document = try JSONDecoder().decode(NewsletterDocument.self, from: Data(content.utf8)).without(story: story.id)
            try storage.replaceNewsletter(c, id, content: String(decoding: JSON.encode(document), as: UTF8.self),
                                          storyCount: document.storyCount)
        }
        try outbox.add(StoryTakenDown(storyId: story.id, groupIds: story.groupIds, authorId: author,
                                      reportId: report.id, takenDownAt: Date()),
                       subject: story.id.lowercased, on: c)
    }

    /// A comment on a story `author` can see.
    func comment(_ c: Connection, on id: UUID, by author: UUID, text: String) throws -> CommentRecord {
        let story = try visible(c, id, to: author)
        let comment = try storage.addComment(c, story: id, author: author, text: text)
        try outbox.add(StoryCommented(storyId: id, commentId: comment.id, authorId: author,
                                      storyAuthorId: story.authorId, createdAt: comment.createdAt),
                       subject: id.lowercased, on: c)
        return comment
    }
}
