import Foundation
import XCTest

/// Photos as phones take them (issue 64): every upload is decoded with a pixel limit, turned upright, stored as a
/// JPEG without any metadata with smaller renditions and a placeholder, and the views give all of them. Files are
/// made at test time by Pillow and pillow-heif with GPS Exif, XMP and an orientation tag, and read back by Pillow.
/// `ImagePipelineInABucketTests` runs them all again with the images in an S3 bucket.
class ImagePipelineTests: StoriesTestCase {
    func upload(_ path: String, _ bytes: [UInt8], _ who: Person, port: Int? = nil) throws -> APIResponse {
        try APIClient(port: port ?? stories.port).send("POST", path, raw: bytes, token: who.token, headers: ["Content-Type": "application/octet-stream"])
    }

    /// Loads each of the upload's sizes by its signed URL and checks what an outside reader finds in it: a JPEG, of
    /// the size the answer says (`full`) or within its box, with no metadata left; served so that nothing in it runs.
    func assertStoredClean(_ answer: APIResponse, width: Int, height: Int, _ what: String, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(answer.status, 201, "\(what): \(String(decoding: answer.body, as: UTF8.self))", file: file, line: line)
        XCTAssertEqual(answer["contentType"] as? String, "image/jpeg", what, file: file, line: line)
        XCTAssertEqual(answer["width"] as? Int, width, what, file: file, line: line)
        XCTAssertEqual(answer["height"] as? Int, height, what, file: file, line: line)
        XCTAssertEqual((answer["placeholder"] as? String)?.count, 28, "\(what): a BlurHash of 4 × 3 components", file: file, line: line)
        let urls = answer["urls"] as? [String: String] ?? [:]
        XCTAssertEqual(urls["full"], answer["url"] as? String, what, file: file, line: line)
        for (size, box) in [("full", 2048), ("large", 1080), ("small", 320)] {
            let r = try load(urls[size])
            XCTAssertEqual(r.status, 200, "\(what) \(size)", file: file, line: line)
            XCTAssertEqual(r.headers["content-type"], "image/jpeg", file: file, line: line)
            XCTAssertEqual(r.headers["content-security-policy"], "default-src 'none'; sandbox", file: file, line: line)
            XCTAssertEqual(r.headers["x-content-type-options"], "nosniff", file: file, line: line)
            let read = try CameraPhotos.read(r.body)
            XCTAssertEqual(read.format, "JPEG", "\(what) \(size)", file: file, line: line)
            XCTAssertEqual(read.metadata, [], "\(what) \(size): nothing of the camera's metadata is left", file: file, line: line)
            let scale = min(1, Double(box) / Double(max(width, height)))
            XCTAssertEqual(read.width, max(1, Int((Double(width) * scale).rounded())), "\(what) \(size)", file: file, line: line)
            XCTAssertEqual(read.height, max(1, Int((Double(height) * scale).rounded())), "\(what) \(size)", file: file, line: line)
            XCTAssertFalse(String(decoding: r.body, as: UTF8.self).contains("GPS"), "\(what) \(size)", file: file, line: line)
        }
    }

    func testEveryFormatIsStoredUprightAsAJPEGWithoutItsMetadata() throws {
        let ann = try person()
        for format in ["jpeg", "png", "webp", "heic"] {
            // 40 × 20 pixels tagged "turn 90° clockwise" (for HEIC, pillow-heif writes it as the image's rotation).
            let photo = try CameraPhotos.photo(format, 40, 20, orientation: 6)
            XCTAssertTrue(try CameraPhotos.read(photo).metadata.contains { $0.hasPrefix("exif") || $0 == "xmp" }, "\(format): the upload carries metadata")
            try assertStoredClean(try upload("/v1/media", photo, ann), width: 20, height: 40, format)
        }
    }

    func testAnIPhonePhotoUploadsInStoriesChatAndDispatch() throws {
        var environment = ["DATABASE_URL": database.url, "AUTH_JWKS_URL": "http://127.0.0.1:\(auth.port)/v1/auth/jwks",
                           "KAFKA_GROUP_PREFIX": "t" + UUID().uuidString.prefix(8).lowercased() + "-"]
        environment["FLEET_FEED"] = "off"
        environment.merge(mediaSettings) { $1 }
        let chat = try ServiceProcess.startReady("chat", environment: environment)
        defer { chat.stop() }
        let dispatch = try ServiceProcess.startReady("dispatch", environment: environment)
        defer { dispatch.stop() }
        let ann = try person()
        // An iPhone's camera: HEIC, held upright (the sensor's 1600 × 1200 turned by its orientation), GPS in its Exif.
        let photo = try CameraPhotos.photo("heic", 1600, 1200, orientation: 6)
        XCTAssertTrue(try CameraPhotos.read(photo).metadata.contains { $0.hasPrefix("exif") })
        var uploaded: [String: APIResponse] = [:]
        for (path, port) in [("/v1/media", stories.port), ("/v1/chat/media", chat.port), ("/v1/dispatch/media", dispatch.port)] {
            uploaded[path] = try upload(path, photo, ann, port: port)
            try assertStoredClean(uploaded[path]!, width: 1200, height: 1600, path)
        }
        // A message's images as a room's members read them: sizes, dimensions and placeholder.
        let rooms = APIClient(port: chat.port)
        let room = try rooms.post("/v1/rooms", ["name": "Photos"], token: ann.token)["id"] as? String ?? ""
        let posted = try rooms.post("/v1/rooms/\(room)/messages", ["text": "Look", "mediaIds": [uploaded["/v1/chat/media"]!["id"]!]],
                                    token: ann.token)
        XCTAssertEqual(posted.status, 201, String(decoding: posted.body, as: UTF8.self))
        let read = try rooms.get("/v1/rooms/\(room)/messages", token: ann.token)
        let image = ((read["items"] as? [[String: Any]])?.first?["media"] as? [[String: Any]])?.first
        XCTAssertEqual(image?["width"] as? Int, 1200)
        XCTAssertEqual(image?["height"] as? Int, 1600)
        XCTAssertEqual(image?["placeholder"] as? String, uploaded["/v1/chat/media"]?["placeholder"] as? String)
        XCTAssertEqual(try load((image?["urls"] as? [String: String])?["small"]).status, 200)
    }

    func testADecompressionBombIsRefusedBeforeItIsDecoded() throws {
        let ann = try person()
        let bomb = try CameraPhotos.bomb()
        XCTAssertLessThan(bomb.count, 64 << 10, "48 KB on the wire")
        let pid = stories.process.processIdentifier
        // Warm: the first upload loads libvips and its codecs.
        XCTAssertEqual(try upload("/v1/media", Images.png, ann).status, 201)
        let before = try memory(pid)
        let r = try upload("/v1/media", bomb, ann)
        assertClientError(r, 413, code: "payload_too_large", "20,000 × 20,000 pixels")
        let after = try memory(pid)
        // Decoded, it would be 1.6 GB (RGBA); refused from its header, the peak hardly moves.
        XCTAssertLessThan(after.peak - before.peak, 64 << 20, "the peak resident memory grew by \(after.peak - before.peak) bytes")
        XCTAssertLessThan(after.resident - before.resident, 64 << 20)
        XCTAssertEqual(try count("media"), 1, "nothing of the bomb is stored")
    }

    func testHTMLBehindAnHEICTypeIsRefused() throws {
        let ann = try person()
        let html = Array("<html><script>alert(document.cookie)</script></html>".utf8)
        let fake = [0, 0, 0, 24] + Array("ftypheic".utf8) + [0, 0, 0, 0] + Array("mif1heic".utf8) + html
        let padded = fake + [UInt8](repeating: 0x20, count: max(0, 89 - fake.count))
        XCTAssertEqual(padded.count, 89)
        assertClientError(try upload("/v1/media", padded, ann), 415, code: "unsupported_media_type")
        XCTAssertEqual(try count("media"), 0)
    }

    func testAStoryListGivesEachPhotoItsSizesDimensionsAndPlaceholder() throws {
        let ann = try person(), ben = try person()
        let family = try group(ann)
        XCTAssertEqual(try join(ben, family).status, 200)
        let uploaded = try upload("/v1/media", try CameraPhotos.photo("jpeg", 1200, 900), ann)
        XCTAssertEqual(uploaded.status, 201)
        XCTAssertEqual(try api.post("/v1/stories", ["text": "Look", "groupIds": [family["id"]!], "mediaIds": [uploaded["id"]!]],
                                    token: ann.token).status, 201)
        let list = try api.get("/v1/groups/\(family["id"]!)/stories", token: ben.token)
        XCTAssertEqual(list.status, 200)
        let photo = try XCTUnwrap((((list["items"] as? [[String: Any]])?.first)?["media"] as? [[String: Any]])?.first)
        XCTAssertEqual(photo["id"] as? String, uploaded["id"] as? String)
        XCTAssertEqual(photo["width"] as? Int, 1200)
        XCTAssertEqual(photo["height"] as? Int, 900)
        XCTAssertEqual(photo["placeholder"] as? String, uploaded["placeholder"] as? String)
        let urls = try XCTUnwrap(photo["urls"] as? [String: String])
        XCTAssertEqual(Set(urls.keys), ["small", "large", "full"])
        XCTAssertEqual(urls["full"], photo["url"] as? String, "url stays the stored image's, for the apps that read it")
        let small = try CameraPhotos.read(try load(urls["small"]).body)
        XCTAssertEqual([small.width, small.height], [320, 240])
        let large = try CameraPhotos.read(try load(urls["large"]).body)
        XCTAssertEqual([large.width, large.height], [1080, 810])
        // A URL signed for one size loads that size alone.
        let swapped = (urls["small"] ?? "").replacingOccurrences(of: "size=small", with: "size=large")
        assertClientError(try load(swapped), 403, code: "forbidden", "the small one's signature for the large one")
        let dropped = (urls["small"] ?? "").replacingOccurrences(of: "size=small&", with: "")
        assertClientError(try load(dropped), 403, code: "forbidden", "the small one's signature for the full one")
        // The group's JSON newsletter gives them too.
        let newsletter = try api.get("/v1/groups/\(family["id"]!)/newsletter", token: ben.token)
        let day = ((newsletter["members"] as? [[String: Any]])?.first?["days"] as? [[String: Any]])?.first
        let inLetter = ((day?["stories"] as? [[String: Any]])?.first?["media"] as? [[String: Any]])?.first
        XCTAssertEqual(inLetter?["width"] as? Int, 1200)
        XCTAssertEqual(inLetter?["placeholder"] as? String, uploaded["placeholder"] as? String)
        XCTAssertEqual(try load((inLetter?["urls"] as? [String: String])?["small"]).status, 200)
    }

    /// The process's resident memory and its peak (VmRSS, VmHWM), in bytes.
    func memory(_ pid: Int32) throws -> (resident: Int, peak: Int) {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        func value(_ name: String) -> Int {
            let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
            return (Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") ?? 0) * 1024
        }
        return (value("VmRSS"), value("VmHWM"))
    }
}
