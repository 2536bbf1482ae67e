import Crypto
import Foundation
import HTTP
import Models
import Postgres
import Web

/// What the bytes of an upload say they are: the type comes from the content, never from the header.
public struct ImageInfo: Equatable, Sendable {
    public let contentType: String
    public let width: Int?
    public let height: Int?

    /// The types `sniff` recognises.
    public static let contentTypes = ["image/jpeg", "image/png", "image/webp", "image/heic"]

    /// Recognises JPEG, PNG, WebP and HEIC; nil for anything else.
    public static func sniff(_ b: [UInt8]) -> ImageInfo? {
        func be16(_ i: Int) -> Int { Int(b[i]) << 8 | Int(b[i + 1]) }
        func be32(_ i: Int) -> Int { be16(i) << 16 | be16(i + 2) }
        func le16(_ i: Int) -> Int { Int(b[i]) | Int(b[i + 1]) << 8 }
        func le24(_ i: Int) -> Int { le16(i) | Int(b[i + 2]) << 16 }
        func ascii(_ i: Int, _ s: String) -> Bool { i + s.utf8.count <= b.count && Array(b[i..<(i + s.utf8.count)]) == Array(s.utf8) }

        if b.count >= 24, b[0..<8] == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], ascii(12, "IHDR") {
            return ImageInfo(contentType: "image/png", width: be32(16), height: be32(20))
        }
        if b.count >= 4, b[0] == 0xFF, b[1] == 0xD8, b[2] == 0xFF {
            // The whole structure: segments of declared lengths up to the first scan, a frame with dimensions on
            // the way, and the file ending at its end-of-image marker. Bytes that only begin like a JPEG (and go on
            // as HTML, say) are not one.
            guard b.count >= 4, b[b.count - 2] == 0xFF, b[b.count - 1] == 0xD9 else { return nil }
            var i = 2
            var size: (width: Int, height: Int)?
            while i + 4 <= b.count, b[i] == 0xFF {
                let marker = b[i + 1]
                if marker == 0xFF { i += 1; continue }  // fill byte
                if marker == 0xD9 { break }
                guard marker != 0xD8, marker != 0x01, !(0xD0...0xD7).contains(marker) else { return nil }
                let length = be16(i + 2)
                guard length >= 2, i + 2 + length <= b.count else { return nil }
                if (0xC0...0xCF).contains(marker) && ![0xC4, 0xC8, 0xCC].contains(marker) {
                    guard length >= 8 else { return nil }
                    size = (be16(i + 7), be16(i + 5))
                }
                if marker == 0xDA {  // start of scan: the rest is coded data, in which 0xFF is only stuffed or a marker
                    guard let size, size.width > 0, size.height > 0 else { return nil }
                    var j = i + 2 + length
                    while j + 1 < b.count - 2 {
                        if b[j] == 0xFF, b[j + 1] != 0x00, b[j + 1] != 0xFF, !(0xD0...0xD7).contains(b[j + 1]), b[j + 1] < 0xC0 { return nil }
                        j += 1
                    }
                    return ImageInfo(contentType: "image/jpeg", width: size.width, height: size.height)
                }
                i += 2 + length
            }
            return nil
        }
        if b.count >= 30, ascii(0, "RIFF"), ascii(8, "WEBP") {
            if ascii(12, "VP8X") { return ImageInfo(contentType: "image/webp", width: le24(24) + 1, height: le24(27) + 1) }
            if ascii(12, "VP8 "), b[23] == 0x9D, b[24] == 0x01, b[25] == 0x2A {
                return ImageInfo(contentType: "image/webp", width: le16(26) & 0x3FFF, height: le16(28) & 0x3FFF)
            }
            if ascii(12, "VP8L"), b[20] == 0x2F {
                let bits = Int(b[21]) | Int(b[22]) << 8 | Int(b[23]) << 16 | Int(b[24]) << 24
                return ImageInfo(contentType: "image/webp", width: (bits & 0x3FFF) + 1, height: ((bits >> 14) & 0x3FFF) + 1)
            }
            return nil
        }
        if b.count >= 12, ascii(4, "ftyp"), ["heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1"].contains(where: { ascii(8, $0) }) {
            return ImageInfo(contentType: "image/heic", width: nil, height: nil)
        }
        return nil
    }
}


/// A stored image's metadata.
public struct MediaRecord: Sendable {
    public let id: UUID
    public let ownerId: UUID
    public let contentType: String
    public let size: Int
    public let width: Int?
    public let height: Int?
    public let sha256: String
    /// What it was uploaded for (`MediaStore.purposes`).
    public let purpose: String
    public let createdAt: Date

    public init(_ row: Row) throws {
        id = try row["id"]; ownerId = try row["owner_id"]; contentType = try row["content_type"]; size = try row["size"]
        width = try row.decode("width"); height = try row.decode("height"); sha256 = try row["sha256"]; purpose = try row["purpose"]
        createdAt = try row["created_at"]
    }

    /// The columns `init` reads, for queries aliasing the media table as `m`.
    public static let columns = "m.id, m.owner_id, m.content_type, m.size, m.width, m.height, m.sha256, m.purpose, m.created_at"
}

/// The JSON of a stored image.
public struct MediaView: View {
    let media: MediaRecord
    let url: String

    /// `url`: the signed URL that loads it.
    public init(_ m: MediaRecord, url: String) { media = m; self.url = url }

    public static let fields: [ViewField<Self>] = [
        .field("id", \.media.id), .field("url", \.url), .field("contentType", \.media.contentType),
        .field("size", \.media.size, .integer(1...MediaStore.limit)), .omitted("width", \.media.width),
        .omitted("height", \.media.height), .field("createdAt", \.media.createdAt), .field("updatedAt", \.media.createdAt),
    ]
}

/// Images uploaded to a service, in its schema's `media` table: the type comes from the bytes (JPEG, PNG, HEIC,
/// WebP; 415 otherwise), the place a photo was taken is removed before storing, and reads carry an ETag.
/// Who may read an image is the service's own rule: it shows an image by a signed URL (`link`) to whoever may see
/// it, and serves it to whoever holds one, or asks its rule for a caller with a bearer token.
public struct MediaStore: Sendable {
    /// The service's schema.
    public let schema: String
    /// The path under which the service's routes upload and serve its images (one per service, so that one public
    /// origin routes each to its owner): `/v1/media` for stories, `/v1/chat/media`, `/v1/dispatch/media`.
    public let path: String
    /// Uploads up to 10 MiB.
    public static let limit = 10 << 20

    /// Signs the URLs of the images.
    public let urls: MediaURLs
    /// What an upload may be for (`?purpose=`; the first is the default), and so the one use it may be put to: an
    /// avatar is shown to everyone who sees its owner, any other image only where its owner shared it, so a photo
    /// meant for a few never becomes a face shown to all (`requireOwned`).
    public let purposes: [String]

    /// An image uploaded to be someone's face (stories alone stores them).
    public static let avatar = "avatar"

    /// Where the images' bytes are kept (`MEDIA_STORE`: `BlobStores.make`), each under `key(id)`; the table keeps
    /// what is known of them. Rows from before the store still hold their bytes until `moveToStore` moves them.
    public let store: any BlobStore

    public init(schema: String, path: String, urls: MediaURLs, purposes: [String], store: any BlobStore) {
        precondition(!purposes.isEmpty)
        self.schema = schema; self.path = path; self.urls = urls; self.purposes = purposes; self.store = store
    }

    /// The upload's purpose, declared on its route (`?purpose=`).
    public var purposeParameter: QueryParameter {
        QueryParameter("purpose", .oneOf(purposes), "What the image is for: it can be used for that alone", default: purposes[0])
    }

    /// The signed link of image `id`, valid for `lifetime`.
    public func link(_ id: UUID, lifetime: TimeInterval = MediaURLs.appLifetime) -> ImageLink {
        ImageLink(id, url: url(id.lowercased, lifetime: lifetime))
    }

    /// The signed URL of the image whose id is `id` (lower-case text, as a stored document holds it).
    public func url(_ id: String, lifetime: TimeInterval = MediaURLs.appLifetime) -> String {
        urls.url("\(path)/\(id)", lifetime: lifetime)
    }

    /// The table, for a service's migrations.
    public static let tableSQL = """
        CREATE TABLE media (
            id uuid PRIMARY KEY,
            owner_id uuid NOT NULL,
            content_type text NOT NULL,
            bytes bytea NOT NULL,
            size int NOT NULL,
            width int,
            height int,
            sha256 text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX media_by_owner ON media (owner_id);
        """

    /// The migration that gives the table its `purpose` column, every image until then counting as for `purpose`
    /// (a service adds it after `tableSQL`, and may then mark the ones it knows were for something else).
    public static func purposeSQL(default purpose: String) -> String {
        "ALTER TABLE media ADD COLUMN purpose text NOT NULL DEFAULT '\(purpose)'"
    }

    /// `POST /v1/media`: stores the raw body as an image owned by `owner`, for the purpose `?purpose=` names (the
    /// first of `purposes` by default) → 201 with its JSON.
    public func upload(_ request: Request, owner: UUID, idempotency: Idempotency) throws -> Response {
        let purpose = request.query["purpose"] ?? purposes[0]
        guard purposes.contains(purpose) else {
            throw HTTPError.validation("purpose must be one of \(purposes.joined(separator: ", ")).", field: "purpose")
        }
        guard !request.body.isEmpty else { throw HTTPError.validation("The body must be the image bytes.") }
        guard let info = ImageInfo.sniff(request.body) else {
            throw HTTPError.unsupportedMediaType("Upload a JPEG, PNG, HEIC or WebP image.")
        }
        guard let bytes = LocationScrubber.scrub(request.body, contentType: info.contentType) else {
            throw HTTPError.unsupportedMediaType("Where this photo was taken cannot be removed from it here: upload it as JPEG.")
        }
        return try idempotency.run(request, caller: owner.lowercased) { c in
            // The object before the row: a row never names an object that is missing (one whose row is not
            // committed is only space, swept with the others of its kind).
            let id = UUID.v7()
            try store.put(key(id), bytes, contentType: info.contentType)
            let media = try MediaRecord(c.first("""
                INSERT INTO \(schema).media AS m (id, owner_id, content_type, size, width, height, sha256, purpose)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING \(MediaRecord.columns)
                """, [id, owner, info.contentType, bytes.count, info.width, info.height,
                      hexString(sha256(bytes)), purpose])!)
            let url = purpose == Self.avatar ? urls.avatar(media.id, owner: owner)! : link(media.id).url
            return .json(MediaView(media, url: url), status: 201)
        }
    }

    /// `GET <path>/{id}`: to the holder of a signed URL (`caller` nil: the route checked the signature), or to a
    /// caller whom `visible` finds allowed (nil: 404). `avatarOf`: the avatar route's (`MediaURLs.avatarPattern`), which
    /// serves only an image that user uploaded as their avatar, so that an avatar URL, whatever id auth or an event
    /// once named, never loads anyone else's photo.
    public func serve(_ request: Request, _ id: UUID, avatarOf owner: UUID? = nil, caller: Caller?, on c: Connection,
                      visible: (_ reader: UUID) throws -> MediaRecord?) throws -> Response {
        var found: MediaRecord?
        if let caller {
            found = try visible(caller.userId)
        } else {
            found = try c.first("SELECT \(MediaRecord.columns) FROM \(schema).media m WHERE m.id = $1", [id]).map(MediaRecord.init)
        }
        if let owner, found?.ownerId != owner || found?.purpose != Self.avatar { found = nil }
        guard let found else { throw HTTPError.notFound() }
        return try serve(request, found, on: c)
    }

    /// The image's bytes as a response for a reader already allowed to see `media`, or 304 for a matching ETag.
    public func serve(_ request: Request, _ media: MediaRecord, on c: Connection) throws -> Response {
        let etag = "\"\(media.sha256)\""
        let cache = [("ETag", etag), ("Cache-Control", "private, max-age=86400, immutable")]
        // RFC 9110 13.1.2: `*`, or a list of tags compared weakly (`W/"x"` names the same image as `"x"`).
        if let match = request.header("if-none-match"), match.split(separator: ",").contains(where: {
            let tag = $0.trimmingCharacters(in: .whitespaces)
            return tag == "*" || tag == etag || tag == "W/" + etag
        }) {
            return Response(status: 304, headers: cache)
        }
        guard let bytes = try self.bytes(media.id, on: c) else { throw HTTPError.notFound() }
        return Response(status: 200, headers: [("Content-Type", media.contentType)] + cache, body: bytes)
    }

    /// Throws a 400 naming `field` unless every id names an image `owner` uploaded here for the service's usual use
    /// (the default purpose: shown where its owner shares it; never an avatar, nor anyone else's image).
    public func requireOwned(_ ids: [UUID], by owner: UUID, field: String, on c: Connection) throws {
        guard !ids.isEmpty else { return }
        guard try owned(ids, by: owner, for: purposes[0], on: c) == ids.count else {
            throw HTTPError.validation("\(field) must name images you uploaded.", field: field)
        }
    }

    /// How many of `ids` name images `owner` uploaded for `purpose`.
    public func owned(_ ids: [UUID], by owner: UUID, for purpose: String, on c: Connection) throws -> Int {
        try c.first("SELECT count(*) AS n FROM \(schema).media WHERE id = ANY($1::uuid[]) AND owner_id = $2 AND purpose = $3",
                    [PostgresArray(ids), owner, purpose])!["n"]
    }
}
