import CVips

/// Uploaded photos made fit to store and show, on libvips (the only code that imports `CVips`): decoded with a pixel
/// limit checked from the header, turned upright by their orientation, converted to sRGB, and re-encoded as JPEG with
/// no metadata whatever the input carried (Exif, XMP, IPTC, GPS, ICC), at a bounded size, with smaller renditions and a
/// BlurHash placeholder. Callers handle bytes and numbers only: each libvips image is an `Image`, freed when it goes.
public enum ImagePipeline {
    /// The formats accepted, by libvips' loader for them (its content sniffing: never the client's header).
    static let loaders = [
        "VipsForeignLoadJpegBuffer": "image/jpeg", "VipsForeignLoadPngBuffer": "image/png",
        "VipsForeignLoadWebpBuffer": "image/webp", "VipsForeignLoadHeifBuffer": "image/heic",
    ]
    /// The most pixels an upload may have, read from its header before anything is decoded: 50 megapixels (a 48 MP
    /// phone camera's full size; a 20,000 × 20,000 "decompression bomb" of 48 KB is 400).
    public static let maxPixels = 50_000_000
    /// The stored image's longest side.
    public static let longestSide = 2048
    /// The smaller renditions made of every image, by name, with their longest side (never enlarged).
    public static let renditions: [(name: String, side: Int)] = [("small", 320), ("large", 1080)]
    /// JPEG quality: small files at no visible loss for photos.
    static let quality = 82

    public enum Failure: Error, Equatable {
        /// Not a JPEG, PNG, WebP or HEIC image libvips can decode whole.
        case unsupported
        /// More pixels than `maxPixels`.
        case tooLarge(width: Int, height: Int)
    }

    /// One encoded picture.
    public struct Encoded: Sendable {
        public let bytes: [UInt8]
        public let width: Int
        public let height: Int
    }

    /// What an upload becomes.
    public struct Result: Sendable {
        /// The format the upload was in.
        public let sourceType: String
        /// The stored image (JPEG, at most `longestSide`).
        public let full: Encoded
        /// Each of `renditions`, by name.
        public let renditions: [String: Encoded]
        /// A BlurHash of the image (4 × 3 components), to draw before the bytes arrive.
        public let placeholder: String
        public var contentType: String { "image/jpeg" }
    }

    /// Whether libvips started (once per process).
    private static let started: Bool = cvips_start() == 0

    /// The upload made fit to store, or `Failure`.
    public static func process(_ upload: [UInt8]) throws -> Result {
        guard started else { throw Failure.unsupported }
        // libvips reads the buffer in place, lazily: every image made from it is released inside this closure.
        let (type, full) = try upload.withUnsafeBytes { raw -> (String, Encoded) in
            guard let base = raw.baseAddress, raw.count > 0 else { throw Failure.unsupported }
            guard let name = cvips_loader(base, raw.count).map({ String(cString: $0) }), let type = loaders[name] else {
                throw Failure.unsupported
            }
            let header = try Image(cvips_header(base, raw.count))
            guard header.width > 0, header.height > 0 else { throw Failure.unsupported }
            guard header.width * header.height <= maxPixels else { throw Failure.tooLarge(width: header.width, height: header.height) }
            return (type, try Image(cvips_thumbnail(base, raw.count, Int32(longestSide))).jpeg())
        }
        // The renditions and the placeholder come from the stored JPEG: upright, sRGB, shrunk on load.
        var renditions: [String: Encoded] = [:]
        let placeholder = try full.bytes.withUnsafeBytes { raw -> String in
            for (name, side) in Self.renditions {
                let image = try Image(cvips_thumbnail(raw.baseAddress, raw.count, Int32(side)))
                // One no smaller than the stored image is the stored image: not encoded a second time.
                renditions[name] = image.width == full.width && image.height == full.height ? full : try image.jpeg()
            }
            return try Image(cvips_thumbnail(raw.baseAddress, raw.count, 32)).blurHash()
        }
        return Result(sourceType: type, full: full, renditions: renditions, placeholder: placeholder)
    }
}

/// One libvips image, released when it goes.
final class Image {
    let handle: UnsafeMutablePointer<VipsImage>

    /// Takes ownership of `handle`; nil (libvips failed) is an image that cannot be decoded.
    init(_ handle: UnsafeMutablePointer<VipsImage>?) throws {
        guard let handle else {
            cvips_clear_error()
            throw ImagePipeline.Failure.unsupported
        }
        self.handle = handle
    }

    deinit { cvips_unref(handle) }

    var width: Int { Int(cvips_width(handle)) }
    var height: Int { Int(cvips_height(handle)) }

    /// 8-bit sRGB without alpha (over white).
    func opaqueSRGB() throws -> Image {
        let srgb = try Image(cvips_srgb(handle))
        return cvips_hasalpha(srgb.handle) != 0 ? try Image(cvips_flatten(srgb.handle)) : srgb
    }

    /// Encoded as a JPEG without metadata.
    func jpeg() throws -> ImagePipeline.Encoded {
        let image = try opaqueSRGB()
        var bytes: UnsafeMutableRawPointer?
        var length = 0
        guard cvips_jpeg(image.handle, Int32(ImagePipeline.quality), &bytes, &length) == 0, let bytes else {
            cvips_clear_error()
            throw ImagePipeline.Failure.unsupported
        }
        defer { cvips_free(bytes) }
        return ImagePipeline.Encoded(bytes: Array(UnsafeRawBufferPointer(start: bytes, count: length)), width: image.width,
                                     height: image.height)
    }

    /// The BlurHash of this (small) image.
    func blurHash() throws -> String {
        let image = try opaqueSRGB()
        var length = 0
        guard let pixels = cvips_pixels(image.handle, &length) else {
            cvips_clear_error()
            throw ImagePipeline.Failure.unsupported
        }
        defer { cvips_free(pixels) }
        let rgb = Array(UnsafeRawBufferPointer(start: pixels, count: length))
        return BlurHash.encode(rgb: rgb, width: image.width, height: image.height)
    }
}
