import Foundation
import Imaging

/// Photos as phones write them, made at test time by `Tests/ImagingTests/camera_photo.py` with the stack's Pillow and
/// pillow-heif (whose own libheif has an HEVC encoder): a picture with GPS in its Exif (and XMP where the format
/// holds it) and an orientation tag.
enum CameraPhotos {
    /// `format` (jpeg, png, webp, heic) of `width` × `height`, tagged `orientation`.
    static func photo(_ format: String, _ width: Int, _ height: Int, orientation: Int = 1) throws -> [UInt8] {
        try write(["\(format)", "\(width)", "\(height)", "\(orientation)"])
    }

    /// A 20,000 × 20,000 PNG of one colour: about 48 KB, 1.6 GB once decoded as RGBA.
    static func bomb() throws -> [UInt8] { try write(["bomb"]) }

    /// What the services store of `upload` (the same pipeline, so the same bytes): what a URL of it loads.
    static func stored(_ upload: [UInt8]) -> [UInt8] { (try? ImagePipeline.process(upload))?.full.bytes ?? [] }

    private static func write(_ arguments: [String]) throws -> [UInt8] {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("photo-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: out) }
        try run([try TestEnvironment.venvPython(), TestEnvironment.root.appendingPathComponent("Tests/ImagingTests/camera_photo.py").path]
                + arguments + [out.path])
        return Array(try Data(contentsOf: out))
    }

    /// What Python's Pillow, an outside reader, finds in `bytes`: its format and size, and any metadata left
    /// (Exif tags, XMP, ICC, comments, text chunks).
    static func read(_ bytes: [UInt8]) throws -> (format: String, width: Int, height: Int, metadata: [String]) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("read-\(UUID().uuidString)")
        try Data(bytes).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let printed = try run([try TestEnvironment.venvPython(), "-c", """
            import sys, json; from PIL import Image
            import pillow_heif; pillow_heif.register_heif_opener()
            i = Image.open(sys.argv[1])
            left = ["exif:%d" % k for k in i.getexif()] + sorted(k for k in i.info if k not in ("jfif", "jfif_version", "jfif_unit", "jfif_density", "dpi", "progressive", "progression"))
            print(json.dumps([i.format, i.width, i.height, left]))
            """, file.path])
        let line = printed.split(separator: "\n").last.map(String.init) ?? ""
        guard let parsed = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [Any], parsed.count == 4 else {
            throw TestFailure("Pillow said: \(printed)")
        }
        return (parsed[0] as? String ?? "", parsed[1] as? Int ?? 0, parsed[2] as? Int ?? 0, parsed[3] as? [String] ?? [])
    }
}
