"""Writes an image as a phone camera would: a photo-like picture carrying Exif with GPS and an orientation tag, and XMP
where the format holds it (HEIC through pillow-heif's own libheif and its HEVC encoder).

    camera_photo.py FORMAT WIDTH HEIGHT ORIENTATION OUT     FORMAT: jpeg, png, webp, heic
    camera_photo.py bomb OUT                                a 20,000 x 20,000 PNG of one colour (about 48 KB)
"""
import struct
import sys
import zlib

XMP = (b'<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/">'
       b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about=""'
       b' xmlns:exif="http://ns.adobe.com/exif/1.0/" exif:GPSLatitude="48,51.5N" exif:GPSLongitude="2,17.4E"/>'
       b'</rdf:RDF></x:xmpmeta><?xpacket end="w"?>')


def bomb(out):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    side = 20000
    z = zlib.compressobj(9)
    row = b"\x00" * (1 + side // 8)  # filter byte, then 1-bit grey pixels
    data = b"".join(z.compress(row) for _ in range(side)) + z.flush()
    with open(out, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0))
                + chunk(b"IDAT", data) + chunk(b"IEND", b""))


def photo(fmt, width, height, orientation, out):
    from PIL import Image, ImageDraw
    image = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(image)
    for y in range(height):  # a sky-to-ground gradient with a red sun: something a placeholder can show
        draw.line([(0, y), (width, y)], fill=(40 + 150 * y // max(1, height), 120, 220 - 150 * y // max(1, height)))
    draw.ellipse([width // 4, height // 4, width // 2, height // 2], fill=(230, 40, 30))
    exif = Image.Exif()
    exif[0x010F] = "Apple"
    exif[0x0110] = "iPhone 15 Pro"
    exif[0x0112] = orientation
    gps = exif.get_ifd(0x8825)
    gps.update({1: "N", 2: (48.0, 51.0, 29.0), 3: "E", 4: (2.0, 17.0, 40.0)})
    if fmt == "jpeg":
        image.save(out, "JPEG", exif=exif, xmp=XMP, quality=90)
    elif fmt == "png":
        from PIL.PngImagePlugin import PngInfo
        info = PngInfo()
        info.add_itxt("XML:com.adobe.xmp", XMP.decode())
        image.save(out, "PNG", exif=exif, pnginfo=info)
    elif fmt == "webp":
        image.save(out, "WEBP", exif=exif, xmp=XMP, quality=90)
    elif fmt == "heic":
        import pillow_heif
        pillow_heif.register_heif_opener()
        image.save(out, "HEIF", exif=exif.tobytes(), xmp=XMP, quality=90)
    else:
        raise SystemExit("unknown format " + fmt)


if __name__ == "__main__":
    if sys.argv[1] == "bomb":
        bomb(sys.argv[2])
    else:
        photo(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
