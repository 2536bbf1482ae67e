/// Removes where a photo was taken before it is stored: the GPS block of a JPEG's Exif data is blanked, XMP
/// packets (which may repeat it), PNG text and Exif chunks and WebP Exif and XMP chunks are dropped. Orientation and
/// colour data stay, so photos still display the right way up. A HEIC photo's metadata lives in items whose places
/// other boxes record; rather than rewrite them, a HEIC that carries Exif or XMP is refused (`nil`), one without is
/// stored as it is.
public enum LocationScrubber {
    /// The image without its location data, or nil when it cannot be removed (the upload is refused).
    public static func scrub(_ bytes: [UInt8], contentType: String) -> [UInt8]? {
        switch contentType {
        case "image/jpeg": return jpeg(bytes)
        case "image/png": return png(bytes)
        case "image/webp": return webp(bytes)
        case "image/heic": return heicCarriesMetadata(bytes) ? nil : bytes
        default: return bytes
        }
    }

    // MARK: JPEG

    static func jpeg(_ b: [UInt8]) -> [UInt8] {
        var out = Array(b.prefix(2))
        var i = 2
        while i + 4 <= b.count, b[i] == 0xFF {
            let marker = b[i + 1]
            if marker == 0xDA || marker == 0xD9 { break }  // start of scan: the rest is image data
            let length = Int(b[i + 2]) << 8 | Int(b[i + 3])
            guard length >= 2, i + 2 + length <= b.count else { break }
            var segment = Array(b[i..<(i + 2 + length)])
            if marker == 0xE1 {
                let payload = segment[4...]
                if payload.starts(with: Array("Exif\0\0".utf8)) {
                    blankGPS(&segment, tiffStart: 10)
                } else if payload.starts(with: Array("http://ns.adobe.com/xap/1.0/".utf8)) {
                    i += 2 + length
                    continue  // XMP: dropped
                }
            }
            out += segment
            i += 2 + length
        }
        out += b[min(i, b.count)...]
        return out
    }

    /// Blanks the GPS IFD of the TIFF structure starting at `tiffStart` in `s`: its entries, their values, and
    /// its entry count, so no reader finds a trace of the location.
    static func blankGPS(_ s: inout [UInt8], tiffStart t: Int) {
        guard s.count >= t + 8 else { return }
        let little = s[t] == 0x49 && s[t + 1] == 0x49
        guard little || (s[t] == 0x4D && s[t + 1] == 0x4D) else { return }
        func u16(_ o: Int) -> Int? {
            guard o >= 0, o + 2 <= s.count else { return nil }
            return little ? Int(s[o]) | Int(s[o + 1]) << 8 : Int(s[o]) << 8 | Int(s[o + 1])
        }
        func u32(_ o: Int) -> Int? {
            guard let a = u16(o), let b = u16(o + 2) else { return nil }
            return little ? a | b << 16 : a << 16 | b
        }
        func zero(_ from: Int, _ count: Int) {
            guard from >= 0, count > 0, from + count <= s.count else { return }
            for k in from..<(from + count) { s[k] = 0 }
        }
        guard let ifd0 = u32(t + 4).map({ t + $0 }), let entries = u16(ifd0) else { return }
        for e in 0..<min(entries, 512) {
            let entry = ifd0 + 2 + e * 12
            guard u16(entry) == 0x8825, let offset = u32(entry + 8), let count = u16(t + offset) else { continue }
            let gps = t + offset
            let sizes = [1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 7: 1, 9: 4, 10: 8]
            for g in 0..<min(count, 512) {
                let ge = gps + 2 + g * 12
                guard let type = u16(ge + 2), let n = u32(ge + 4) else { continue }
                let size = (sizes[type] ?? 1) * n
                if size > 4, let valueOffset = u32(ge + 8) { zero(t + valueOffset, min(size, s.count)) }
                zero(ge, 12)
            }
            zero(gps, 2)
        }
    }

    // MARK: PNG

    static func png(_ b: [UInt8]) -> [UInt8] {
        guard b.count > 8 else { return b }
        var out = Array(b.prefix(8))
        var i = 8
        let dropped: Set<String> = ["eXIf", "tEXt", "zTXt", "iTXt"]
        while i + 12 <= b.count {
            let length = Int(b[i]) << 24 | Int(b[i + 1]) << 16 | Int(b[i + 2]) << 8 | Int(b[i + 3])
            guard length >= 0, i + 12 + length <= b.count else { break }
            let type = String(decoding: b[(i + 4)..<(i + 8)], as: UTF8.self)
            if !dropped.contains(type) { out += b[i..<(i + 12 + length)] }
            i += 12 + length
        }
        out += b[min(i, b.count)...]
        return out
    }

    // MARK: WebP

    /// A RIFF file of chunks (FourCC, little-endian size, data padded to even): the `EXIF` and `XMP ` chunks are
    /// dropped, the extended header's flags for them cleared and the RIFF size made right. Nil when the chunks do not
    /// line up (a chunk past the end, or no FourCC where one should be): what follows cannot be told apart.
    static func webp(_ b: [UInt8]) -> [UInt8]? {
        guard b.count >= 12 else { return nil }
        var out = Array(b.prefix(12))
        var i = 12
        while i < b.count {
            guard i + 8 <= b.count, b[i..<(i + 4)].allSatisfy({ (0x20...0x7E).contains($0) }) else { return nil }
            let size = Int(b[i + 4]) | Int(b[i + 5]) << 8 | Int(b[i + 6]) << 16 | Int(b[i + 7]) << 24
            guard i + 8 + size <= b.count else { return nil }
            let end = min(b.count, i + 8 + size + (size & 1))  // the last chunk's padding may be missing
            let fourCC = String(decoding: b[i..<(i + 4)], as: UTF8.self)
            if fourCC != "EXIF" && fourCC != "XMP " {
                var chunk = Array(b[i..<end])
                if fourCC == "VP8X", chunk.count > 8 { chunk[8] &= ~0x0C }  // the Exif (0x08) and XMP (0x04) flags
                out += chunk
            }
            i = end
        }
        let riff = UInt32(out.count - 8)
        out[4] = UInt8(riff & 0xFF); out[5] = UInt8(riff >> 8 & 0xFF); out[6] = UInt8(riff >> 16 & 0xFF); out[7] = UInt8(riff >> 24)
        return out
    }

    // MARK: HEIC

    /// Whether the top-level `meta` box of an ISO base media file names an `Exif` item or an XMP one
    /// (`application/rdf+xml`): a conservative search of its bytes, which may refuse a photo that has none.
    static func heicCarriesMetadata(_ b: [UInt8]) -> Bool {
        var i = 0
        while i + 8 <= b.count {
            var size = Int(b[i]) << 24 | Int(b[i + 1]) << 16 | Int(b[i + 2]) << 8 | Int(b[i + 3])
            if size == 1, i + 16 <= b.count {  // a 64-bit size follows the type
                size = b[(i + 8)..<(i + 16)].reduce(0) { $0 << 8 | Int($1) }
            } else if size == 0 {
                size = b.count - i  // to the end of the file
            }
            guard size >= 8 else { return true }  // malformed: nothing to trust
            let end = size < b.count - i ? i + size : b.count  // a declared size past the end (even Int.max) ends the file
            if b[(i + 4)..<(i + 8)].elementsEqual("meta".utf8) {
                let meta = b[i..<end]
                return meta.firstRange(of: Array("Exif".utf8)) != nil || meta.firstRange(of: Array("rdf+xml".utf8)) != nil
            }
            i = end
        }
        return false
    }
}
