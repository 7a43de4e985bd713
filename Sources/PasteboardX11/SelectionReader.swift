internal import CX11
import Foundation
import PasteboardKit

/// A conversion request waiting for the owner's SelectionNotify.
struct PendingConversion {
    let id: Int
    let selection: X11Atom
    let target: X11Atom
    let property: X11Atom
    var timer: Int?
    let completion: (Result<PropertyValue?, any Error>) -> Void
}

/// An INCR transfer we are receiving.
struct IncomingState {
    let id: Int
    var transfer: IncomingTransfer
    var type: X11Atom
    let description: String
    var timer: Int?
    let completion: (Result<PropertyValue?, any Error>) -> Void
}

extension X11Session {
    /// A property of our window for one conversion; each conversion in flight has its own.
    private func allocateProperty() -> X11Atom {
        if let free = freeProperties.popLast() { return free }
        propertyCount += 1
        return atom("XPB_SEL_\(propertyCount)")
    }

    private func releaseProperty(_ property: X11Atom) {
        if name(of: property)?.hasPrefix("XPB_SEL_") == true { freeProperties.append(property) }
    }

    /// Asks the owner of `selection` to convert it to `target` and reads the result, following
    /// INCR. Completes with nil when the owner refuses (or there is none), with an error when a
    /// deadline passes without progress or the reply is malformed.
    ///
    /// - Parameters:
    ///   - parameters: for targets that take them (`MULTIPLE`'s ATOM_PAIR list), format-32 values
    ///     written to the property before the request, with type `parameterType`.
    ///   - legacyNoProperty: sends the request with property None, as obsolete clients do (the
    ///     owner then replies in the property named like the target).
    func convert(_ selection: X11Atom, to target: X11Atom, parameters: [X11Atom]? = nil, parameterType: X11Atom = .none,
                 legacyNoProperty: Bool = false,
                 completion: @escaping (Result<PropertyValue?, any Error>) -> Void) {
        let property = legacyNoProperty ? target : allocateProperty()
        let id = makeOperationID()
        if let parameters {
            writeAtoms(window, property, type: parameterType, parameters, onError: { _ in })
        }
        requestConversion(selection, to: target, property: legacyNoProperty ? .none : property, at: .currentTime)
        XFlush(display)
        var conversion = PendingConversion(id: id, selection: selection, target: target, property: property, timer: nil, completion: completion)
        let seconds = configuration.readTimeout
        conversion.timer = after(seconds) { [weak self] in
            guard let self, let index = self.conversions.firstIndex(where: { $0.id == id }) else { return }
            let expired = self.conversions.remove(at: index)
            // The property is not reused: a late owner may still write to it.
            let what = "reading \(self.name(of: target) ?? "?") from \(self.name(of: selection) ?? "?")"
            expired.completion(.failure(PasteboardError.timedOut(operation: what, seconds: seconds)))
        }
        conversions.append(conversion)
    }

    func handleSelectionNotify(requestor: X11Window, selection: X11Atom, target: X11Atom, property: X11Atom) {
        guard requestor == window else { return }
        let matches = conversions.indices.filter { conversions[$0].selection == selection && conversions[$0].target == target }
        guard let index = matches.first(where: { conversions[$0].property == property }) ?? matches.first else { return }
        let conversion = conversions.remove(at: index)
        cancelTimer(conversion.timer)
        guard !property.isNone else {
            releaseProperty(conversion.property)
            conversion.completion(.success(nil))
            return
        }
        guard let value = readProperty(window, conversion.property, delete: true) else {
            releaseProperty(conversion.property)
            conversion.completion(.failure(PasteboardError.backendFailure(
                "the selection owner reported a conversion to \(name(of: conversion.target) ?? "?") but left no data")))
            return
        }
        if value.type == known[.incr] {
            // Deleting the INCR property (done by the read) tells the owner to send the first chunk.
            let announced = Int(value.longs.first ?? 0)
            let description = "reading \(name(of: conversion.target) ?? "?") (INCR)"
            incoming[conversion.property] = IncomingState(
                id: conversion.id, transfer: IncomingTransfer(announcedSize: announced, limit: configuration.maxReadSize),
                type: .none, description: description, timer: nil, completion: conversion.completion)
            armIncomingTimer(conversion.property)
            return
        }
        releaseProperty(conversion.property)
        conversion.completion(.success(value))
    }

    private func armIncomingTimer(_ property: X11Atom) {
        guard let state = incoming[property] else { return }
        cancelTimer(state.timer)
        let seconds = configuration.readTimeout
        let id = state.id
        incoming[property]?.timer = after(seconds) { [weak self] in
            guard let self, let state = self.incoming[property], state.id == id else { return }
            self.incoming.removeValue(forKey: property)
            state.completion(.failure(PasteboardError.timedOut(operation: state.description, seconds: seconds)))
        }
    }

    /// A new chunk arrived in one of our properties.
    func continueIncoming(property: X11Atom) {
        // Take the state out of the dictionary so that appending does not copy the buffer.
        guard var state = incoming.removeValue(forKey: property) else { return }
        var chunkType = X11Atom.none
        var chunkFormat: Int32 = 8
        let outcome: Result<Bool, any Error>? = readProperty(window, property, delete: true) { type, format, bytes in
            chunkType = type
            chunkFormat = format
            return Result { try state.transfer.append(bytes: bytes) }
        }
        guard let outcome else {
            incoming[property] = state
            return
        }
        switch outcome {
        case let .failure(error):
            cancelTimer(state.timer)
            state.completion(.failure(error))
        case let .success(isComplete):
            if isComplete {
                cancelTimer(state.timer)
                releaseProperty(property)
                let type = state.type.isNone ? chunkType : state.type
                state.completion(.success(PropertyValue(type: type, format: chunkFormat, data: state.transfer.data)))
            } else {
                if state.type.isNone { state.type = chunkType }
                incoming[property] = state
                armIncomingTimer(property)
            }
        }
    }

    /// Reads the `TARGETS` of `selection` as atom names (nil when the owner refuses).
    func targets(of selection: X11Atom, completion: @escaping (Result<[String]?, any Error>) -> Void) {
        convert(selection, to: known[.targets]) { [weak self] result in
            guard let self else { return }
            completion(result.flatMap { value in
                guard let value else { return .success(nil) }
                guard value.format == 32 else {
                    return .failure(PasteboardError.backendFailure("the selection owner answered TARGETS with format \(value.format) instead of 32"))
                }
                return .success(self.names(of: value.atoms).compactMap { $0 })
            })
        }
    }
}
