import FoundationEssentials

/// Pairing with one device, as kdeconnect-kde 22.12 and 8 do it
/// (`core/backends/lan/lanpairinghandler.cpp`, `core/backends/pairinghandler.cpp`): a request
/// is a `pair: true`, its acceptance another, a refusal or an unpairing a `pair: false`; a request
/// not answered within 30 s lapses. A pure value: the driver tells it what the person and the
/// device did and does what it says (send a packet, pin or forget the device's certificate).
///
/// What it never does: accept a device's request by itself. A request waits for the person
/// (`xpb devices accept`), and lapses.
package struct Pairing: Equatable, Sendable {
    package enum State: Equatable, Sendable {
        case unpaired
        /// We asked; the device has until then to accept.
        case requested(until: Date)
        /// The device asked; the person has until then to accept.
        case requestedByPeer(until: Date)
        case paired
    }

    package enum Action: Equatable, Sendable {
        /// Send a `kdeconnect.pair` packet.
        case send(Packet)
        /// The device is paired now: pin the certificate it showed on this link.
        case trust
        /// The device is not paired any more: forget its certificate.
        case forget
        /// A line for the log and for whoever asked (`xpb devices`).
        case tell(String)
    }

    /// Why a person's request cannot be done now.
    package struct Refusal: Error, Equatable, Sendable, CustomStringConvertible {
        package var description: String
        package init(description: String) { self.description = description }
    }

    /// How long a request waits for its answer.
    package static let timeout: TimeInterval = 30

    package private(set) var state: State
    /// The device, for lines to the person.
    package var name: String

    package init(name: String, paired: Bool) {
        self.name = name
        state = paired ? .paired : .unpaired
    }

    package var isPaired: Bool { state == .paired }

    /// The device asked to pair and waits for the person's answer.
    package var isAskedByPeer: Bool {
        if case .requestedByPeer = state { true } else { false }
    }

    /// Whether we asked and wait for the device's answer.
    package var isRequested: Bool {
        if case .requested = state { true } else { false }
    }

    /// When ``tick(now:)`` must run next: the end of a request's wait.
    package var deadline: Date? {
        switch state {
        case .requested(let until), .requestedByPeer(let until): until
        case .unpaired, .paired: nil
        }
    }

    /// The person asks to pair (`xpb devices pair`). A request the device already made is
    /// accepted instead.
    package mutating func request(now: Date) throws(Refusal) -> [Action] {
        switch state {
        case .paired:
            throw Refusal(description: "“\(name)” is paired already")
        case .requested:
            throw Refusal(description: "pairing with “\(name)” was asked already: accept it on the device")
        case .requestedByPeer:
            return accepting()
        case .unpaired:
            state = .requested(until: now.addingTimeInterval(Self.timeout))
            return [.send(.pair(true, timestamp: Int64(now.timeIntervalSince1970))),
                    .tell("asked “\(name)” to pair: accept it on the device within \(Int(Self.timeout)) s")]
        }
    }

    /// The person accepts the device's request (`xpb devices accept`).
    package mutating func accept() throws(Refusal) -> [Action] {
        guard case .requestedByPeer = state else {
            throw Refusal(description: state == .paired ? "“\(name)” is paired already" : "“\(name)” has not asked to pair (or its request lapsed)")
        }
        return accepting()
    }

    private mutating func accepting() -> [Action] {
        state = .paired
        return [.send(.pair(true, timestamp: nil)), .trust, .tell("paired with “\(name)”")]
    }

    /// The person unpairs, or refuses a request, or takes back their own.
    package mutating func unpair() -> [Action] {
        let was = state
        state = .unpaired
        switch was {
        case .unpaired: return []
        case .paired: return [.send(.pair(false, timestamp: nil)), .forget, .tell("unpaired “\(name)”")]
        case .requested: return [.send(.pair(false, timestamp: nil)), .tell("took back the request to pair with “\(name)”")]
        case .requestedByPeer: return [.send(.pair(false, timestamp: nil)), .tell("refused “\(name)”’s request to pair")]
        }
    }

    /// How far a protocol 8 request's time may be from this machine's (kdeconnect-kde's
    /// `ALLOWED_TIMESTAMP_TIME_DIFFERENCE_SECONDS`).
    package static let allowedClockDifference: TimeInterval = 1800

    /// A `kdeconnect.pair` packet from the device, which speaks protocol `version` on this link.
    ///
    /// As kdeconnect-kde 8 does: a request from a device already paired unpairs it and waits for
    /// the person like any request (the two cannot be told from an acceptance in 7, and answering
    /// it would let two devices accept each other for ever); a second request while one waits is
    /// ignored; in protocol 8 a request must carry a time within half an hour of ours.
    package mutating func received(pair wants: Bool, timestamp: Int64?, version: Int, now: Date) -> [Action] {
        switch (state, wants) {
        case (.requested, true):
            state = .paired
            return [.trust, .tell("paired with “\(name)”: it accepted")]
        case (.requestedByPeer, true):
            return []
        case (.unpaired, true), (.paired, true):
            var actions: [Action] = []
            if state == .paired {
                state = .unpaired
                actions = [.forget, .tell("“\(name)” asks to pair although it is paired: unpaired until the person accepts again")]
            }
            if version >= 8 {
                guard let timestamp, abs(TimeInterval(timestamp) - now.timeIntervalSince1970) <= Self.allowedClockDifference else {
                    return actions + [.send(.pair(false, timestamp: nil)),
                                      .tell("refused “\(name)”’s request to pair: \(timestamp == nil ? "it carries no time" : "its clock and ours differ by more than half an hour")")]
                }
            }
            state = .requestedByPeer(until: now.addingTimeInterval(Self.timeout))
            return actions + [.tell("“\(name)” asks to pair: xpb devices accept, within \(Int(Self.timeout)) s")]
        case (.requested, false):
            state = .unpaired
            return [.tell("“\(name)” refused to pair")]
        case (.paired, false):
            state = .unpaired
            return [.forget, .tell("“\(name)” unpaired")]
        case (.requestedByPeer, false):
            state = .unpaired
            return [.tell("“\(name)” took back its request to pair")]
        case (.unpaired, false):
            return []
        }
    }

    /// Time passed: a request not answered lapses.
    package mutating func tick(now: Date) -> [Action] {
        guard let deadline, now >= deadline else { return [] }
        let wasOurs = if case .requested = state { true } else { false }
        state = .unpaired
        return [.send(.pair(false, timestamp: nil)),
                .tell(wasOurs ? "“\(name)” did not answer the request to pair within \(Int(Self.timeout)) s"
                              : "“\(name)”’s request to pair lapsed: nobody accepted it within \(Int(Self.timeout)) s")]
    }
}
