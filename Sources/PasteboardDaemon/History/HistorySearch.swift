import FoundationEssentials

/// A search of the history: the entries (not expired) whose text, preview, app or types contain a
/// string (ignoring case), newest first, each with its place in the whole history (what
/// `select N` takes).
///
/// A search that matches few entries asks the index for all of them, and places them by their own
/// rows (``HistoryIndex/placeFew(_:from:to:expired:in:)``): a word in one entry of a thousand
/// costs the thousand. A search that matches many never gathers them: the index is asked for
/// at most ``HistoryIndex/sparseMatches`` (newest first, so that it stops there). Past that,
/// one walk along the listing order's index, from the newest, asks of each stretch it passes
/// which entries match, and stops at the page's end: a word in six entries of ten costs
/// the page's 1,700, not a list of 600,000. Its total is then the matches up to the page's
/// end, and says that more may follow (``HistoryIndex/SearchPage/partial``); the next page
/// resumes the walk where it stopped (``HistoryIndex/SearchCursor``), so that paging through
/// every match costs one walk, not one a page.
extension HistoryIndex {
    /// A page of a search's matches and their places.
    struct SearchPage {
        var page: [(id: Int64, place: Int)]
        /// The matches in all; with ``partial``, those up to the page's end (more may follow).
        var total: Int
        var partial = false
        /// Where the walk stopped, for the next page (nil: the matches were all gathered).
        var cursor: SearchCursor?
    }

    /// Where a walk stopped: after the entry (`used`, `id`), with `seen` matches and `place`
    /// entries before it and it included. Valid for the same search of the same history alone.
    struct SearchCursor: Equatable {
        let search: String
        let seen: Int
        let place: Int
        let used: Double
        let id: Int64
    }

    /// The matches of `search` from match `offset` on (at most `limit`), newest first, with
    /// their places; `resume`: a cursor of an earlier page of this search of this history
    /// (taken when it stopped at `offset`). `sparse`: the most matches gathered whole and
    /// placed by their own rows (a test chooses each way).
    static func search(_ search: String, offset: Int, limit: Int?, in database: SQLiteDatabase, now: Double,
                       resume: SearchCursor? = nil, sparse: Int = sparseMatches) throws(SQLiteError) -> SearchPage {
        let query = SearchQuery(search)
        let end = limit.map { max(0, offset).clampedSum(max(0, $0)) } ?? .max
        let resumed = resume.flatMap { $0.search == search && $0.seen == offset ? $0 : nil }
        // Shorter than a trigram: the index holds nothing of it; each row is looked at as the walk passes.
        guard let phrase = query.phrase else { return try walk(query, others: [], offset: offset, end: end, from: resumed, in: database, now: now) }
        // The rows the index does not hold whole: not indexed yet, or longer than it holds.
        var others = Set<Int64>()
        try gatherOthers(query, into: &others, in: database)
        if let resumed { return try walk(query, others: others, offset: offset, end: end, from: resumed, in: database, now: now) }
        // The index's newest matches, one more than a sparse search has: fewer say it is one.
        var found = Set<Int64>()
        try database.forEachInteger("""
            SELECT rowid FROM entries_search WHERE entries_search MATCH ? ORDER BY rowid DESC LIMIT ?
            """, [.text(phrase), .integer(sparse >= Int(Int32.max) ? -1 : Int64(sparse) + 1)]) { id in
            found.insert(id)
            return true
        }
        guard found.count <= sparse else { return try walk(query, others: others, offset: offset, end: end, from: nil, in: database, now: now) }
        return try placeAll(found.union(others), offset: offset, end: end, sparse: sparse, in: database, now: now)
    }

    /// What a search looks for, as the index and as a look at a row ask it.
    struct SearchQuery {
        let search: String
        /// One FTS5 phrase: the trigrams of the whole string, in order (a substring); nil for a
        /// string shorter than a trigram.
        let phrase: String?
        /// LIKE's pattern (ASCII letters in either case, as SQLite's lower() knows them), the
        /// search's own % and _ escaped.
        let pattern: String
        /// A look at a row (binding 1: ``pattern``).
        static let inRow = """
            text LIKE ?1 ESCAPE '\\' OR preview LIKE ?1 ESCAPE '\\' OR app LIKE ?1 ESCAPE '\\' OR types LIKE ?1 ESCAPE '\\'
            """

        init(_ search: String) {
            self.search = search
            let wanted = search.lowercased()
            pattern = "%" + wanted.replacing("\\", with: "\\\\").replacing("%", with: "\\%").replacing("_", with: "\\_") + "%"
            phrase = wanted.count >= 3 ? "\"" + wanted.replacing("\"", with: "\"\"") + "\"" : nil
        }
    }

    /// The matches among the rows the index does not hold whole (each found by its partial index: few).
    private static func gatherOthers(_ query: SearchQuery, into others: inout Set<Int64>, in database: SQLiteDatabase) throws(SQLiteError) {
        let add: (Int64) -> Bool = { id in
            others.insert(id)
            return true
        }
        try database.forEachInteger("SELECT id FROM entries WHERE indexed = 0 AND (\(SearchQuery.inRow))", [.text(query.pattern)], add)
        try database.forEachInteger("""
            SELECT id FROM entries WHERE length(text) > \(indexedCharacters) AND text LIKE ? ESCAPE '\\'
            """, [.text(query.pattern)], add)
    }

    /// All the matches known (`found`): placed by their rows when few, else by a walk that looks
    /// each up in `found`. The matches that expired and are not pruned yet are left out (by the
    /// expiry's index: few).
    private static func placeAll(_ found: Set<Int64>, offset: Int, end: Int, sparse: Int, in database: SQLiteDatabase,
                                 now: Double) throws(SQLiteError) -> SearchPage {
        var found = found
        var expired: [(used: Double, id: Int64)] = []
        for row in try database.query("SELECT used, id FROM entries WHERE expires IS NOT NULL AND expires <= ?", [.real(now)]) {
            guard let id = row[1].integer else { continue }
            expired.append((row[0].real ?? 0, id))
            found.remove(id)
        }
        let total = found.count
        let last = min(total, end)
        guard last > offset else { return SearchPage(page: [], total: total) }
        if total <= sparse {
            return SearchPage(page: try placeFew(found, from: offset, to: last, expired: expired, in: database), total: total)
        }
        var page: [(id: Int64, place: Int)] = []
        var seen = 0
        var place = 0
        try database.forEachInteger("""
            SELECT id FROM entries INDEXED BY entries_order WHERE expires IS NULL OR expires > ? ORDER BY used DESC, id DESC
            """, [.real(now)]) { id in
            if found.contains(id) {
                if seen >= offset { page.append((id, place)) }
                seen += 1
            }
            place += 1
            return seen < last
        }
        return SearchPage(page: page, total: total)
    }

    /// The walk along the listing order's index (from the newest, or after `cursor`), stretch
    /// by stretch: which entries of a stretch match is asked of the index by a range of rowids
    /// for each run of near ids (new entries, in id order), and of the rows themselves for the
    /// rest (entries used again, out of id order), with the `others` looked up. A stretch
    /// doubles while it holds fewer matches than the page still wants.
    private static func walk(_ query: SearchQuery, others: Set<Int64>, offset: Int, end: Int, from cursor: SearchCursor?,
                             in database: SQLiteDatabase, now: Double) throws(SQLiteError) -> SearchPage {
        var page: [(id: Int64, place: Int)] = []
        var seen = cursor?.seen ?? 0
        var place = cursor?.place ?? 0
        var last: (used: Double, id: Int64)?
        var stretch: [(id: Int64, used: Double)] = []
        var size = 256
        var failure: SQLiteError?
        // Takes the stretch's matches in order; false once the page's end is reached.
        func settle() -> Bool {
            let matching: Set<Int64>
            do {
                matching = try matches(among: stretch.map(\.id), query, in: database)
            } catch {
                failure = error
                return false
            }
            let wanted = end - seen
            defer { stretch.removeAll(keepingCapacity: true) }
            var matched = 0
            for entry in stretch {
                if matching.contains(entry.id) || others.contains(entry.id) {
                    if seen >= offset { page.append((entry.id, place)) }
                    seen += 1
                    matched += 1
                }
                place += 1
                last = (entry.used, entry.id)
                if seen >= end { return false }
            }
            if matched < wanted { size = min(size * 2, 16_384) }
            return true
        }
        var bindings: [SQLiteValue] = [.real(now)]
        var after = ""
        if let cursor {
            after = " AND used <= ?2 AND (used < ?2 OR id < ?3)"
            bindings += [.real(cursor.used), .integer(cursor.id)]
        }
        var stopped = false
        try database.forEachKey("""
            SELECT id, used FROM entries INDEXED BY entries_order WHERE (expires IS NULL OR expires > ?1)\(after) ORDER BY used DESC, id DESC
            """, bindings) { id, used in
            stretch.append((id, used))
            guard stretch.count >= size else { return true }
            stopped = !settle()
            return !stopped
        }
        if let failure { throw failure }
        if !stopped, !stretch.isEmpty { stopped = !settle() }
        if let failure { throw failure }
        // Stopped at the page's end: more may match past it. Else every match was counted.
        let next = last.map { SearchCursor(search: query.search, seen: seen, place: place, used: $0.used, id: $0.id) }
        return SearchPage(page: page, total: seen, partial: stopped, cursor: stopped ? next : nil)
    }

    /// Which of `ids` match: the index is asked for each run of eight or more near ids (a
    /// range of rowids, gaps of at most eight), each other row is looked at.
    static func matches(among ids: [Int64], _ query: SearchQuery, in database: SQLiteDatabase) throws(SQLiteError) -> Set<Int64> {
        var matching = Set<Int64>()
        var scattered: [Int64] = []
        let sorted = ids.sorted()
        var start = 0
        while start < sorted.count {
            var stop = start + 1
            while stop < sorted.count, sorted[stop] - sorted[stop - 1] <= 8 { stop += 1 }
            if let phrase = query.phrase, stop - start >= 8 {
                let run = Set(sorted[start..<stop])
                try database.forEachInteger("""
                    SELECT rowid FROM entries_search WHERE entries_search MATCH ? AND rowid >= ? AND rowid <= ?
                    """, [.text(phrase), .integer(sorted[start]), .integer(sorted[stop - 1])]) { id in
                    if run.contains(id) { matching.insert(id) }
                    return true
                }
            } else {
                scattered.append(contentsOf: sorted[start..<stop])
            }
            start = stop
        }
        for first in stride(from: 0, to: scattered.count, by: 500) {
            let chunk = scattered[first..<min(scattered.count, first + 500)]
            try database.forEachInteger("SELECT id FROM entries WHERE \(among(chunk)) AND (\(SearchQuery.inRow))", [.text(query.pattern)]) { id in
                matching.insert(id)
                return true
            }
        }
        return matching
    }
}

extension Int {
    /// The sum, or Int.max past it: a client's offset and limit make a page's end, never a trap.
    func clampedSum(_ other: Int) -> Int {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other < 0 ? .min : .max) : sum
    }
}
