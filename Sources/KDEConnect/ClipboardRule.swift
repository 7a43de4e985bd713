/// The clipboard across one device's link: what xpbd sends the device and what it takes from it.
///
/// - KDE Connect carries text: a copy goes as its text, or not at all.
/// - Secrets never leave: a copy marked secret, or taken back by its app, is not sent, and a
///   link that comes up while it is the newest sends nothing in its place.
/// - No loops: a copy that came from the device is not sent back to it, and the device's echo of
///   what it was just sent is not taken as a new copy.
/// - `kdeconnect.clipboard.connect` (sent as a link comes up) is taken only when it is newer than
///   the newest copy xpbd knows, as kdeconnect-kde's clipboard plugin does; a time of 0 means
///   unknown and is never taken. A time ahead of this machine's clock counts as now, so that a
///   device whose clock runs ahead cannot make its copies outrank every later one.
///
/// A pure value over times in ms since 1970; the driver gives it the copies and the clock.
package struct ClipboardRule: Equatable, Sendable {
    /// A copy made on this machine (or taken from a device), as the rule sees it.
    package struct Copy: Equatable, Sendable {
        /// Its text, nil when it has no text representation.
        package var text: String?
        /// When it was copied, in ms since 1970.
        package var time: Int64
        /// Marked secret, or taken back by its app.
        package var isSecret: Bool
        /// The KDE Connect device it came from, if it came from one.
        package var device: String?

        package init(text: String?, time: Int64, isSecret: Bool = false, device: String? = nil) {
            self.text = text
            self.time = time
            self.isSecret = isSecret
            self.device = device
        }
    }

    package enum Incoming: Equatable, Sendable {
        /// A copy to make on this machine: its text, and its time (ms since 1970).
        case take(String, time: Int64)
        /// Nothing to do, and why (for the debug log).
        case ignore(String)
    }

    /// The device at the other end.
    package let device: String
    /// The longest packet sent, in bytes, its text escaped as JSON and its newline counted (the
    /// link's packet limit).
    package let maxBytes: Int
    /// The newest copy's time this machine knows, its own or one taken from the device.
    package private(set) var newest: Int64 = 0
    /// The text last sent to the device or taken from it, while it is the newest: what an echo
    /// would say.
    private var exchanged: String?

    package init(device: String, maxBytes: Int) {
        self.device = device
        self.maxBytes = maxBytes
    }

    /// A link to the device came up, with `current` the newest copy: the packet to send, if any.
    package mutating func connected(current: Copy?) -> Packet? {
        guard let current else { return nil }
        newest = max(newest, current.time)
        guard let text = sendable(current) else { return nil }
        exchanged = text
        return .clipboardConnect(text, timestamp: current.time)
    }

    /// A new copy on this machine: the packet to send, if any.
    package mutating func copied(_ copy: Copy) -> Packet? {
        newest = max(newest, copy.time)
        guard let text = sendable(copy) else {
            exchanged = copy.device == device ? copy.text : nil
            return nil
        }
        exchanged = text
        return .clipboard(text)
    }

    /// A clipboard packet from the device (`now` is this machine's clock).
    package mutating func received(_ packet: Packet, now: Int64) -> Incoming {
        let text: String
        let time: Int64
        switch packet {
        case .clipboard(let content):
            text = content
            time = now
        case .clipboardConnect(let content, let timestamp):
            guard timestamp > 0 else { return .ignore("its copy's time is unknown (0)") }
            guard timestamp >= newest else { return .ignore("its copy is older than the newest here") }
            text = content
            time = min(timestamp, now)
        default:
            return .ignore("not a clipboard packet")
        }
        guard !text.isEmpty else { return .ignore("its clipboard is empty") }
        guard text != exchanged else { return .ignore("the text last exchanged with it (an echo)") }
        exchanged = text
        newest = max(newest, time)
        return .take(text, time: time)
    }

    private func sendable(_ copy: Copy) -> String? {
        guard !copy.isSecret, copy.device != device, let text = copy.text, !text.isEmpty, text.utf8.count < maxBytes else { return nil }
        // Escaping can make a packet several times its text (a control character is six bytes).
        guard Packet.clipboardConnect(text, timestamp: copy.time).encoded(id: .max).count <= maxBytes else { return nil }
        return text
    }
}
