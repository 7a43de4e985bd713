internal import CX11
import FoundationEssentials
import PasteboardKit

/// A conversion request waiting for the owner's SelectionNotify.
struct PendingConversion {
    let id: Int
    let selection: X11Atom
    let target: X11Atom
    let property: X11Atom
    var timer: TimerHandle?
    /// The most bytes the reply may have.
    var limit: Int = .max
    /// Past the limit, keep the first `limit` bytes instead of failing (lists such as TARGETS).
    var truncate = false
    /// Where a streamed reply's chunks go (nil: collected in memory).
    var sink: StreamSink? = nil
    /// The whole conversion's deadline timer (INCR included).
    var deadline: TimerHandle? = nil
    let completion: (Result<PropertyValue?, any Error>) -> Void
}

/// An INCR transfer we are receiving.
struct IncomingState {
    let id: Int
    /// The selection read (an ownership change may end the read).
    let selection: X11Atom
    var transfer: IncomingTransfer
    var type: X11Atom
    let description: String
    var timer: TimerHandle?
    var deadline: TimerHandle?
    var sink: StreamSink?
    /// A streamed chunk was read but the property not yet deleted: the consumer is behind.
    var paused = false
    let completion: (Result<PropertyValue?, any Error>) -> Void
}

extension X11Session {
    /// The most conversion properties this process ever names (`XPB_SEL_1` …): atoms are never
    /// freed by the server, so a flapping owner must not make one per change.
    static let maxConversionProperties = 64

    /// A property of our window for one conversion; each conversion in flight has its own. Nil
    /// when all are in flight.
    private func allocateProperty() -> X11Atom? {
        if !freeProperties.isEmpty { return freeProperties.removeFirst() }
        if propertyCount < Self.maxConversionProperties {
            propertyCount += 1
            return atom("XPB_SEL_\(propertyCount)")
        }
        // The one that has rested longest (an unfinished transfer's, see failIncoming).
        guard !restingProperties.isEmpty else { return nil }
        let property = restingProperties.removeFirst()
        deleteProperty(window, property)
        return property
    }

    /// Gives a property back. Reused last (first in, first out), and emptied: an owner that
    /// answers late writes into a property no current conversion reads from for a while.
    /// `emptied` when the read that ended the conversion deleted it already (one request less).
    private func releaseProperty(_ property: X11Atom, emptied: Bool = false) {
        if property == known[.guess] {
            // Not the pool's: emptied, and kept for the next guess.
            if !emptied { deleteProperty(window, property) }
            return
        }
        guard name(of: property)?.hasPrefix("XPB_SEL_") == true, !freeProperties.contains(property) else { return }
        if !emptied { deleteProperty(window, property) }
        freeProperties.append(property)
    }

    /// Asks the owner of `selection` to convert it to `target` and reads the result, following
    /// INCR. Completes with nil when the owner refuses (or there is none), with an error when a
    /// deadline passes (no progress for the read timeout, or the whole transfer longer than the
    /// transfer deadline), the reply is larger than `limit`, or it is malformed.
    ///
    /// - Parameters:
    ///   - parameters: for targets that take them (`MULTIPLE`'s ATOM_PAIR list), format-32 values
    ///     written to the property before the request, with type `parameterType`.
    ///   - legacyNoProperty: sends the request with property None, as obsolete clients do (the
    ///     owner then replies in the property named like the target).
    ///   - sink: streams the reply's bytes there as they come (the completion's value then has
    ///     no data) instead of collecting them.
    ///   - property: the property to read into, instead of one of the pool's (`XPB_SEL_n`).
    func convert(_ selection: X11Atom, to target: X11Atom, parameters: [X11Atom]? = nil, parameterType: X11Atom = .none,
                 legacyNoProperty: Bool = false, limit: Int? = nil, truncate: Bool = false, sink: StreamSink? = nil,
                 into property: X11Atom? = nil, completion: @escaping (Result<PropertyValue?, any Error>) -> Void) {
        // However the conversion ends, a stream's consumer learns it.
        let completion: (Result<PropertyValue?, any Error>) -> Void = { result in
            sink?.finish(result.map { _ in () })
            completion(result)
        }
        guard let property = legacyNoProperty ? target : property ?? allocateProperty() else {
            return completion(.failure(PasteboardError.backendFailure(
                "too many conversions in flight (\(Self.maxConversionProperties)); the selection owner is not answering")))
        }
        let id = makeOperationID()
        if let parameters {
            writeAtoms(window, property, type: parameterType, parameters, onError: { _ in })
        }
        requestConversion(selection, to: target, property: legacyNoProperty ? .none : property, at: .currentTime)
        XFlush(display)
        var conversion = PendingConversion(id: id, selection: selection, target: target, property: property, timer: nil,
                                           limit: limit ?? configuration.maxReadSize, truncate: truncate, sink: sink, completion: completion)
        let seconds = configuration.readTimeout
        conversion.timer = after(seconds) { [weak self] in
            guard let self, let index = self.conversions.firstIndex(where: { $0.id == id }) else { return }
            let expired = self.conversions.remove(at: index)
            self.cancelTimer(expired.deadline)
            // The property goes back to the end of the free list: a late owner may still write to it.
            self.releaseProperty(expired.property)
            let what = "reading \(self.name(of: target) ?? "?") from \(self.name(of: selection) ?? "?")"
            expired.completion(.failure(PasteboardError.timedOut(operation: what, seconds: seconds)))
        }
        let total = configuration.transferDeadline
        conversion.deadline = after(total) { [weak self] in
            guard let self else { return }
            let what = "reading \(self.name(of: target) ?? "?") from \(self.name(of: selection) ?? "?") (the whole transfer)"
            let failure = PasteboardError.timedOut(operation: what, seconds: total)
            if let index = self.conversions.firstIndex(where: { $0.id == id }) {
                let expired = self.conversions.remove(at: index)
                self.cancelTimer(expired.timer)
                self.releaseProperty(expired.property)
                expired.completion(.failure(failure))
            } else if let state = self.incoming[property], state.id == id {
                self.failIncoming(property, failure)
            }
        }
        conversions.append(conversion)
    }

    func handleSelectionNotify(requestor: X11Window, selection: X11Atom, target: X11Atom, property: X11Atom) {
        guard requestor == window else { return }
        let matches = conversions.indices.filter { conversions[$0].selection == selection && conversions[$0].target == target }
        guard let index = matches.first(where: { conversions[$0].property == property }) ?? matches.first else { return }
        let conversion = conversions.remove(at: index)
        cancelTimer(conversion.timer)
        // Set once the reply was read, and with it deleted.
        var emptied = false
        let finish: (Result<PropertyValue?, any Error>) -> Void = { [self] result in
            cancelTimer(conversion.deadline)
            releaseProperty(conversion.property, emptied: emptied)
            conversion.completion(result)
        }
        guard !property.isNone else { return finish(.success(nil)) }
        let value: PropertyValue?
        do {
            // An INCR marker or the whole reply; a reply over the limit fails without being read.
            value = try readProperty(window, conversion.property, delete: true, limit: conversion.limit, truncate: conversion.truncate)
        } catch let error as PropertyTooLarge {
            return finish(.failure(PasteboardError.backendFailure(
                "the selection owner's reply is \(error.size) bytes, more than the \(error.limit)-byte limit; raise the limit if this much is expected")))
        } catch {
            return finish(.failure(error))
        }
        guard let value else {
            return finish(.failure(PasteboardError.backendFailure(
                "the selection owner said it converted to \(name(of: conversion.target) ?? "?") but the reply property does not exist (an owner's error, or a reply the X server could not hold)")))
        }
        if value.type == known[.incr] {
            // Deleting the INCR property (done by the read) tells the owner to send the first chunk.
            let announced = IncomingTransfer.announcedSize(value.longs)
            if let announced, announced > conversion.limit {
                return finish(.failure(PasteboardError.backendFailure(
                    "the selection owner announced \(announced) bytes, more than the \(conversion.limit)-byte limit")))
            }
            conversion.sink?.noteSize(announced)
            let description = "reading \(name(of: conversion.target) ?? "?") (INCR)"
            incoming[conversion.property] = IncomingState(
                id: conversion.id, selection: conversion.selection, transfer: IncomingTransfer(announcedSize: conversion.sink == nil ? announced ?? 0 : 0, limit: conversion.limit),
                type: .none, description: description, timer: nil, deadline: conversion.deadline, sink: conversion.sink,
                completion: conversion.completion)
            armIncomingTimer(conversion.property)
            return
        }
        emptied = true
        if let sink = conversion.sink {
            sink.noteType(value.type)
            sink.noteSize(value.data.count)
            sink.push(value.data)
            return finish(.success(PropertyValue(type: value.type, format: value.format, data: Data())))
        }
        finish(.success(value))
    }

    private func armIncomingTimer(_ property: X11Atom) {
        guard let state = incoming[property] else { return }
        cancelTimer(state.timer)
        let seconds = configuration.readTimeout
        let id = state.id
        incoming[property]?.timer = after(seconds) { [weak self] in
            guard let self, let state = self.incoming[property], state.id == id else { return }
            self.failIncoming(property, PasteboardError.timedOut(operation: state.description, seconds: seconds))
        }
    }

    /// Ends an INCR transfer with an error. Its property rests, left as it is (an owner waiting
    /// for its deletion sends nothing more into it), and is used again only when no other is
    /// free, the one that rested longest first. Never given back, 64 failed transfers would
    /// leave no property to read into, ever.
    func failIncoming(_ property: X11Atom, _ error: any Error) {
        guard let state = incoming.removeValue(forKey: property) else { return }
        cancelTimer(state.timer)
        cancelTimer(state.deadline)
        if name(of: property)?.hasPrefix("XPB_SEL_") == true, !restingProperties.contains(property) { restingProperties.append(property) }
        state.completion(.failure(error))
    }

    /// A new chunk arrived in one of our properties.
    func continueIncoming(property: X11Atom) {
        // Take the state out of the dictionary so that appending does not copy the buffer. No
        // other copy of the state may live meanwhile: a `let` bound to it here kept the buffer
        // shared, and every chunk copied all the bytes received so far (a 50 MB capture took
        // 2 s of memcpy and page faults).
        guard incoming[property]?.paused == false, var state = incoming.removeValue(forKey: property) else { return }
        var chunkType = X11Atom.none
        var chunkFormat: Int32 = 8
        let streaming = state.sink != nil
        let outcome: Result<Bool, any Error>?
        do {
            outcome = try readProperty(window, property, delete: !streaming, limit: state.transfer.remaining) { type, format, bytes in
                chunkType = type
                chunkFormat = format
                if let sink = state.sink {
                    return Result { try state.transfer.count(bytes.count) }.map { isComplete in
                        sink.noteType(type)
                        if !isComplete { sink.push(bytes.data) }
                        return isComplete
                    }
                }
                return Result { try bytes.withUnsafeBytes { try state.transfer.append(bytes: $0) } }
            }
        } catch is PropertyTooLarge {
            outcome = .failure(IncomingTransfer.overLimit(state.transfer.limit))
        } catch {
            outcome = .failure(error)
        }
        guard let outcome else {
            incoming[property] = state
            return
        }
        switch outcome {
        case let .failure(error):
            incoming[property] = state
            failIncoming(property, error)
        case let .success(isComplete):
            if isComplete {
                cancelTimer(state.timer)
                cancelTimer(state.deadline)
                // A streamed chunk was read without deleting the property: the release does.
                releaseProperty(property, emptied: !streaming)
                let type = state.type.isNone ? chunkType : state.type
                state.completion(.success(PropertyValue(type: type, format: chunkFormat, data: state.transfer.data)))
            } else {
                if state.type.isNone { state.type = chunkType }
                if let sink = state.sink {
                    // The next chunk is asked for (by deleting the property) only while the consumer
                    // keeps up: memory holds a bounded backlog, however fast the owner sends.
                    if sink.wantsMore {
                        deleteProperty(window, property)
                    } else {
                        state.paused = true
                        let id = state.id
                        let enqueue = self.enqueue
                        sink.onDrained {
                            _ = enqueue? { session in session.resumeIncoming(property, id: id) }
                        }
                    }
                }
                incoming[property] = state
                armIncomingTimer(property)
            }
        }
    }

    /// The consumer of a paused stream caught up: ask for the next chunk.
    private func resumeIncoming(_ property: X11Atom, id: Int) {
        guard incoming[property]?.id == id, incoming[property]?.paused == true else { return }
        incoming[property]?.paused = false
        deleteProperty(window, property)
        armIncomingTimer(property)
    }

    /// The most targets read from an owner's `TARGETS` (toolkits offer a few dozen).
    static let maxTargets = 1024

    /// Reads the `TARGETS` of `selection` as atom names (nil when the owner refuses).
    func targets(of selection: X11Atom, completion: @escaping (Result<[String]?, any Error>) -> Void) {
        // At most maxTargets atoms are read: a list of millions would cost memory and a look-up each.
        convert(selection, to: known[.targets], limit: Self.maxTargets * 4, truncate: true) { [weak self] result in
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

extension X11Session {
    /// `selection` changed owner: with ``X11Configuration/abandonsReadsOnOwnerChange``, every
    /// read of it (waiting for the owner's answer, or mid-INCR) ends now with an error.
    func abandonReads(of selection: X11Atom) {
        guard configuration.abandonsReadsOnOwnerChange else { return }
        let failure = PasteboardError.backendFailure("\(name(of: selection) ?? "the selection") changed owner during the read")
        endWaitingConversions(of: selection, with: .failure(failure))
        for (property, state) in incoming where state.selection == selection {
            failIncoming(property, failure)
        }
    }

    /// The owner of `selection` went away (its client closed or its window was destroyed): the
    /// conversions still waiting for its SelectionNotify will never get one, so they end now
    /// instead of at their deadline (transfers already under way keep their own timers).
    func failConversionsOfVanishedOwner(_ selection: X11Atom) {
        endWaitingConversions(of: selection, with: .success(nil))
    }

    /// Ends the conversions of `selection` still waiting for the owner's answer with `result`.
    private func endWaitingConversions(of selection: X11Atom, with result: Result<PropertyValue?, any Error>) {
        let waiting = conversions.filter { $0.selection == selection }
        conversions.removeAll { $0.selection == selection }
        for conversion in waiting {
            cancelTimer(conversion.timer)
            cancelTimer(conversion.deadline)
            releaseProperty(conversion.property)
            conversion.completion(result)
        }
    }

    /// Converts `selection` to several targets with one `MULTIPLE` request, following INCR for
    /// each reply that needs it. Completes with one value per target (nil where the owner
    /// refused that one), or nil when the owner refused `MULTIPLE` itself (ask one by one then).
    /// With `deadline`, the INCR replies not finished that many seconds after the owner answered
    /// end as refused (the finished ones are kept).
    func convertMultiple(_ selection: X11Atom, targets: [X11Atom], limit: Int, deadline: Double? = nil,
                         completion: @escaping (Result<[PropertyValue?]?, any Error>) -> Void) {
        var properties: [X11Atom] = []
        for _ in targets {
            guard let property = allocateProperty() else { break }
            properties.append(property)
        }
        guard properties.count == targets.count, !targets.isEmpty else {
            for property in properties { releaseProperty(property) }
            return completion(.success(nil))
        }
        let pairs = zip(targets, properties).flatMap { [$0, $1] }
        convert(selection, to: known[.multiple], parameters: pairs, parameterType: known[.atomPair],
                limit: pairs.count * 4) { [weak self] result in
            guard let self else { return }
            let answered: [X11Atom]
            switch result {
            case let .failure(error):
                for property in properties { self.releaseProperty(property) }
                return completion(.failure(error))
            case let .success(value):
                guard let value, value.format == 32 else {
                    for property in properties { self.releaseProperty(property) }
                    return completion(.success(nil))
                }
                answered = value.atoms
            }
            var results = [PropertyValue?](repeating: nil, count: targets.count)
            var remaining = targets.count
            var finished = false
            let settle: (Int, PropertyValue?) -> Void = { index, value in
                results[index] = value
                remaining -= 1
                if remaining == 0, !finished {
                    finished = true
                    completion(.success(results))
                }
            }
            var streaming: [(X11Atom, Int)] = []
            for (index, property) in properties.enumerated() {
                // The owner sets a pair's property to None when it could not convert that target.
                let refused = answered.count > index * 2 + 1 && answered[index * 2 + 1].isNone
                let value = refused ? nil : (try? self.readProperty(self.window, property, delete: true, limit: limit)) ?? nil
                guard let value, value.type == self.known[.incr] else {
                    self.releaseProperty(property, emptied: value != nil)
                    settle(index, value)
                    continue
                }
                let announced = IncomingTransfer.announcedSize(value.longs)
                if let announced, announced > limit {
                    settle(index, nil)
                    continue
                }
                let id = self.makeOperationID()
                self.incoming[property] = IncomingState(
                    id: id, selection: selection, transfer: IncomingTransfer(announcedSize: announced ?? 0, limit: limit), type: .none,
                    description: "reading \(self.name(of: targets[index]) ?? "?") (MULTIPLE, INCR)", timer: nil, deadline: nil,
                    sink: nil, completion: { result in settle(index, (try? result.get()) ?? nil) })
                self.armIncomingTimer(property)
                streaming.append((property, id))
            }
            guard let deadline, !streaming.isEmpty else { return }
            self.after(deadline) { [weak self] in
                for (property, id) in streaming where self?.incoming[property]?.id == id {
                    self?.failIncoming(property, PasteboardError.timedOut(operation: "reading a MULTIPLE reply", seconds: deadline))
                }
            }
        }
    }
}
