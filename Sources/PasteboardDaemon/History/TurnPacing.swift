/// How many entries the next turn of the history's upkeep takes (``HistoryUpkeep/maintain()``):
/// as many as the last turns' pace fits in ``target``. A copy, a listing or a D-Bus read waits
/// for one turn at most, and entries cost from 20 µs (described) to 1 ms (pruned: the search
/// index is told each token it held, and freed pages are zeroed), so a count fixed for one kind
/// of work is too many for another.
struct TurnPacing: Sendable, Equatable {
    /// The time a turn aims at.
    static let target = 0.025
    static let fewest = 8
    static let most = 1_000

    /// The entries the next turn takes.
    private(set) var size = 64

    /// A turn did `done` entries in `seconds`: the next takes what that pace fits in
    /// ``target``, at most twice as many as this one (a fast turn of little work says little).
    mutating func took(_ seconds: Double, for done: Int) {
        guard done > 0 else { return }
        let fits = Self.target / max(seconds / Double(done), 1e-9)
        size = max(Self.fewest, min(Self.most, 2 * size, Int(fits)))
    }
}
