import Foundation
import Models
import Web

/// Travel moments: a trip is two or more consecutive stories of one member in the period that carry the same place
/// name (compared without case); a story with another place, or none, ends it. It shows the place (no finer than the
/// coarsest precision among its stories), the first and last local day, and its stories. Read from the document's
/// own stories, so a document without someone (erased, hidden) or without a story (taken down) has its trips right.
extension NewsletterDocument {
    struct Trip: Equatable, View {
        let memberId: String
        let place: PlaceView
        let from: String
        let to: String
        let storyIds: [String]
        static let fields: [ViewField<Self>] = [
            .field("memberId", \.memberId, .uuid), .field("place", \.place), .field("from", \.from, Shapes.day),
            .field("to", \.to, Shapes.day), .field("storyIds", \.storyIds, .array(.uuid, count: 2...Int.max)),
        ]
    }

    /// The period's trips, member by member in the document's order, each member's in time order.
    var trips: [Trip] {
        var trips: [Trip] = []
        for member in members {
            var run: [(day: String, story: Story, place: PlaceView)] = []
            func close() {
                defer { run = [] }
                guard run.count >= 2, let first = run.first, let last = run.last else { return }
                let precisions = run.compactMap { PlacePrecision(rawValue: $0.place.precision) }
                let coarsest = precisions.min { $0.decimals < $1.decimals } ?? .city
                let place = StoryPlace(name: first.place.name, latitude: first.place.latitude, longitude: first.place.longitude,
                                       precision: PlacePrecision(rawValue: first.place.precision) ?? .city).rounded(to: coarsest)
                trips.append(Trip(memberId: member.id, place: PlaceView(place), from: first.day, to: last.day, storyIds: run.map(\.story.id)))
            }
            for day in member.days {
                for story in day.stories {
                    guard let place = story.place else { close(); continue }
                    if let current = run.first?.place, current.name.caseInsensitiveCompare(place.name) != .orderedSame { close() }
                    run.append((day.date, story, place))
                }
            }
            close()
        }
        return trips
    }
}
