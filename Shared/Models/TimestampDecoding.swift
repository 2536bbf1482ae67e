import Foundation

extension Timestamp {
    /// A decoder that reads what the kit's JSON writes: a `Date` as RFC 3339 (a payload's time), a `UUID` in any case.
    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { d in
            let text = try d.singleValueContainer().decode(String.self)
            guard let date = Timestamp.parse(text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: d.codingPath, debugDescription: "not an RFC 3339 time"))
            }
            return date
        }
        return decoder
    }
}
