import Foundation

/// How finely a story's author lets its place be known: the grid its coordinates are rounded to before they are
/// stored, so nothing finer than the author chose is ever kept, shown or sent.
public enum PlacePrecision: String, Codable, CaseIterable, Sendable {
    /// 0.00001° (about a metre): the spot.
    case exact
    /// 0.01° (about a kilometre): the neighbourhood.
    case neighbourhood
    /// 0.1° (about ten kilometres): the city.
    case city

    /// Decimal places kept of a coordinate in degrees.
    public var decimals: Int {
        switch self {
        case .exact: return 5
        case .neighbourhood: return 2
        case .city: return 1
        }
    }

    /// `degrees` on this precision's grid (half away from zero); never `-0`.
    public func round(_ degrees: Double) -> Double {
        let scale = pow(10, Double(decimals))
        return (degrees * scale).rounded() / scale + 0.0
    }
}

/// A place an author chose to give a story: a name they gave or picked, and coordinates on the grid of the precision
/// they chose. Never taken from a photo (photos are stored without their location).
public struct StoryPlace: Codable, Sendable, Equatable {
    public var name: String
    public var latitude: Double
    public var longitude: Double
    public var precision: PlacePrecision

    /// The place with its coordinates rounded to `precision`: the only way one is made from what a client sent.
    public init(name: String, latitude: Double, longitude: Double, precision: PlacePrecision) {
        self.name = name; self.precision = precision
        self.latitude = precision.round(latitude); self.longitude = precision.round(longitude)
    }

    /// The same place no finer than `coarser` (a trip of stories given at several precisions shows the coarsest).
    public func rounded(to coarser: PlacePrecision) -> StoryPlace {
        coarser.decimals < precision.decimals ? StoryPlace(name: name, latitude: latitude, longitude: longitude, precision: coarser) : self
    }
}
