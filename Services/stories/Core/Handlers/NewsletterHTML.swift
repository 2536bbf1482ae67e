import Foundation
import Web

enum NewsletterHTML {
    /// A self-contained page (inline styles, no scripts, no external resources but the story photos' own URLs).
    static func render(_ doc: NewsletterDocument) -> String {
        func esc(_ s: String) -> String { HTML.escape(s, lineBreaks: true) }
        var html = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
            <title>\(esc(doc.groupName)) newsletter</title></head>
            <body style="margin:0;padding:24px;background:#f6f4f0;font-family:Georgia,serif;color:#222">
            <div style="max-width:640px;margin:0 auto;background:#fff;padding:24px;border-radius:8px">
            <h1 style="margin:0 0 4px;font-size:26px">\(esc(doc.groupName))</h1>
            <p style="margin:0 0 24px;color:#777;font-size:14px">\(esc(String(doc.period.from.prefix(10)))) to \(esc(String(doc.period.to.prefix(10)))) · \(esc(doc.period.timeZone)) · \(doc.storyCount) \(doc.storyCount == 1 ? "story" : "stories")</p>

            """
        html += travelMoments(doc, esc)
        for section in doc.answers {
            html += "<h2 style=\"font-size:20px;border-bottom:1px solid #eee;padding-bottom:4px\">\(esc(section.text))</h2>\n"
            for (who, story) in section.stories.compactMap(doc.answered) {
                html += "<p style=\"margin:0 0 8px;font-size:15px\"><strong>\(esc(who))</strong>: \(esc(story.text))</p>\n"
            }
        }
        for member in doc.members {
            html += "<h2 style=\"font-size:20px;border-bottom:1px solid #eee;padding-bottom:4px\">\(esc(member.fullName ?? "A member"))</h2>\n"
            if member.days.isEmpty {
                html += "<p style=\"color:#999;font-style:italic\">Nothing this time.</p>\n"
            }
            for day in member.days {
                html += "<h3 style=\"font-size:15px;color:#555;margin:16px 0 8px\">\(esc(day.date))</h3>\n"
                for story in day.stories {
                    let background = story.backgroundColor ?? "#FAFAFA"
                    html += "<div style=\"background:\(esc(background));padding:12px 16px;border-radius:6px;margin:0 0 12px\">"
                    html += "<p style=\"margin:0;font-size:16px;line-height:1.5\">\(esc(story.text))</p>"
                    if let place = story.place {
                        html += "<p style=\"margin:6px 0 0;font-size:13px;color:#555\">📍 \(esc(place.name))</p>"
                    }
                    for m in story.media {
                        // The large rendition (1080 px): sharp in any mail client's column, a fraction of the original.
                        let size = m.width.flatMap { w in m.height.map { h in " width=\"\(w)\" height=\"\(h)\"" } } ?? ""
                        html += "<img src=\"\(esc(m.urls?.large ?? m.url))\"\(size) alt=\"\" style=\"max-width:100%;height:auto;margin-top:8px;border-radius:4px\">"
                    }
                    if story.commentCount > 0 {
                        html += "<p style=\"margin:8px 0 0;font-size:12px;color:#666\">\(story.commentCount) comment\(story.commentCount == 1 ? "" : "s")</p>"
                    }
                    html += "</div>\n"
                }
            }
        }
        if let habits = doc.habits, !habits.isEmpty {
            html += "<h2 style=\"font-size:20px;border-bottom:1px solid #eee;padding-bottom:4px\">Habits</h2>\n"
            for line in habitLines(doc) {
                html += "<p style=\"margin:0 0 8px;font-size:15px\"><strong>\(esc(line.who))</strong>: \(esc(line.text))</p>\n"
            }
        }
        html += "</div></body></html>\n"
        return html
    }

    /// The plain-text part of the newsletter's mail: each member's stories by day, photos as links.
    static func text(_ doc: NewsletterDocument) -> String {
        var out = "\(doc.groupName): \(doc.period.from.prefix(10)) to \(doc.period.to.prefix(10)), \(doc.storyCount) "
            + (doc.storyCount == 1 ? "story" : "stories") + "\n"
        let trips = doc.trips
        if !trips.isEmpty { out += "\nTravel moments\n" }
        for trip in trips { out += "  \(tripLine(trip, doc))\n" }
        for section in doc.answers {
            out += "\nPrompt: \(section.text)\n"
            for (who, story) in section.stories.compactMap(doc.answered) {
                out += "  \(who): " + story.text.replacingOccurrences(of: "\n", with: "\n    ") + "\n"
            }
        }
        for member in doc.members {
            out += "\n\(member.fullName ?? "A member")\n"
            if member.days.isEmpty { out += "  Nothing this time.\n" }
            for day in member.days {
                out += "  \(day.date)\n"
                for story in day.stories {
                    out += "    " + story.text.replacingOccurrences(of: "\n", with: "\n    ") + "\n"
                    if let place = story.place { out += "    Place: \(place.name)\n" }
                    for m in story.media { out += "    Photo: \(m.url)\n" }
                }
            }
        }
        if let habits = doc.habits, !habits.isEmpty {
            out += "\nHabits\n"
            for line in habitLines(doc) { out += "  \(line.who): \(line.text)\n" }
        }
        return out
    }

    /// The period's trips (`NewsletterDocument.trips`) as a section of the page; nothing when there are none.
    static func travelMoments(_ doc: NewsletterDocument, _ esc: (String) -> String) -> String {
        let trips = doc.trips
        guard !trips.isEmpty else { return "" }
        return "<h2 style=\"font-size:20px;border-bottom:1px solid #eee;padding-bottom:4px\">Travel moments</h2>\n<ul style=\"padding-left:20px\">\n"
            + trips.map { "<li style=\"margin:0 0 6px\">\(esc(tripLine($0, doc)))</li>\n" }.joined() + "</ul>\n"
    }

    /// "Ann in Lisbon, 2026-11-16 to 2026-11-18 (3 stories)".
    static func tripLine(_ trip: NewsletterDocument.Trip, _ doc: NewsletterDocument) -> String {
        let who = doc.members.first { $0.id == trip.memberId }?.fullName ?? "A member"
        let days = trip.from == trip.to ? trip.from : "\(trip.from) to \(trip.to)"
        return "\(who) in \(trip.place.name), \(days) (\(trip.storyIds.count) stories)"
    }

    /// Each shared habit as a sentence: whose, what, its streak and its days in the period.
    static func habitLines(_ doc: NewsletterDocument) -> [(who: String, text: String)] {
        let names = Dictionary(doc.members.map { ($0.id, $0.fullName ?? "A member") }, uniquingKeysWith: { a, _ in a })
        return (doc.habits ?? []).map { h in
            let unit = h.per == "week" ? "week" : "day"
            let goal = h.per == "week" ? "\(h.target) day\(h.target == 1 ? "" : "s") a week" : "every day"
            let text = "\(h.title) (\(goal)): a \(h.currentStreak)-\(unit) streak, the longest \(h.longestStreak); "
                + "done on \(h.daysDone) day\(h.daysDone == 1 ? "" : "s") this time"
            return (names[h.memberId] ?? "A member", text)
        }
    }
}
