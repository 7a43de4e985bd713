import FoundationEssentials
import PasteboardKit
import PasteboardSelections

/// What another client offers: its targets, and the manifest if it is an xpb owner.
struct ForeignOffer: Sendable {
    /// The owner's window.
    let owner: X11Window
    let targets: [String]
    let manifest: Manifest?

    /// The offer read as a plain owner's: its targets alone.
    var withoutManifest: ForeignOffer { ForeignOffer(owner: owner, targets: targets, manifest: nil) }

    /// The types of each item: the manifest's, else one item of the types behind the targets.
    func itemTypes(_ registry: TypeRegistry) -> [[PasteboardType]] {
        OfferReading.itemTypes(targets: targets, manifest: manifest, registry: registry)
    }
}

/// An offer as read, with what it was read from.
struct CachedOffer: Sendable {
    let epoch: Int
    let owner: X11Window
    let offer: ForeignOffer
}

extension X11PasteboardBackend {
    /// Reads the offer of whoever owns the selection; nil when nobody does (or we do).
    ///
    /// The offer is cached while the owner stays the same: the owner's window is asked for (one
    /// round trip to the server, none to the owner), and the ownership events the server sent
    /// before its answer are handled first, so any change of owner (even a new acquisition by the
    /// same window) has moved the epoch by the time the cache is consulted.
    ///
    /// With `speculation`, its target is asked for right after `TARGETS` when the owner is asked
    /// at all; otherwise it is skipped. With `fresh`, the owner is asked whatever is cached (a
    /// caller that must see the owner run to answer: ``owner(of:)``).
    func foreignOffer(_ name: Pasteboard.Name, speculation: SpeculativeRead? = nil, fresh: Bool = false) throws -> ForeignOffer? {
        try connection.sync(timeout: timeout) { [self] (session, done: @escaping @Sendable (Result<ForeignOffer?, any Error>) -> Void) in
            let selection = self.selectionAtom(name, in: session)
            if session.wire.fixesEventBase < 0 {
                return self.readOfferBeforeOwner(selection, in: session, speculation: speculation, done: done)
            }
            let owner = session.currentOwnerAfterQueuedChanges(selection)
            guard !owner.isNone else {
                speculation?.skip()
                return done(.success(nil))
            }
            guard !session.isDead else {
                speculation?.skip()
                return done(.failure(X11BackendError.connectionLost))
            }
            let (epoch, cached) = self.state.withLock { ($0.ownershipEpochs[name] ?? 0, $0.offers[name]) }
            // Without XFixes no event moves the epoch: then every read asks the owner.
            if !fresh, session.wire.fixesEventBase >= 0, let cached, cached.epoch == epoch, cached.owner == owner {
                speculation?.skip()
                return done(.success(cached.offer))
            }
            session.reader.readOffer(of: selection, owner: { owner }, speculation: speculation) { result in
                if case let .success(offer) = result {
                    self.state.withLock { $0.offers[name] = CachedOffer(epoch: epoch, owner: owner, offer: offer) }
                }
                done(result.map { $0 })
            }
        }
    }

    /// A reader without XFixes (a one-shot command: no offer is cached, no ownership event comes)
    /// asks for `TARGETS` and its guess before it looks the owner up, all three in one flush: the
    /// owner is answering while the server answers the look-up, one round trip sooner. Where
    /// nobody owns the selection, the server refuses both conversions itself; nil.
    private func readOfferBeforeOwner(_ selection: X11Atom, in session: X11Session, speculation: SpeculativeRead?,
                                      done: @escaping @Sendable (Result<ForeignOffer?, any Error>) -> Void) {
        guard !session.isDead else {
            speculation?.skip()
            return done(.failure(X11BackendError.connectionLost))
        }
        // The owner once looked up, and an offer that ended before (a conversion that could not be asked).
        let state = XThreadConfined(XThreadCell<(owner: X11Window?, early: Result<ForeignOffer, any Error>?)>((nil, nil)))
        session.reader.readOffer(of: selection, owner: { state.value.value.owner ?? .none }, speculation: speculation, flushes: false) { result in
            guard let owner = state.value.value.owner else {
                state.value.value.early = result
                return
            }
            // Nobody owned it: answered already.
            guard !owner.isNone else { return }
            done(result.map { $0 })
        }
        let owner = session.wire.selectionOwner(selection)
        state.value.value.owner = owner
        if owner.isNone { return done(.success(nil)) }
        if let early = state.value.value.early { done(early.map { $0 }) }
    }
}
