import Foundation
import Models
import Postgres

extension StoryPlace {
    /// The place columns of a story aliased as `s`, for `StoryRecord`.
    static let columns: SQL = "s.place_name, s.place_latitude, s.place_longitude, s.place_precision"

    /// The place of a story's row (`columns`); nil when its author gave none.
    static func stored(_ row: Row) throws -> StoryPlace? {
        guard let name: String = try row.decode("place_name"), let latitude: Double = try row.decode("place_latitude"),
              let longitude: Double = try row.decode("place_longitude"),
              let precision: PlacePrecision = try row.decode("place_precision") else { return nil }
        // Stored on its grid already (migration 15 checks); rounding again costs nothing and changes nothing.
        return StoryPlace(name: name, latitude: latitude, longitude: longitude, precision: precision)
    }
}
