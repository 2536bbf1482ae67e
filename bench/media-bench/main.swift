import Foundation
import Imaging

// What the services do with each upload (ImagePipeline.process: decode with its pixel limit, upright, the stored
// JPEG, the 320 and 1080 px renditions, the BlurHash), over the files named, for SECONDS; prints
// "<images per second> <megapixels per second>". bench/media.sh runs it beside vipsthumbnail on the same files.
let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2, let seconds = Double(arguments[0]) else {
    FileHandle.standardError.write(Data("usage: media-bench SECONDS FILE...\n".utf8))
    exit(2)
}
let files = try arguments.dropFirst().map { Array(try Data(contentsOf: URL(fileURLWithPath: $0))) }
var pixels = 0.0
for file in files {  // a first pass: libvips' start, and each file's size
    let result = try ImagePipeline.process(file)
    pixels += Double(result.full.width * result.full.height)
}
pixels /= Double(files.count)
var done = 0
let start = Date()
while Date().timeIntervalSince(start) < seconds {
    _ = try ImagePipeline.process(files[done % files.count])
    done += 1
}
let rate = Double(done) / Date().timeIntervalSince(start)
print(String(format: "%.1f %.1f", rate, rate * pixels / 1e6))
