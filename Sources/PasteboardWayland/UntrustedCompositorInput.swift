import FoundationEssentials

/// What a compositor (or anything that speaks for it) sends, run through this client's decoder
/// and state as the connection runs them: for the fuzz target. A client with every object it
/// makes (registry 2, seat 3, manager 4, data-control device 5, source 6, sync callback 7) reads
/// the bytes after the first, split where the first byte says (its lowest bit: wlr's or ext's
/// flavour), with descriptors that are not open (-1) beside them.
package enum UntrustedCompositorInput {
    package static func exercise(_ data: Data) {
        var state = DataControlState()
        _ = state.make(.registry)
        let seat = state.make(.seat)
        let flavour: DataControlFlavour = data.first.map { $0 & 1 == 0 ? .wlr : .ext } ?? .wlr
        let manager = state.make(.manager(flavour))
        let device = state.make(.device(flavour))
        state.bound(seat: seat)
        state.bound(manager: manager, flavour: flavour, version: 2)
        state.made(device: device)
        _ = state.make(.source(flavour))
        _ = state.make(.callback)
        var decoder = WaylandDecoder()
        guard let control = data.first else { return }
        let bytes = [UInt8](data.dropFirst())
        let cut = Int(control >> 1) % (bytes.count + 1)
        for part in [bytes[..<cut], bytes[cut...]] {
            part.withUnsafeBytes { decoder.append($0) }
            do {
                try decoder.append(descriptors: [-1, -1])
                while let message = try decoder.next(signature: { state.signature(object: $0, opcode: $1) }) {
                    for effect in state.handle(message) {
                        if case let .destroyOffer(offer) = effect { state.forget(offer) }
                    }
                    if state.fatalError != nil { return }
                }
            } catch {
                return
            }
        }
    }
}
