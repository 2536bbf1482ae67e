import Crypto
import Foundation
import HTTP
import Runtime
import Web

/// Image URLs that load without a bearer token, as object stores and image proxies sign them: the service that shows
/// an image decides who may see it and signs its URL for them; the one that stores it serves any URL whose signature
/// holds. A URL is `<PUBLIC_BASE_URL><path>?exp=<unix seconds>&kid=<key id>&sig=<base64url HMAC-SHA256 of
/// "<path>\n<exp>">`; a rendition's (`?size=small`) signs "<path>\n<exp>\n<size>", so a URL loads the one variant it
/// was signed for. A tampered, expired or unknown-key URL is a 403.
///
/// `MEDIA_URL_KEYS` (`id:secret,id:secret`, each secret 32+ characters), the same in every service: the first key
/// signs, every key listed verifies. To rotate, put a new key first and drop the old one once the URLs it signed
/// expired (`mailLifetime` at most). Expiry is rounded up to the hour, so a URL stays the same for an hour and
/// clients' caches keep working.
public struct MediaURLs: Sendable {
    struct Key: Sendable { let id: String; let secret: [UInt8] }
    private let keys: [Key]
    /// Where clients reach the API (the gateway), without a trailing slash.
    public let base: String

    /// How long a URL in an app's answer lives.
    public static let appLifetime: TimeInterval = 6 * 3600
    /// How long a URL in a newsletter (an e-mail kept for weeks) lives.
    public static let mailLifetime: TimeInterval = 30 * 86400

    /// From `MEDIA_URL_KEYS` and `PUBLIC_BASE_URL` (unset: `http://127.0.0.1:<PORT>`, the service itself, for a stack
    /// without a gateway).
    public init(_ environment: Environment, defaultPort: Int) throws {
        guard let text = environment.optional("MEDIA_URL_KEYS") else {
            throw ConfigError(variable: "MEDIA_URL_KEYS", problem: "is required: id:secret pairs, comma-separated, each secret 32+ characters")
        }
        var keys: [Key] = []
        for pair in text.split(separator: ",") {
            let parts = pair.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, parts[0].count <= 32,
                  parts[0].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
                throw ConfigError(variable: "MEDIA_URL_KEYS", problem: "each entry must be id:secret with an id of 1 to 32 letters, digits, - or _")
            }
            guard parts[1].count >= 32 else {
                throw ConfigError(variable: "MEDIA_URL_KEYS", problem: "the secret of key \(parts[0]) must be at least 32 characters")
            }
            keys.append(Key(id: parts[0], secret: Array(parts[1].utf8)))
        }
        let port = try environment.int("PORT", default: defaultPort, range: 0...65535)
        self.base = try environment.publicBaseURL(port: port)
        self.keys = keys
    }

    /// The signed, absolute URL of `path` (an image route, `/v1/media/<id>`), valid for `lifetime` or a little more;
    /// of its rendition `size` (`ImagePipeline.renditions`' names) if given.
    public func url(_ path: String, size: String? = nil, lifetime: TimeInterval = appLifetime, now: Date = Date()) -> String {
        let exp = Int((now.timeIntervalSince1970 + lifetime) / 3600).advanced(by: 1) * 3600
        let key = keys[0]
        return "\(base)\(path)?\(size.map { "size=\($0)&" } ?? "")exp=\(exp)&kid=\(key.id)&sig=\(Self.signature(key, path, exp, size: size))"
    }

    /// The face of `owner` wherever they appear: their avatar's signed URL, else the picture hosted elsewhere that
    /// auth's events gave (Google's), else none. Avatars are uploaded to and served by stories, and every service
    /// signs with the same keys; the path names the owner (`avatarPattern`), and stories serves it only for an image
    /// that person uploaded as an avatar: whatever id a profile holds, the URL loads nobody else's photo.
    public func avatar(_ id: UUID?, owner: UUID, picture: String? = nil, size: String? = nil, lifetime: TimeInterval = appLifetime) -> String? {
        id.map { url(Self.avatarPath($0, owner: owner), size: size, lifetime: lifetime) } ?? picture
    }

    /// The avatar's URLs by size (`avatar`'s), or the picture hosted elsewhere as the only size there is.
    public func avatarSizes(_ id: UUID?, owner: UUID, picture: String? = nil, lifetime: TimeInterval = appLifetime) -> ImageSizes? {
        guard let id else { return picture.map { ImageSizes(small: $0, large: $0, full: $0) } }
        let path = Self.avatarPath(id, owner: owner)
        return ImageSizes(small: url(path, size: "small", lifetime: lifetime), large: url(path, size: "large", lifetime: lifetime),
                          full: url(path, lifetime: lifetime))
    }

    static func avatarPath(_ id: UUID, owner: UUID) -> String { "/v1/media/avatars/\(owner.lowercased)/\(id.lowercased)" }

    /// The route `avatar` signs, served by stories.
    public static let avatarPattern = "/v1/media/avatars/{userId}/{id}"

    /// Whether `request` carries a signature (`sig`), and if so that it holds for its path: false when it carries
    /// none (a bearer token may serve instead), true when it holds, 403 otherwise.
    public func verify(_ request: Request, now: Date = Date()) throws -> Bool {
        guard let sig = request.query["sig"] else { return false }
        guard let exp = request.query["exp"].flatMap(Int.init), let kid = request.query["kid"],
              let key = keys.first(where: { $0.id == kid }),
              constantTimeEquals(Array(sig.utf8), Array(Self.signature(key, request.path, exp, size: request.query["size"]).utf8)) else {
            throw HTTPError.forbidden("This image link is not valid.")
        }
        guard Double(exp) > now.timeIntervalSince1970 else { throw HTTPError.forbidden("This image link has expired.") }
        return true
    }

    /// The query parameters of a signed URL, for a route's declaration.
    public static let parameters = [
        QueryParameter("exp", .integer(0...Int.max), "A signed URL's expiry (Unix seconds)"),
        QueryParameter("kid", .string(max: 32), "The id of the key that signed it"),
        QueryParameter("sig", .string(max: 64), "Its signature"),
    ]

    private static func signature(_ key: Key, _ path: String, _ exp: Int, size: String?) -> String {
        Base64URL.encode(hmacSHA256(key: key.secret, Array("\(path)\n\(exp)\(size.map { "\n\($0)" } ?? "")".utf8)))
    }
}

/// An image in a view, the same wherever one is shown: its id, the signed URL of the stored image (`url`, as before
/// sizes), its signed URLs by size, and, where the service knows them, its size and a placeholder to draw meanwhile.
public struct ImageView: View {
    public let id: UUID
    public let urls: ImageSizes
    public let meta: ImageMeta?
    public var url: String { urls.full }

    /// Image `id` of `media`, whose stored `meta` (`ImageMeta.load`) gives its size and placeholder.
    public init(_ id: UUID, _ media: MediaStore, meta: ImageMeta?, lifetime: TimeInterval = MediaURLs.appLifetime) {
        self.id = id; self.meta = meta
        let path = "\(media.path)/\(id.lowercased)"
        urls = ImageSizes(small: media.urls.url(path, size: "small", lifetime: lifetime),
                          large: media.urls.url(path, size: "large", lifetime: lifetime), full: media.urls.url(path, lifetime: lifetime))
    }

    public static let fields: [ViewField<Self>] = [
        .field("id", \.id), .field("url", \.url, .string(min: 1)), .field("urls", \.urls),
        .omitted("width", \.meta?.width, .integer(1...Int.max)), .omitted("height", \.meta?.height, .integer(1...Int.max)),
        .omitted("placeholder", \.meta?.placeholder, .string(min: 6, max: 100)),
    ]
}

/// An image's signed URLs by size: `small` fits 320 × 320 and `large` 1080 × 1080 (never larger than `full`, the
/// stored image, at most 2048 on its longest side), all of the same proportions.
public struct ImageSizes: View, Decodable, Equatable, Sendable {
    public let small: String
    public let large: String
    public let full: String

    public static let fields: [ViewField<Self>] = [
        .field("small", \.small, .string(min: 1)), .field("large", \.large, .string(min: 1)), .field("full", \.full, .string(min: 1)),
    ]
}

extension Router {
    /// A route serving an image: to a signed URL's bearer (`?exp&kid&sig`, checked by `urls`; the handler gets no
    /// caller and serves the image to whoever the signer showed it to), or to a user's access token (the handler
    /// gets the caller and decides). Listed under both schemes.
    public mutating func addImage(_ pattern: String, summary: String, auth: any Authenticator, urls: MediaURLs,
                                  _ handler: @escaping @Sendable (Request, Caller?) throws -> Response) {
        add("GET", pattern, summary: summary, security: ["bearer", "signedURL"], response: (200, nil),
            checkHead: Self.headCheck { if $0.query["sig"] == nil { try auth.checkHead($0) } },
            credentials: { request -> Caller? in try urls.verify(request) ? nil : try auth.authenticate(request) }, handler)
        query("GET", pattern, MediaURLs.parameters + [
            QueryParameter("size", .oneOf(MediaStore.variants), "A smaller rendition (`ImageSizes`); the stored image without it"),
        ])
        header("GET", pattern, [QueryParameter("If-None-Match", .string(), "The ETag of the copy the client holds (or `*`): 304 if it is this image's")])
        let cache = ["ETag": "The image's tag, for If-None-Match", "Cache-Control": "How long a copy may be kept, and by whom"]
        let headers = cache.merging(["Content-Security-Policy": "`default-src 'none'; sandbox`: nothing in it ever runs"]) { a, _ in a }
        // JPEG, as every image is stored since the pipeline; the others only for images uploaded before it.
        for type in ["image/jpeg", "image/png", "image/webp", "image/heic"] { alsoAnswers("GET", pattern, 200, contentType: type, headers: headers) }
        alsoAnswers("GET", pattern, 304, contentType: nil, description: "Not modified: If-None-Match named the image's ETag", headers: cache)
    }
}
