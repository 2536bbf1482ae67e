import Foundation
import Synchronization

/// Recommendations that never leave a topic: videos of the same topic ranked by content similarity (BM25 over
/// title, subtopic and path, description and the parent's description, and captions, with the title counting
/// most), blended with the topic's sequence (the next unwatched videos after this one rank high: build on what
/// is being learned) and with what the viewer watched and liked. The index lives in memory, built from the
/// catalogue and rebuilt when it changes.
final class Recommender: Sendable {
    /// One video as the index sees it.
    struct Document: Sendable {
        let id: UUID
        let topic: UUID
        let position: Int
        /// Where its terms are in the index's `terms`: numbered (the words themselves are not kept: every query is a
        /// video of the index) in ascending order, each with its weighted frequency: 8 bytes a term where a
        /// dictionary of words took several times that.
        let terms: Range<Int>
        let length: Double
    }

    /// A term of a document and its weighted frequency (sums of the weights below: exact in a `Float`).
    struct Term: Sendable { let id: Int32; let weight: Float }

    /// A topic's documents and their statistics.
    struct Topic: Sendable {
        var documents: [Document] = []
        var documentFrequency: [Int32: Int32] = [:]
        var averageLength = 1.0
    }

    private struct Index: Sendable {
        var topics: [UUID: Topic] = [:]
        var byId: [UUID: Document] = [:]
        var version = ""
        /// Every document's terms, one after another: one allocation. An array for each document left 2.3 MB of
        /// free pages resident between them once the build's words were freed.
        var terms: [Term] = []
        /// Rankings that depend on nothing but the catalogue (no viewer history), by video.
        var plain: [UUID: [UUID]] = [:]
        /// How many ids `plain` holds in all: at most `plainLimit`, so that asking for every video of a large
        /// catalogue cannot grow it without bound (a topic of 500 videos makes an 8 KB ranking).
        var plainIds = 0
    }

    private let index = Mutex(Index())

    /// How much each part of a video's text counts.
    static let weights: (title: Float, subtopic: Float, description: Float, context: Float, captions: Float) = (3, 2, 1, 0.5, 0.5)
    /// The most ids the plain rankings keep (16 MB).
    static let plainLimit = 1_000_000
    /// How the three signals blend.
    static let blend = (content: 0.6, sequence: 0.3, personal: 0.1)

    /// The catalogue version the index was built from.
    var version: String { index.withLock { $0.version } }
    /// How many videos it holds.
    var count: Int { index.withLock { $0.byId.count } }

    /// Rebuilds the index from `videos` (the whole catalogue).
    func rebuild(_ videos: [VideoRecord], version: String) {
        var built = Index(version: version)
        var vocabulary: [String: Int32] = [:]
        for v in videos {
            var terms: [Int32: Float] = [:]
            func add(_ text: String, _ weight: Float) {
                for word in Self.tokens(text) {
                    let id = vocabulary[word] ?? { let id = Int32(vocabulary.count); vocabulary[word] = id; return id }()
                    terms[id, default: 0] += weight
                }
            }
            add(v.title, Self.weights.title)
            add(v.subtopic + " " + v.path, Self.weights.subtopic)
            add(v.description, Self.weights.description)
            add(v.parentDescription, Self.weights.context)
            if let captions = v.captions { add(captions, Self.weights.captions) }
            let start = built.terms.count
            built.terms += terms.map { Term(id: $0.key, weight: $0.value) }.sorted { $0.id < $1.id }
            let doc = Document(id: v.id, topic: v.topicId, position: v.position, terms: start..<built.terms.count,
                               length: terms.values.reduce(0) { $0 + Double($1) })
            built.byId[v.id] = doc
            built.topics[v.topicId, default: Topic()].documents.append(doc)
        }
        for (id, var topic) in built.topics {
            for doc in topic.documents { for term in built.terms[doc.terms] { topic.documentFrequency[term.id, default: 0] += 1 } }
            topic.averageLength = max(1, topic.documents.map(\.length).reduce(0, +) / Double(max(1, topic.documents.count)))
            built.topics[id] = topic
        }
        index.withLock { $0 = built }
    }

    /// Every other video of `video`'s topic, best first, and the catalogue version it was ranked from. Nil when the
    /// video is not in the index. Without history the ranking depends on the catalogue alone and is kept until the
    /// index is rebuilt.
    func rank(_ video: UUID, watched: Set<UUID> = [], liked: Set<UUID> = []) -> (ids: [UUID], version: String)? {
        let plain = watched.isEmpty && liked.isEmpty
        if plain, let known = index.withLock({ i in i.plain[video].map { ($0, i.version) } }) { return known }
        guard let (ranked, version) = score(video, watched: watched, liked: liked) else { return nil }
        if plain {
            index.withLock { i in
                // Kept only by the index it was ranked from: one rebuilt meanwhile may hold more of the topic.
                guard i.version == version, i.plain[video] == nil, i.plainIds + ranked.count <= Self.plainLimit else { return }
                i.plain[video] = ranked
                i.plainIds += ranked.count
            }
        }
        return (ranked, version)
    }

    /// The ranking, and the version of the index it was ranked from.
    private func score(_ video: UUID, watched: Set<UUID>, liked: Set<UUID>) -> ([UUID], version: String)? {
        let (doc, topic, terms, version) = index.withLock { i -> (Document?, Topic?, [Term], String) in
            guard let d = i.byId[video] else { return (nil, nil, [], "") }
            return (d, i.topics[d.topic], i.terms, i.version)
        }
        guard let doc, let topic else { return nil }
        let n = Double(topic.documents.count)
        let (k1, b) = (1.2, 0.75)
        /// A query's terms with what each brings to a score besides the document's own frequency: idf · qtf · (k1 + 1).
        func query(_ d: Document) -> (terms: ArraySlice<Term>, factors: [Double]) {
            (terms[d.terms], terms[d.terms].map { term in
                let df = Double(topic.documentFrequency[term.id] ?? 0)
                return log(1 + (n - df + 0.5) / (df + 0.5)) * Double(term.weight) * (k1 + 1)
            })
        }
        func bm25(_ query: (terms: ArraySlice<Term>, factors: [Double]), _ d: Document) -> Double {
            let norm = k1 * (1 - b + b * d.length / topic.averageLength)
            let base = query.terms.startIndex
            var score = 0.0, i = base, j = d.terms.lowerBound
            while i < query.terms.endIndex && j < d.terms.upperBound {  // both in term order
                let q = query.terms[i].id, t = terms[j].id
                if q < t { i += 1 } else if q > t { j += 1 } else {
                    let tf = Double(terms[j].weight)
                    score += query.factors[i - base] * tf / (tf + norm)
                    i += 1; j += 1
                }
            }
            return score
        }
        let likedDocs = topic.documents.filter { liked.contains($0.id) && $0.id != video }.map(query)
        let this = query(doc)
        var scored: [(id: UUID, score: Double, position: Int)] = []
        var content: [Double] = [], personal: [Double] = []
        let candidates = topic.documents.filter { $0.id != video }
        for d in candidates {
            content.append(bm25(this, d))
            personal.append(likedDocs.isEmpty ? 0 : likedDocs.map { bm25($0, d) }.max()!)
        }
        let maxContent = max(content.max() ?? 0, 1e-9), maxPersonal = max(personal.max() ?? 0, 1e-9)
        for (i, d) in candidates.enumerated() {
            // The next unwatched videos after this one build on it; earlier and watched ones much less.
            let ahead = d.position - doc.position
            var sequence = ahead > 0 ? 1 / (1 + Double(ahead - 1) / 3) : 0.1 / (1 + Double(-ahead) / 10)
            if watched.contains(d.id) { sequence *= 0.2 }
            var score = Self.blend.content * content[i] / maxContent + Self.blend.sequence * sequence
                + Self.blend.personal * personal[i] / maxPersonal
            if watched.contains(d.id) { score *= 0.5 }
            scored.append((d.id, score, d.position))
        }
        scored.sort { $0.score != $1.score ? $0.score > $1.score : $0.position < $1.position }
        return (scored.map(\.id), version)
    }

    /// The words of a text: lower-cased letters and digits, short and common English words left out, a plural `s`
    /// taken off.
    static func tokens(_ text: String) -> [String] {
        var out: [String] = []
        var word = ""
        func flush() {
            defer { word = "" }
            guard word.count > 1, !stopwords.contains(word) else { return }
            if word.count > 3, word.hasSuffix("s"), !word.hasSuffix("ss") { word.removeLast() }
            out.append(word)
        }
        for scalar in text.lowercased().unicodeScalars {
            if CharacterSet.alphanumerics.contains(scalar) { word.unicodeScalars.append(scalar) } else { flush() }
        }
        flush()
        return out
    }

    static let stopwords: Set<String> = [
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does", "for", "from", "has", "have", "how", "if",
        "in", "into", "is", "it", "its", "of", "on", "or", "our", "so", "that", "the", "their", "them", "then", "there", "these",
        "this", "to", "up", "us", "was", "we", "what", "when", "where", "which", "who", "why", "will", "with", "you", "your",
        "about", "also", "more", "some", "using", "use", "used", "video", "example", "part", "introduction", "intro", "lesson",
    ]
}
