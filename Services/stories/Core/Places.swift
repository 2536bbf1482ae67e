import Foundation
import Models
import Web

// A place the author chooses to give a story: what a request sends, and what every view shows. Only the rounded
// coordinates exist past the body (`StoryPlace`); a photo's location never becomes one.

/// `place` in a story's body: a name, coordinates in degrees, and how finely they may be known.
let placeSchema = Schema.object([
    "name": .required(.text(max: 100)), "latitude": .required(.number(-90...90)), "longitude": .required(.number(-180...180)),
    "precision": .required(.oneOf(PlacePrecision.allCases.map(\.rawValue))),
])

struct PlaceBody: Decodable, Sendable {
    let name: String
    let latitude: Double
    let longitude: Double
    let precision: PlacePrecision

    /// The place as it is kept: its coordinates on the precision's grid.
    var place: StoryPlace { StoryPlace(name: name, latitude: latitude, longitude: longitude, precision: precision) }
}

/// A story's place as views show it (and as a stored newsletter keeps it).
struct PlaceView: Decodable, Equatable, View {
    let name: String
    let latitude: Double
    let longitude: Double
    let precision: String

    init(_ p: StoryPlace) { name = p.name; latitude = p.latitude; longitude = p.longitude; precision = p.precision.rawValue }

    static let fields: [ViewField<Self>] = [
        .field("name", \.name), .field("latitude", \.latitude, .number(-90...90)), .field("longitude", \.longitude, .number(-180...180)),
        .field("precision", \.precision, .oneOf(PlacePrecision.allCases.map(\.rawValue))),
    ]
}
