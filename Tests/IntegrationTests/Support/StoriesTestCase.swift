import Foundation
import XCTest

/// A test case with its own database, auth, and stories on the shared broker.
class StoriesTestCase: ServiceTestCase {
    override var serviceName: String { "stories" }
    override var serviceSettings: [String: String] { ["NEWSLETTER_SCAN_SECONDS": "1"] }

    /// The stories process under test.
    var stories: ServiceProcess! {
        get { service }
        set { service = newValue }
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        try waitForServiceConsumers()
    }

    /// Creates a group as `admin` and returns its JSON.
    func group(_ admin: Person, name: String = "Family") throws -> [String: Any] {
        let r = try api.post("/v1/groups", ["name": name], token: admin.token)
        XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
        return r.json
    }

    func join(_ person: Person, _ group: [String: Any]) throws -> APIResponse {
        try api.post("/v1/groups/join", ["inviteCode": group["inviteCode"] as? String ?? ""], token: person.token)
    }

}

/// Small valid images of each accepted kind.
enum Images {
    /// A 3×2 PNG.
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8)
        + [0, 0, 0, 3, 0, 0, 0, 2, 8, 2, 0, 0, 0, 0x12, 0x16, 0xF1, 0x4D] + [0, 0, 0, 0] + Array("IEND".utf8) + [0xAE, 0x42, 0x60, 0x82]
    /// The structure of a JPEG of 640×480: header, frame, a scan, end of image.
    static let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10] + Array("JFIF".utf8) + [0, 1, 1, 0, 0, 1, 0, 1, 0, 0]
        + [0xFF, 0xC0, 0x00, 0x11, 0x08, 0x01, 0xE0, 0x02, 0x80, 0x03, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]
        + [0xFF, 0xDA, 0, 2, 7, 7] + [0xFF, 0xD9]
    /// A lossless WebP of 16×9.
    static let webp: [UInt8] = Array("RIFF".utf8) + [26, 0, 0, 0] + Array("WEBPVP8L".utf8) + [13, 0, 0, 0, 0x2F]
        + {
            let bits = (16 - 1) | ((9 - 1) << 14)
            return [UInt8(bits & 0xFF), UInt8((bits >> 8) & 0xFF), UInt8((bits >> 16) & 0xFF), UInt8((bits >> 24) & 0xFF)]
        }() + [0, 0, 0, 0, 0, 0, 0, 0]
    /// A JPEG whose Exif data holds a GPS position (latitude 44/1, 25/1, 1234/100 N) and an XMP packet that
    /// repeats it, before a 640×480 frame.
    static let jpegWithLocation: [UInt8] = {
        // TIFF, big-endian: IFD0 with one entry (GPSInfo → GPS IFD), GPS IFD with LatitudeRef "N" and Latitude.
        var tiff: [UInt8] = Array("MM".utf8) + [0, 42, 0, 0, 0, 8]
        tiff += [0, 1] + [0x88, 0x25, 0, 4, 0, 0, 0, 1, 0, 0, 0, 26] + [0, 0, 0, 0]           // IFD0 at 8, GPS IFD at 26
        tiff += [0, 2] + [0, 1, 0, 2, 0, 0, 0, 2] + Array("N\0".utf8) + [0, 0]                 // GPSLatitudeRef
        tiff += [0, 2, 0, 5, 0, 0, 0, 3, 0, 0, 0, 56] + [0, 0, 0, 0]                          // GPSLatitude → 56
        tiff += [0, 0, 0, 44, 0, 0, 0, 1, 0, 0, 0, 25, 0, 0, 0, 1, 0, 0, 0x04, 0xD2, 0, 0, 0, 100]  // 44/1 25/1 1234/100
        let exif = Array("Exif\0\0".utf8) + tiff
        let xmp = Array("http://ns.adobe.com/xap/1.0/\0<x:xmpmeta><exif:GPSLatitude>44,25.2N</exif:GPSLatitude></x:xmpmeta>".utf8)
        func segment(_ marker: UInt8, _ payload: [UInt8]) -> [UInt8] {
            let n = payload.count + 2
            return [0xFF, marker, UInt8(n >> 8), UInt8(n & 0xFF)] + payload
        }
        return [0xFF, 0xD8] + segment(0xE1, exif) + segment(0xE1, xmp)
            + [0xFF, 0xC0, 0x00, 0x11, 0x08, 0x01, 0xE0, 0x02, 0x80, 0x03, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1] + [0xFF, 0xDA, 0, 2, 7, 7, 0xFF, 0xD9]
    }()

    /// An extended WebP of 16×9 (a VP8X header, then the lossless image of `webp`), with `chunks` after the image
    /// and `flags` in its header.
    static func webpExtended(flags: UInt8, chunks: [(String, [UInt8])] = []) -> [UInt8] {
        func chunk(_ fourCC: String, _ data: [UInt8]) -> [UInt8] {
            let n = data.count
            return Array(fourCC.utf8) + [UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 24)]
                + data + (n % 2 == 1 ? [0] : [])
        }
        var body = Array("WEBP".utf8) + chunk("VP8X", [flags, 0, 0, 0, 15, 0, 0, 8, 0, 0]) + Array(webp[12...]) + [0]  // padded to even
        for (fourCC, data) in chunks { body += chunk(fourCC, data) }
        let n = body.count
        return Array("RIFF".utf8) + [UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 24)] + body
    }
    /// The same WebP with the Exif data of `jpegWithLocation` and an XMP packet, flagged in its header.
    static let webpWithLocation = webpExtended(flags: 0x0C, chunks: [
        ("EXIF", Array(jpegWithLocation[12..<92])),  // its TIFF structure, GPS block included
        ("XMP ", Array("<x:xmpmeta><exif:GPSLatitude>44,25.2N</exif:GPSLatitude></x:xmpmeta>".utf8)),
    ])
    /// An HEIC whose `meta` box names an Exif item (where its GPS tags would be).
    static let heicWithExif: [UInt8] = {
        func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
            let n = payload.count + 8
            return [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + Array(type.utf8) + payload
        }
        let infe = box("infe", [2, 0, 0, 0, 0, 1, 0, 0] + Array("Exif".utf8))
        return heic + box("meta", [0, 0, 0, 0] + box("iinf", [0, 0, 0, 0, 0, 1] + infe))
    }()

    /// A PNG with a text chunk naming a place.
    static let pngWithText: [UInt8] = Array(png.prefix(33)) + [0, 0, 0, 18] + Array("tEXtLocation\0Bucharest".utf8) + [1, 2, 3, 4] + Array(png.suffix(12))

    /// A PNG a browser decodes: 2×2 pixels, red and blue rows.
    static let decodablePNG: [UInt8] = [
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x02,
        0x00, 0x00, 0x00, 0x02, 0x08, 0x02, 0x00, 0x00, 0x00, 0xFD, 0xD4, 0x9A, 0x73, 0x00, 0x00, 0x00, 0x11, 0x49, 0x44, 0x41,
        0x54, 0x78, 0x9C, 0x63, 0xF8, 0xCF, 0xC0, 0x00, 0x44, 0x0C, 0x60, 0xF2, 0x3F, 0x00, 0x1B, 0xF2, 0x03, 0xFD, 0xF3, 0xE7,
        0x4B, 0xB1, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
    ]

    /// An HEIC file type box.
    static let heic: [UInt8] = [0, 0, 0, 24] + Array("ftypheic".utf8) + [0, 0, 0, 0] + Array("mif1heic".utf8)
}
