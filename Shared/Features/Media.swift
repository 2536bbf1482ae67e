import Crypto
import Foundation
import HTTP
import Imaging
import Models
import Postgres
import Web

/// A stored image's metadata.
public struct MediaRecord: PostgresRecord, Sendable {
    public let id: UUID
    public let ownerId: UUID
    public let contentType: String
    public let size: Int
    public let width: Int?
    public let height: Int?
    public let sha256: String
    /// What it was uploaded for (`MediaStore.purposes`).
    public let purpose: String
    /// Its BlurHash; set on every image the pipeline made (`ImagePipeline`), which has each rendition.
    public let placeholder: String?
    public let createdAt: Date

    public init(_ row: Row) throws {
        id = try row["id"]; ownerId = try row["owner_id"]; contentType = try row["content_type"]; size = try row["size"]
        width = try row.decode("width"); height = try row.decode("height"); sha256 = try row["sha256"]; purpose = try row["purpose"]
        placeholder = try row.decode("placeholder"); createdAt = try row["created_at"]
    }

    /// The columns `init` reads, for queries aliasing the media table as `m`.
    public static let columns: SQL = "m.id, m.owner_id, m.content_type, m.size, m.width, m.height, m.sha256, m.purpose, m.placeholder, m.created_at"

    /// What a view shows of it beside its URLs (nil for an image stored before the pipeline).
    public var meta: ImageMeta? {
        guard let width, let height, let placeholder else { return nil }
        return ImageMeta(width: width, height: height, placeholder: placeholder)
    }
}

/// What a view gives of an image beside its URLs, so that a screen reserves its place and draws something at once.
public struct ImageMeta: Sendable, Equatable {
    public let width: Int
    public let height: Int
    /// A BlurHash (4 × 3 components).
    public let placeholder: String

    public init(width: Int, height: Int, placeholder: String) { self.width = width; self.height = height; self.placeholder = placeholder }

    /// A column expression giving the meta of the images whose ids the array expression `ids` holds (in a query on a
    /// row that names its images: a message's, a group's), for `parse`: a line per image, "id width height hash"
    /// (a BlurHash has neither spaces nor newlines).
    public static func sql(ids: SQL, schema: String) -> SQL {
        """
        (SELECT string_agg(im.id::text || ' ' || im.width || ' ' || im.height || ' ' || im.placeholder, E'\\n')
         FROM \(unescaped: schema).media im WHERE im.id = ANY(\(ids)) AND im.placeholder IS NOT NULL)
        """
    }

    /// The meta `sql` gave.
    public static func parse(_ text: String?) -> [UUID: ImageMeta] {
        var found: [UUID: ImageMeta] = [:]
        for line in (text ?? "").split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 4, let id = UUID(uuidString: String(parts[0])), let width = Int(parts[1]), let height = Int(parts[2]) else { continue }
            found[id] = ImageMeta(width: width, height: height, placeholder: String(parts[3]))
        }
        return found
    }

    /// The meta of each of `ids` found in `schema`'s media table (images from before the pipeline have none).
    public static func load(_ ids: [UUID], schema: String, on c: Connection) throws -> [UUID: ImageMeta] {
        guard !ids.isEmpty else { return [:] }
        var found: [UUID: ImageMeta] = [:]
        for row in try c.rows("""
            SELECT \(MediaRecord.columns) FROM \(unescaped: schema).media m
            WHERE m.id = ANY(\(PostgresArray(Array(Set(ids))))::uuid[]) AND m.placeholder IS NOT NULL
            """) {
            let record = try MediaRecord(row)
            found[record.id] = record.meta
        }
        return found
    }
}

/// The JSON of a stored image.
public struct MediaView: View {
    let media: MediaRecord
    let urls: ImageSizes

    /// `urls`: the signed URLs that load it by size.
    public init(_ m: MediaRecord, urls: ImageSizes) { media = m; self.urls = urls }

    public static let fields: [ViewField<Self>] = [
        .field("id", \.media.id), .field("url", \.urls.full), .field("urls", \.urls), .field("contentType", \.media.contentType),
        .field("size", \.media.size, .integer(1...MediaStore.limit)), .omitted("width", \.media.width),
        .omitted("height", \.media.height), .omitted("placeholder", \.media.placeholder),
        .field("createdAt", \.media.createdAt), .field("updatedAt", \.media.createdAt),
    ]
}

/// Images uploaded to a service, in its schema's `media` table: the type comes from the bytes (JPEG, PNG, HEIC,
/// WebP; 415 otherwise), what is stored is what `ImagePipeline` makes of them (an upright JPEG without metadata, its
/// renditions and placeholder), and reads carry an ETag.
/// Who may read an image is the service's own rule: it shows an image by signed URLs (`view`) to whoever may see
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

    /// The migration that gives the table its `placeholder` column: set on every image the pipeline made, which
    /// has all of `variants` (an image from before has none, and is served whole for any size).
    public static let placeholderSQL = "ALTER TABLE media ADD COLUMN placeholder text"

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

    /// Image `id` for a view, with `meta` (`ImageMeta.load`) if known, its URLs valid for `lifetime`.
    public func view(_ id: UUID, meta: [UUID: ImageMeta] = [:], lifetime: TimeInterval = MediaURLs.appLifetime) -> ImageView {
        ImageView(id, self, meta: meta[id], lifetime: lifetime)
    }

    /// The meta of images `ids`, for their views.
    public func meta(_ ids: [UUID], on c: Connection) throws -> [UUID: ImageMeta] { try ImageMeta.load(ids, schema: schema, on: c) }

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
        // Made once, here, before a connection is taken: what is stored is the pipeline's JPEG and renditions, never
        // the bytes sent (nor any metadata they carried).
        let image: ImagePipeline.Result
        do { image = try ImagePipeline.process(request.body) } catch ImagePipeline.Failure.tooLarge(let width, let height) {
            throw HTTPError(413, "payload_too_large",
                            "The image is \(width) × \(height) pixels: at most \(ImagePipeline.maxPixels / 1_000_000) million are accepted.")
        } catch {
            throw HTTPError.unsupportedMediaType("Upload a JPEG, PNG, HEIC or WebP image.")
        }
        let bytes = image.full.bytes
        return try idempotency.run(request, caller: owner.lowercased) { c in
            // The object before the row: a row never names an object that is missing (one whose row is not
            // committed is only space, swept with the others of its kind).
            let id = UUID.v7()
            try store.put(key(id), bytes, contentType: image.contentType)
            for (name, rendition) in image.renditions {
                try store.put(key(id, variant: name), rendition.bytes, contentType: image.contentType)
            }
            let media = try c.one(MediaRecord.self, """
                INSERT INTO \(unescaped: schema).media AS m (id, owner_id, content_type, size, width, height, sha256, purpose, placeholder)
                VALUES (\(id), \(owner), \(image.contentType), \(bytes.count), \(image.full.width), \(image.full.height),
                        \(hexString(sha256(bytes))), \(purpose), \(image.placeholder)) RETURNING \(MediaRecord.columns)
                """)!
            let sizes = purpose == Self.avatar ? urls.avatarSizes(media.id, owner: owner)! : ImageView(media.id, self, meta: nil).urls
            return .json(MediaView(media, urls: sizes), status: 201)
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
            found = try c.one(MediaRecord.self, "SELECT \(MediaRecord.columns) FROM \(unescaped: schema).media m WHERE m.id = \(id)")
        }
        if let owner, found?.ownerId != owner || found?.purpose != Self.avatar { found = nil }
        guard let found else { throw HTTPError.notFound() }
        return try serve(request, found, on: c)
    }

    /// The image's bytes as a response for a reader already allowed to see `media`, or 304 for a matching ETag: the
    /// rendition `?size=` names (an image from before the pipeline has none: its only one, whatever the size).
    /// Served so that no browser runs it, whatever the bytes: no sniffing, and a sandbox without any source.
    public func serve(_ request: Request, _ media: MediaRecord, on c: Connection) throws -> Response {
        var variant = request.query["size"]
        if let size = variant, !Self.variants.contains(size) {
            throw HTTPError.validation("size must be one of \(Self.variants.joined(separator: ", ")).", field: "size")
        }
        if media.placeholder == nil { variant = nil }
        let etag = "\"\(media.sha256)\(variant.map { "-" + $0 } ?? "")\""
        let cache = [("ETag", etag), ("Cache-Control", "private, max-age=86400, immutable")]
        // RFC 9110 13.1.2: `*`, or a list of tags compared weakly (`W/"x"` names the same image as `"x"`).
        if let match = request.header("if-none-match"), match.split(separator: ",").contains(where: {
            let tag = $0.trimmingCharacters(in: .whitespaces)
            return tag == "*" || tag == etag || tag == "W/" + etag
        }) {
            return Response(status: 304, headers: cache)
        }
        let found = try variant.map { try store.get(key(media.id, variant: $0)) } ?? bytes(media.id, on: c)
        guard let found else { throw HTTPError.notFound() }
        return Response(status: 200, headers: [("Content-Type", media.contentType), ("Content-Security-Policy", "default-src 'none'; sandbox")]
                            + cache, body: found)
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
        try c.first("""
            SELECT count(*) AS n FROM \(unescaped: schema).media
            WHERE id = ANY(\(PostgresArray(ids))::uuid[]) AND owner_id = \(owner) AND purpose = \(purpose)
            """)!["n"]
    }
}
