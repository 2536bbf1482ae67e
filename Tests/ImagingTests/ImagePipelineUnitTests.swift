import Foundation
@testable import Imaging
import XCTest

/// The pipeline on files a phone camera would write (made by `camera_photo.py` with Pillow and pillow-heif), read back
/// by an outside reader (Pillow) for what survived.
final class ImagePipelineUnitTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let python = root.appendingPathComponent(".local/venv/bin/python").path

    /// Runs the stack's Python with `arguments`; its standard output.
    @discardableResult
    static func python(_ arguments: [String], input: [UInt8]? = nil) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: python)
        p.arguments = arguments
        let out = Pipe(), inp = Pipe()
        p.standardOutput = out
        p.standardInput = inp
        try p.run()
        if let input { inp.fileHandleForWriting.write(Data(input)) }
        try inp.fileHandleForWriting.close()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw NSError(domain: "python", code: Int(p.terminationStatus)) }
        return String(decoding: data, as: UTF8.self)
    }

    /// A camera-like photo in `format` (jpeg, png, webp, heic), with GPS Exif (and XMP), and `orientation`.
    static func photo(_ format: String, width: Int, height: Int, orientation: Int = 1) throws -> [UInt8] {
        let path = NSTemporaryDirectory() + "photo-\(UUID().uuidString).\(format)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try python([root.appendingPathComponent("Tests/ImagingTests/camera_photo.py").path, format, "\(width)", "\(height)", "\(orientation)", path])
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// What Pillow reads in `jpeg`: "format width height exif-tags info-keys".
    static func read(_ jpeg: [UInt8]) throws -> String {
        try python(["-c", """
            import io, sys; from PIL import Image
            i = Image.open(io.BytesIO(sys.stdin.buffer.read()))
            print(i.format, i.width, i.height, len(i.getexif()), ",".join(sorted(k for k in i.info if k not in ("jfif", "jfif_version", "jfif_unit", "jfif_density", "dpi", "progressive", "progression"))))
            """], input: jpeg).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func testEveryFormatComesOutUprightAsJPEGWithoutMetadata() throws {
        for format in ["jpeg", "png", "webp", "heic"] {
            let result = try ImagePipeline.process(try Self.photo(format, width: 40, height: 20, orientation: 6))
            XCTAssertEqual(result.sourceType, format == "heic" ? "image/heic" : "image/\(format)")
            XCTAssertEqual([result.full.width, result.full.height], [20, 40], format)
            XCTAssertEqual(try Self.read(result.full.bytes), "JPEG 20 40 0", format)
            for (name, r) in result.renditions {
                XCTAssertEqual(try Self.read(r.bytes), "JPEG \(r.width) \(r.height) 0", "\(format) \(name)")
            }
            XCTAssertEqual(result.placeholder.count, 6 + 2 * 11, format)
        }
    }

    func testTheStoredImageAndRenditionsAreBoundedAndNeverEnlarged() throws {
        let result = try ImagePipeline.process(try Self.photo("jpeg", width: 3000, height: 1500))
        XCTAssertEqual([result.full.width, result.full.height], [2048, 1024])
        XCTAssertEqual([result.renditions["large"]!.width, result.renditions["large"]!.height], [1080, 540])
        XCTAssertEqual([result.renditions["small"]!.width, result.renditions["small"]!.height], [320, 160])
        let tiny = try ImagePipeline.process(try Self.photo("png", width: 200, height: 100))
        XCTAssertEqual([tiny.renditions["small"]!.width, tiny.renditions["large"]!.width, tiny.full.width], [200, 200, 200])
    }

    func testADecompressionBombIsRefusedFromItsHeader() throws {
        let path = NSTemporaryDirectory() + "bomb-\(UUID().uuidString).png"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Self.python([Self.root.appendingPathComponent("Tests/ImagingTests/camera_photo.py").path, "bomb", path])
        let bomb = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        XCTAssertLessThan(bomb.count, 64 << 10)
        XCTAssertThrowsError(try ImagePipeline.process(bomb)) { XCTAssertEqual($0 as? ImagePipeline.Failure, .tooLarge(width: 20000, height: 20000)) }
    }

    func testWhatIsNotAnImageIsUnsupported() {
        let heicThenHTML = Array("\0\0\0\u{18}ftypheic\0\0\0\0mif1heic<html><script>alert(document.cookie)</script></html>\n\n\n\n\n\n\n\n".utf8)
        for bytes in [heicThenHTML, Array("GIF89a".utf8) + [UInt8](repeating: 0, count: 40), [0xFF, 0xD8, 0xFF], []] {
            XCTAssertThrowsError(try ImagePipeline.process(bytes)) { XCTAssertEqual($0 as? ImagePipeline.Failure, .unsupported) }
        }
    }

    /// The hash's layout (blurha.sh): its components (4 × 3: "L"), the largest detail, the average colour (a flat red
    /// image's own), then two characters per other component; different pictures, different hashes.
    func testBlurHashLayout() {
        let red = [[UInt8]](repeating: [255, 0, 0], count: 16).flatMap { $0 }
        let hash = Array(BlurHash.encode(rgb: red, width: 4, height: 4))
        XCTAssertEqual(hash.count, 6 + 2 * 11)
        XCTAssertEqual(hash[0], "L")
        XCTAssertEqual(String(hash[2..<6]), BlurHash.base83(0xFF0000, length: 4))
        let across: [UInt8] = (0..<16).flatMap { i in [UInt8(i % 4 * 80), 0, 0] }
        let down: [UInt8] = (0..<16).flatMap { i in [UInt8(i / 4 * 80), 0, 0] }
        XCTAssertNotEqual(BlurHash.encode(rgb: across, width: 4, height: 4), BlurHash.encode(rgb: down, width: 4, height: 4))
        XCTAssertEqual(BlurHash.encode(rgb: red, width: 4, height: 4, x: 1, y: 1), "00" + BlurHash.base83(0xFF0000, length: 4))
    }
}
