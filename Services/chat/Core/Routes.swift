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
        r.add("GET", "/v1/internal/rooms/{id}/members/{userId}/unread",
              summary: "Services: a member's title of a room and how many messages they have not read (404: not a member)",
              response: (200, UnreadView.shape), trusted: services, h.unread)
    }
    // Rooms
    r.add("POST", "/v1/rooms", summary: "Create a team room; the creator owns it", body: CreateRoomBody.self,
          response: (201, RoomView.shape), auth: auth, h.createRoom)
    r.add("GET", "/v1/rooms", summary: "My rooms, latest activity first, with unread counts and last messages (?parcelId=)",
          response: (200, PageResponse<RoomView>.shape), auth: auth, h.listRooms)
    r.add("POST", "/v1/rooms/join", summary: "Join a team room by its invite code", body: JoinRoomBody.self,
          response: (200, RoomView.shape), auth: auth, h.join)
    r.add("POST", "/v1/rooms/direct", summary: "The direct room with someone I share a group or a parcel with",
          body: DirectRoomBody.self, response: (200, RoomView.shape), auth: auth, h.direct)
    r.add("GET", "/v1/rooms/{id}", summary: "A room with its members", response: (200, RoomView.shape), auth: auth, h.getRoom)
    r.add("PATCH", "/v1/rooms/{id}", summary: "Rename a team room or change its topic (owner)", body: UpdateRoomBody.self,
          response: (200, RoomView.shape), auth: auth, h.updateRoom)
    r.add("POST", "/v1/rooms/{id}/invite-code", summary: "Replace a team room's invite code (owner)",
          response: (200, RoomView.shape), auth: auth, h.rotateInviteCode)
    r.add("DELETE", "/v1/rooms/{id}/members/{userId}", summary: "Remove a member (owner) or leave; their streams end",
          response: (204, nil), auth: auth, h.removeMember)
    r.add("PUT", "/v1/rooms/{id}/read", summary: "Mark the room read up to a message sequence", body: ReadBody.self,
          response: (200, RoomView.shape), auth: auth, h.markRead)
    // Messages
    r.add("POST", "/v1/rooms/{id}/messages", summary: "Post a message (a retry with the same clientId returns the first)",
          body: PostMessageBody.self, response: (201, MessageView.shape), auth: auth, h.postMessage)
    r.add("GET", "/v1/rooms/{id}/messages", summary: "History by sequence: the latest, ?before= or ?after= (keyset)",
          response: (200, PageResponse<MessageView>.shape), auth: auth, h.listMessages)
    r.add("GET", "/v1/rooms/{id}/search", summary: "Full-text search of the room's messages, newest first (?q=)",
          response: (200, PageResponse<MessageView>.shape), auth: auth, h.search)
    r.add("PATCH", "/v1/messages/{id}", summary: "Change a message's text (author)", body: EditMessageBody.self,
          response: (200, MessageView.shape), auth: auth, h.editMessage)
    r.add("DELETE", "/v1/messages/{id}", summary: "Delete a message (author); it keeps its place with no text",
          response: (204, nil), auth: auth, h.deleteMessage)
    r.add("POST", "/v1/messages/{id}/reports", summary: "Report a message to the moderators", body: ReportBody.self,
          response: (201, ReportView.shape), auth: auth, h.reportMessage)
    // Without OPERATOR_TOKEN (the moderators' credential here) the queue of reports does not exist (404).
    r.addModeration("chat", what: "message", moderators: moderators, pool: h.pool, reports: Reports(schema: "chat"),
                    takeDown: h.messages.takeDown)
    // Live
    r.addStream("/v1/rooms/{id}/events", summary: "Server-Sent Events of every change, resumable with Last-Event-ID",
                auth: auth, tickets: tickets, h.events)
    r.add("POST", "/v1/rooms/{id}/typing", summary: "Tell the room I am typing (not stored)", response: (204, nil), auth: auth, h.typing)
    // Todos
    r.add("GET", "/v1/rooms/{id}/todos", summary: "The room's todo list: open items in their order, then done ones",
          response: (200, PageResponse<TodoView>.shape), auth: auth, h.listTodos)
    r.add("POST", "/v1/rooms/{id}/todos", summary: "Add an item", body: CreateTodoBody.self, response: (201, TodoView.shape),
          auth: auth, h.createTodo)
    r.add("PATCH", "/v1/todos/{id}", summary: "Rename, check off, assign, schedule or move an item", body: UpdateTodoBody.self,
          response: (200, TodoView.shape), auth: auth, h.updateTodo)
    r.add("DELETE", "/v1/todos/{id}", summary: "Remove an item", response: (204, nil), auth: auth, h.deleteTodo)
    // Media
    r.add("POST", "/v1/chat/media", summary: "Upload an image for a message (raw JPEG, PNG, HEIC or WebP, 10 MiB at most)",
          bodyLimit: MediaStore.limit, response: (201, MediaView.shape), auth: auth, h.uploadMedia)
    r.query("POST", "/v1/chat/media", [h.media.purposeParameter])
    r.addImage("/v1/chat/media/{id}", summary: "An image, by the signed URL a message gave, or for its owner and the members of the rooms it was posted in",
               auth: auth, urls: h.media.urls, h.getMedia)
    r.query("GET", "/v1/rooms", QueryParameter.page + [QueryParameter("parcelId", .uuid, "Only the room of this parcel")])
    r.query("GET", "/v1/rooms/{id}/messages", QueryParameter.page + [
        QueryParameter("before", .integer(0...Int.max), "Messages before this sequence"),
        QueryParameter("after", .integer(0...Int.max), "Messages after this sequence")])
    r.alsoAnswers("POST", "/v1/rooms/{id}/messages", 200, schema: MessageView.shape.jsonText)
    r.query("GET", "/v1/rooms/{id}/search", QueryParameter.page + [QueryParameter("q", .text(max: 200), "Words to find")])
    let resume = "Resume after this change: the id of the last event received, which EventSource sends on reconnecting"
    // A string in the document: an empty header is valid and names no event (the HTML standard sends one so), and
    // the handler reads the digits of a sequence (400 otherwise).
    r.header("GET", "/v1/rooms/{id}/events", [QueryParameter("Last-Event-ID", .string(max: 20), resume + "; empty: none")])
    r.query("GET", "/v1/rooms/{id}/events", [QueryParameter("lastEventId", .integer(0...Int.max), resume + " (for a client that cannot set the header)")])
    r.idempotent("POST", ["/v1/rooms", "/v1/rooms/{id}/messages", "/v1/rooms/{id}/todos", "/v1/chat/media"])
    return r
}
