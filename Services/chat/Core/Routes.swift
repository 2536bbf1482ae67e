import Features
import HTTP
import Identity
import Web

/// The chat API: the table of routes, nothing else. Every route needs a user's bearer token (or, for the event
/// stream, a stream ticket).
func makeRoutes(_ h: ChatHandlers, _ auth: any Authenticator, tickets: StreamTickets, moderators: SharedSecret,
                services: SharedSecret) -> Router {
    var r = Router()
    r.addExport(services: services) { user in try h.pool.withConnection { try h.storage.export($0, user, media: h.media) } }
    if services.isEnabled {
        r.group("/v1/internal", .trusted(services)) { trusted in
            trusted.add("GET", "/rooms/{id}/members/{userId}/unread",
                          "Services: a member's title of a room and how many messages they have not read (404: not a member)",
                          answers: (200, UnreadView.shape), h.unread)
        }
    }
    r.group("/v1/rooms", .user(auth)) { rooms in
        rooms.add("POST", "", "Create a team room; the creator owns it", body: CreateRoomBody.self,
                  answers: (201, RoomView.shape), idempotent: h.idempotency, h.createRoom)
        rooms.add("GET", "", "My rooms, latest activity first, with unread counts and last messages (?parcelId=)",
                  answers: (200, PageResponse<RoomView>.shape),
                  query: QueryParameter.page + [QueryParameter("parcelId", .uuid, "Only the room of this parcel")], h.listRooms)
        rooms.add("POST", "/join", "Join a team room by its invite code", body: JoinRoomBody.self,
                  answers: (200, RoomView.shape), h.join)
        rooms.add("POST", "/direct", "The direct room with someone I share a group or a parcel with",
                  body: DirectRoomBody.self, answers: (200, RoomView.shape), h.direct)
        rooms.add("GET", "/{id}", "A room with its members", answers: (200, RoomView.shape), h.getRoom)
        rooms.add("PATCH", "/{id}", "Rename a team room or change its topic (owner)", body: UpdateRoomBody.self,
                  answers: (200, RoomView.shape), h.updateRoom)
        rooms.add("POST", "/{id}/invite-code", "Replace a team room's invite code (owner)",
                  answers: (200, RoomView.shape), h.rotateInviteCode)
        rooms.add("DELETE", "/{id}/members/{userId}", "Remove a member (owner) or leave; their streams end",
                  answers: (204, nil), h.removeMember)
        rooms.add("PUT", "/{id}/read", "Mark the room read up to a message sequence", body: ReadBody.self,
                  answers: (200, RoomView.shape), h.markRead)
        // Messages
        rooms.add("POST", "/{id}/messages", "Post a message (a retry with the same clientId returns the first)",
                  body: PostMessageBody.self, answers: (201, MessageView.shape),
                  also: [.answer(200, schema: MessageView.shape)], idempotent: true, h.postMessage)
        rooms.add("GET", "/{id}/messages", "History by sequence: the latest, ?before= or ?after= (keyset)",
                  answers: (200, PageResponse<MessageView>.shape), query: QueryParameter.page + [
                      QueryParameter("before", .integer(0...Int.max), "Messages before this sequence"),
                      QueryParameter("after", .integer(0...Int.max), "Messages after this sequence")], h.listMessages)
        rooms.add("GET", "/{id}/search", "Full-text search of the room's messages, newest first (?q=)",
                  answers: (200, PageResponse<MessageView>.shape),
                  query: QueryParameter.page + [QueryParameter("q", .text(max: 200), "Words to find")], h.search)
        // Live
        rooms.add("POST", "/{id}/typing", "Tell the room I am typing (not stored)", answers: (204, nil), h.typing)
        // Todos
        rooms.add("GET", "/{id}/todos", "The room's todo list: open items in their order, then done ones",
                  answers: (200, PageResponse<TodoView>.shape), h.listTodos)
        rooms.add("POST", "/{id}/todos", "Add an item", body: CreateTodoBody.self, answers: (201, TodoView.shape),
                  idempotent: h.idempotency, h.createTodo)
    }
    r.group("/v1/messages", .user(auth)) { messages in
        messages.add("PATCH", "/{id}", "Change a message's text (author)", body: EditMessageBody.self,
                     answers: (200, MessageView.shape), h.editMessage)
        messages.add("DELETE", "/{id}", "Delete a message (author); it keeps its place with no text",
                     answers: (204, nil), h.deleteMessage)
        messages.add("POST", "/{id}/reports", "Report a message to the moderators", body: ReportBody.self,
                     answers: (201, ReportView.shape), h.reportMessage)
    }
    r.group("/v1/todos", .user(auth)) { todos in
        todos.add("PATCH", "/{id}", "Rename, check off, assign, schedule or move an item", body: UpdateTodoBody.self,
                  answers: (200, TodoView.shape), h.updateTodo)
        todos.add("DELETE", "/{id}", "Remove an item", answers: (204, nil), h.deleteTodo)
    }
    r.group("/v1/chat/media", .user(auth)) { media in
        media.add("POST", "", "Upload an image for a message (raw JPEG, PNG, HEIC or WebP, 10 MiB at most)",
                  answers: (201, MediaView.shape), query: [h.media.purposeParameter], bodyLimit: MediaStore.limit,
                  idempotent: true, h.uploadMedia)
    }
    // Without OPERATOR_TOKEN (the moderators' credential here) the queue of reports does not exist (404).
    r.addModeration("chat", what: "message", moderators: moderators, pool: h.pool, reports: Reports(schema: "chat"),
                    takeDown: h.messages.takeDown)
    r.addImage("/v1/chat/media/{id}", summary: "An image, by the signed URL a message gave, or for its owner and the members of the rooms it was posted in",
               auth: auth, urls: h.media.urls, h.getMedia)
    let resume = "Resume after this change: the id of the last event received, which EventSource sends on reconnecting"
    r.group("/v1/rooms", .stream(auth, tickets: tickets)) { streams in
        // A string in the document: an empty header is valid and names no event (the HTML standard sends one so), and
        // the handler reads the digits of a sequence (400 otherwise).
        streams.add("GET", "/{id}/events", "Server-Sent Events of every change, resumable with Last-Event-ID", answers: (200, nil),
                    query: [QueryParameter("lastEventId", .integer(0...Int.max), resume + " (for a client that cannot set the header)")],
                    headers: [QueryParameter("Last-Event-ID", .string(max: 20), resume + "; empty: none")], also: [.eventStream], h.events)
    }
    return r
}
