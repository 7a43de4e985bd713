/// Whose turn it is in a paste queue (`xpb queue`): which of the queued items a conversion request
/// gets, and when an item has been pasted. A value: requests in, the item to serve out.
///
/// A paste is one requestor's conversions: its data conversions, and the `TARGETS` it asks on
/// the way, from its first data conversion until its window is gone or it asks nothing for
/// ``grace`` seconds. A reader that asks `TARGETS` twice, or two text targets for one paste,
/// takes one item. The item pasted stays served until its paste ends, or until another reader
/// asks anything (a reader asks `TARGETS` before its data: it sees the next item's). After the
/// last item is pasted it stays the clipboard's, served to every reader after. A requestor is an
/// X window, or on Wayland the reading process.
///
/// The X server reuses the window ids of clients gone: a reader's window that is destroyed
/// (``requestorGone(_:at:)``) ends its paste, so that the next reader with the same id takes the
/// next item.
///
/// Some readers (Chromium) read the selection again only when its ownership changes, and paste
/// what they read last until then. So when a paste ends (its window gone, or its silence past the
/// grace, told by ``tick(at:)``), the queue moves on to the next item at once and names it to be
/// announced: the owner takes the selection again, at a new timestamp, serving it.
///
/// An item is pasted only once its reader has it whole: a data transfer that is still under way
/// (INCR) holds the paste open, and one that fails (its reader gone or silent mid-transfer, a
/// conversion refused) leaves the item in the queue for the next paste (``undelivered(_:at:)``).
/// ``delivered(_:at:)`` names the item pasted, once.
package struct PasteTurns: Sendable {
    /// What a request asks for.
    package enum Kind: Sendable {
        /// `TARGETS`, `TIMESTAMP`, xpb's manifest: no paste by itself.
        case metadata
        /// A data target (or `MULTIPLE`): a paste.
        case data
    }

    /// What to serve a request.
    package struct Turn: Equatable, Sendable {
        /// The item to serve (an index into the queue).
        package var item: Int
        /// The item this request pasted first: it is out of the queue.
        package var pasted: Int?
        /// The reader holding the item now: its window is watched until another holds one.
        package var holder: UInt?

        package init(item: Int, pasted: Int?, holder: UInt?) {
            self.item = item
            self.pasted = pasted
            self.holder = holder
        }
    }

    /// How long a reader's silence ends its paste, in seconds.
    package static let grace = 1.0

    /// How many items are queued.
    package let count: Int
    /// The item served now.
    package private(set) var item = 0
    /// The reader that pasted ``item``, when it last asked, whether its window is gone, and
    /// whether it has had the data whole (until then the paste is not over and counts nothing).
    private var holder: (requestor: UInt, last: Double, gone: Bool, delivered: Bool)?
    /// The item the selection's ownership was last announced with (the first, at the start).
    private var announced = 0

    package init(count: Int) {
        self.count = max(1, count)
    }

    /// Whether the item is pasted and its paste is over at `now`.
    private func isPasteOver(at now: Double) -> Bool {
        guard let holder, holder.delivered else { return false }
        return holder.gone || now - holder.last > Self.grace || now < holder.last
    }

    /// Whether the item is pasted and, for a request of `requestor`, that paste was over.
    private func isPastePast(by requestor: UInt, at now: Double) -> Bool {
        guard let holder else { return false }
        return holder.requestor != requestor || isPasteOver(at: now)
    }

    /// When the paste under way ends if its reader stays silent: the time to call ``tick(at:)``.
    package var deadline: Double? {
        guard let holder, holder.delivered, !holder.gone else { return nil }
        return holder.last + Self.grace
    }

    /// A request of `requestor` at `now` (seconds, monotonic). `nextServes`: whether the next
    /// item can answer it (on Wayland a reader asks a type of the item announced; the next item
    /// may not have it). When it cannot, the request is served the item as it is, pasting nothing.
    package mutating func request(_ requestor: UInt, _ kind: Kind, at now: Double, nextServes: Bool = true) -> Turn {
        // Another reader's transfer is under way, not yet whole (it may never be: a reader that
        // stopped reading): this one is served the same item, and asking data, holds it; whichever
        // has it whole first pastes it.
        if let current = holder, !current.delivered, current.requestor != requestor {
            if kind == .data { holder = (requestor, now, false, false) }
            return Turn(item: item, pasted: nil, holder: holder?.requestor)
        }
        if isPastePast(by: requestor, at: now), item + 1 < count {
            guard nextServes else { return Turn(item: item, pasted: nil, holder: holder?.requestor) }
            item += 1
            holder = nil
        }
        var pasted: Int?
        if holder == nil || isPastePast(by: requestor, at: now) {
            // Not pasted yet (or, the last item, pasted before: served again, taken again).
            if kind == .data {
                if holder == nil { pasted = item }
                holder = (requestor, now, false, false)
            }
        } else {
            holder?.last = now
        }
        return Turn(item: item, pasted: pasted, holder: holder?.requestor)
    }

    /// A reader's window was destroyed at `now`: its paste is over. The item to announce, if the
    /// queue moved on (``tick(at:)``).
    package mutating func requestorGone(_ requestor: UInt, at now: Double) -> Int? {
        if holder?.requestor == requestor {
            // Gone before it had the data: nothing was pasted.
            if holder?.delivered == false { holder = nil } else { holder?.gone = true }
        }
        return tick(at: now)
    }

    /// `requestor`'s data transfer ended whole at `now`: the item it holds is pasted. The item,
    /// the first time (to report); nil otherwise.
    package mutating func delivered(_ requestor: UInt, at now: Double) -> Int? {
        guard let current = holder, current.requestor == requestor else { return nil }
        holder?.last = max(current.last, now)
        guard !current.delivered else { return nil }
        holder?.delivered = true
        return item
    }

    /// `requestor`'s data transfer failed before its end (it went, stopped reading, or was
    /// refused): unless an earlier one reached it whole, the item it holds was not pasted and
    /// stays for the next paste. Returns whether the item stays.
    package mutating func undelivered(_ requestor: UInt, at now: Double) -> Bool {
        guard let current = holder, current.requestor == requestor, !current.delivered else { return false }
        holder = nil
        return true
    }

    /// The time is `now`: a paste that is over moves the queue on. The item to announce as a new
    /// ownership, when the item served differs from the one last announced and no paste is under
    /// way; nil otherwise. Announced once: the caller takes the selection again.
    package mutating func tick(at now: Double) -> Int? {
        if isPasteOver(at: now), item + 1 < count {
            item += 1
            holder = nil
        }
        guard item != announced, holder == nil || isPasteOver(at: now) else { return nil }
        announced = item
        return item
    }
}
