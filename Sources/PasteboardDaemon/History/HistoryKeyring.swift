import CDBus
import CDBusGlue
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import PasteboardWire

/// Where the history's key is found: the user's keyring, through the Secret Service
/// (`org.freedesktop.secrets` on the session bus: GNOME Keyring, KeePassXC, KWallet 6), else a
/// key file of mode 600 in xpbd's configuration directory. A key file left from a session without
/// a keyring moves into the keyring once one answers.
package enum HistoryKeyring {
    /// The keys to try, the preferred first (a key file's after the keyring's: a history sealed
    /// while no keyring ran still opens); or why there is none.
    package enum Outcome {
        case keys([HistorySeal])
        /// The keyring holds the key but is locked (or asks for a password to store one).
        case locked(String)
        /// Neither the keyring nor a key file can be used.
        case unavailable(String)
    }

    /// The item's attributes in the keyring.
    static let attributes: [(String, String)] = [("xdg:schema", "org.xpb.HistoryKey"), ("application", "xpb"), ("xpb", "history key")]

    package static func obtain(keyFile: String, logger: Logger) -> Outcome {
        let fromFile = readKeyFile(keyFile, logger: logger)
        guard let keyring = SecretService() else {
            if let fromFile { return .keys([fromFile]) }
            return makeKeyFile(keyFile, logger: logger)
        }
        switch keyring.lookUp() {
        case let .found(keys):
            // Every item's key: two xpbd starting at once (two displays) may each have stored one;
            // the history opens with the one it was sealed with.
            let seals = keys.compactMap { HistorySeal(key: $0, source: .keyring) }
            guard !seals.isEmpty else { return .unavailable("the keyring's history key is not 32 bytes") }
            return .keys(seals + (fromFile.map { [$0] } ?? []))
        case let .locked(why):
            if let fromFile { return .keys([fromFile]) }
            return .locked(why)
        case .missing:
            guard let made = fromFile.flatMap({ HistorySeal(key: $0.key, source: .keyring) }) ?? HistorySeal.random(source: .keyring) else {
                return .unavailable("no random bytes for a key")
            }
            switch keyring.store(made.key) {
            case .stored:
                if fromFile != nil {
                    PayloadFiles.overwrite(keyFile)
                    logger.notice("the history's key moved from \(keyFile) into the keyring (Secret Service); the file is gone")
                }
                return .keys([made])
            case let .locked(why):
                if let fromFile { return .keys([fromFile]) }
                return .locked(why)
            case let .failed(why):
                logger.notice("the keyring (Secret Service) did not keep the history's key (\(why))")
                if let fromFile { return .keys([fromFile]) }
                return makeKeyFile(keyFile, logger: logger)
            }
        case let .failed(why):
            logger.debug("the Secret Service did not answer (\(why))")
            if let fromFile { return .keys([fromFile]) }
            return makeKeyFile(keyFile, logger: logger)
        }
    }

    /// How long a wait for the keyring sleeps between two looks when no signal comes (a
    /// Secret Service that says nothing when it unlocks is still looked at, once a minute).
    static let unlockLook: Int32 = 60_000

    /// Waits, blocking, for the keyring that holds the history's key to unlock: woken by the
    /// Secret Service's signals (a collection changed: gnome-keyring says so when it unlocks),
    /// and looking once a minute besides. Returns the keys (as ``obtain(keyFile:logger:)`` gives
    /// them), or nil when the wait ends with none: `stopping` says so, the keyring went away, or
    /// no key can be had from it.
    package static func waitForUnlock(keyFile: String, logger: Logger, stopping: () -> Bool) -> [HistorySeal]? {
        guard let keyring = SecretService(), keyring.watchChanges() else {
            logger.notice("the keyring (Secret Service) cannot be watched: this run keeps its history in memory until xpbd stops")
            return nil
        }
        while !stopping() {
            // Signals before this look are spent: a change after it stays queued for the wait.
            keyring.dropSignals()
            // No Unlock while waiting: each would leave gnome-keyring a prompt, kept with this
            // connection until it closes (one a minute, all day). SearchItems says when it is open.
            switch keyring.lookUp(askingToUnlock: false) {
            case .locked:
                break
            case .found, .missing:
                switch obtain(keyFile: keyFile, logger: logger) {
                case let .keys(seals): return seals
                case .locked: break
                case let .unavailable(why):
                    logger.warning("the keyring is unlocked, but \(why): this run keeps its history in memory until xpbd stops")
                    return nil
                }
            case let .failed(why):
                guard keyring.isServed else {
                    logger.notice("the keyring (Secret Service) went away (\(why)): this run keeps its history in memory until xpbd stops")
                    return nil
                }
            }
            guard keyring.waitForSignal(milliseconds: unlockLook) else {
                logger.notice("the session bus went away: this run keeps its history in memory until xpbd stops")
                return nil
            }
        }
        return nil
    }

    /// The key in `path`, nil when there is none (or it is unusable, said in a warning).
    static func readKeyFile(_ path: String, logger: Logger) -> HistorySeal? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno != ENOENT { logger.warning("the history's key file \(path) cannot be read: \(String(cString: strerror(errno)))") }
            return nil
        }
        defer { close(fd) }
        var info = stat()
        if fstat(fd, &info) == 0, info.st_mode & 0o077 != 0 {
            fchmod(fd, 0o600)
            logger.warning("the history's key file \(path) could be read by others (mode \(String(info.st_mode & 0o777, radix: 8))): made 600")
        }
        var key = [UInt8](repeating: 0, count: 33)
        let count = key.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count == 32, let seal = HistorySeal(key: Array(key.prefix(32)), source: .keyFile(path)) else {
            logger.warning("the history's key file \(path) does not hold a key of 32 bytes: not used")
            return nil
        }
        return seal
    }

    /// A new key in a new file of mode 600 (its folder made 700), said once.
    static func makeKeyFile(_ path: String, logger: Logger) -> Outcome {
        guard let seal = HistorySeal.random(source: .keyFile(path)) else { return .unavailable("no random bytes for a key") }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let temporary = path + ".new-\(getpid())"
        let fd = Glibc.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return .unavailable("the key file \(path) cannot be made: \(String(cString: strerror(errno)))") }
        let written = seal.key.withUnsafeBytes { writeAll(fd, $0) } == nil && fsync(fd) == 0
        close(fd)
        // Never over a key another xpbd made a moment ago: link fails where the name is taken.
        let linked = written ? link(temporary, path) : -1
        let taken = linked != 0 && errno == EEXIST
        unlink(temporary)
        guard linked == 0 else {
            if written, taken, let theirs = readKeyFile(path, logger: logger) { return .keys([theirs]) }
            return .unavailable("the key file \(path) cannot be written")
        }
        logger.notice("no keyring (Secret Service) on the session bus: the history is sealed with the key in \(path) (mode 600)")
        return .keys([seal])
    }

}

/// The Secret Service's few calls the history's key needs, over a private session-bus connection
/// of libdbus-1, blocking (at most ``timeout`` each). The secret travels in a "plain" session:
/// the session bus is the user's alone.
final class SecretService {
    private let connection: OpaquePointer
    static let timeout: Int32 = 3000
    static let name = "org.freedesktop.secrets"

    /// Nil without a session bus (never autolaunched) or without a Secret Service on it.
    init?() {
        guard let address = getenv("DBUS_SESSION_BUS_ADDRESS"), address.pointee != 0 else { return nil }
        _ = cdbusglue_linked()
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let connection = dbus_bus_get_private(DBUS_BUS_SESSION, &error) else { return nil }
        dbus_connection_set_exit_on_disconnect(connection, 0)
        self.connection = connection
        // A service that can be started (a .service file) counts: the calls start it.
        let owned = dbus_bus_name_has_owner(connection, Self.name, nil) != 0
        if !owned, !activatable() { return nil }
    }

    deinit {
        dbus_connection_close(connection)
        dbus_connection_unref(connection)
    }

    /// Whether the Secret Service's name has an owner.
    var isServed: Bool { dbus_bus_name_has_owner(connection, Self.name, nil) != 0 }

    /// Asks the bus for the Secret Service's signals (a collection made, changed, removed) and
    /// for its name's changes of owner, for ``waitForSignal(milliseconds:)``; false when the bus
    /// refuses.
    func watchChanges() -> Bool {
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        for rule in ["type='signal',interface='org.freedesktop.Secret.Service'",
                     "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(Self.name)'"] {
            dbus_bus_add_match(connection, rule, &error)
            if dbus_error_is_set(&error) != 0 { return false }
        }
        return true
    }

    /// Drops what the connection received and nobody asked for (signals).
    func dropSignals() {
        _ = dbus_connection_read_write(connection, 0)
        while let message = dbus_connection_pop_message(connection) { dbus_message_unref(message) }
    }

    /// Waits at most `milliseconds` for a signal; false when the connection to the bus is lost.
    func waitForSignal(milliseconds: Int32) -> Bool {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(milliseconds) * 1_000_000
        while true {
            if let message = dbus_connection_pop_message(connection) {
                let isSignal = dbus_message_get_type(message) == DBUS_MESSAGE_TYPE_SIGNAL
                dbus_message_unref(message)
                if isSignal { return true }
                continue
            }
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { return true }
            guard dbus_connection_read_write(connection, Int32(min(UInt64(Int32.max), (deadline - now) / 1_000_000 + 1))) != 0 else { return false }
        }
    }

    private func activatable() -> Bool {
        guard case let .success(values) = call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                               interface: "org.freedesktop.DBus", member: "ListActivatableNames", []),
              case let .array(_, names)? = values.first else { return false }
        return names.contains { if case let .string(name) = $0 { name == Self.name } else { false } }
    }

    enum LookUp {
        /// The keys of the history's items (one, but for a race of two xpbd storing at once).
        case found([[UInt8]])
        case missing
        case locked(String)
        case failed(String)
    }

    enum Store {
        case stored
        case locked(String)
        case failed(String)
    }

    /// The history key's item, opened. `askingToUnlock`: a locked item is asked for with
    /// `Unlock` (a service may open it without a prompt); else it is reported locked at once.
    func lookUp(askingToUnlock: Bool = true) -> LookUp {
        let session: String
        switch openSession() {
        case let .success(path): session = path
        case let .failure(failure): return .failed(failure.message)
        }
        defer { closeSession(session) }
        let attributes = DBusValue.dictionary(key: "s", value: "s", HistoryKeyring.attributes.map { (.string($0.0), .string($0.1)) })
        guard case let .success(found) = service("SearchItems", [attributes]), found.count == 2,
              case let .array(_, unlocked) = found[0], case let .array(_, locked) = found[1] else {
            return .failed("SearchItems gave no answer")
        }
        var items = unlocked.compactMap(Self.path)
        if items.isEmpty, !locked.isEmpty {
            let asked = DBusValue.array("o", locked.compactMap(Self.path).map { .objectPath($0) })
            if askingToUnlock, case let .success(answer) = service("Unlock", [asked]), answer.count == 2,
               case let .array(_, opened) = answer[0] {
                items = opened.compactMap(Self.path)
            }
            if items.isEmpty { return .locked("the keyring holding the history's key is locked") }
        }
        guard !items.isEmpty else { return .missing }
        let request = [DBusValue.array("o", items.prefix(8).map { .objectPath($0) }), .objectPath(session)]
        switch service("GetSecrets", request) {
        case let .success(answer):
            guard case let .dictionary(_, _, pairs)? = answer.first else { return .failed("GetSecrets gave no secret") }
            let keys = pairs.compactMap { pair -> [UInt8]? in
                guard case let .structure(fields) = pair.1, fields.count == 4, case let .bytes(value) = fields[2] else { return nil }
                return Array(value)
            }
            return keys.isEmpty ? .failed("GetSecrets gave no secret") : .found(keys)
        case let .failure(failure):
            return failure.name.hasSuffix("IsLocked") ? .locked(failure.message) : .failed(failure.message)
        }
    }

    /// Stores `key` as the history's item in the default collection.
    func store(_ key: [UInt8]) -> Store {
        let session: String
        switch openSession() {
        case let .success(path): session = path
        case let .failure(failure): return .failed(failure.message)
        }
        defer { closeSession(session) }
        let properties = DBusValue.dictionary(key: "s", value: "v", [
            (.string("org.freedesktop.Secret.Item.Label"), .variant(.string("xpb: the clipboard history's key"))),
            (.string("org.freedesktop.Secret.Item.Attributes"),
             .variant(.dictionary(key: "s", value: "s", HistoryKeyring.attributes.map { (.string($0.0), .string($0.1)) }))),
        ])
        let secret = DBusValue.structure([.objectPath(session), .bytes(Data()), .bytes(Data(key)), .string("application/octet-stream")])
        switch call(destination: Self.name, path: "/org/freedesktop/secrets/aliases/default", interface: "org.freedesktop.Secret.Collection",
                    member: "CreateItem", [properties, secret, .bool(false)]) {
        case let .success(answer):
            guard answer.count == 2, let item = Self.path(answer[0]), let prompt = Self.path(answer[1]) else { return .failed("CreateItem gave no item") }
            if item == "/" || prompt != "/" { return .locked("the keyring asks for a password to keep the history's key") }
            return .stored
        case let .failure(failure):
            return failure.name.hasSuffix("IsLocked") ? .locked(failure.message) : .failed(failure.message)
        }
    }

    private func openSession() -> Result<String, DBusFailure> {
        service("OpenSession", [.string("plain"), .variant(.string(""))]).flatMap { answer in
            guard answer.count == 2, let path = Self.path(answer[1]) else { return .failure(.failed("OpenSession gave no session")) }
            return .success(path)
        }
    }

    private func closeSession(_ path: String) {
        _ = call(destination: Self.name, path: path, interface: "org.freedesktop.Secret.Session", member: "Close", [])
    }

    private static func path(_ value: DBusValue) -> String? {
        if case let .string(path) = value { return path }
        return nil
    }

    private func service(_ member: String, _ arguments: [DBusValue]) -> Result<[DBusValue], DBusFailure> {
        call(destination: Self.name, path: "/org/freedesktop/secrets", interface: "org.freedesktop.Secret.Service", member: member, arguments)
    }

    private func call(destination: String, path: String, interface: String, member: String, _ arguments: [DBusValue]) -> Result<[DBusValue], DBusFailure> {
        guard let message = dbus_message_new_method_call(destination, path, interface, member) else { return .failure(.failed("out of memory")) }
        defer { dbus_message_unref(message) }
        var iterator = DBusMessageIter()
        dbus_message_iter_init_append(message, &iterator)
        for argument in arguments { argument.append(to: &iterator) }
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let reply = dbus_connection_send_with_reply_and_block(connection, message, Self.timeout, &error) else {
            let name = error.name.map { String(cString: $0) } ?? "org.freedesktop.DBus.Error.Failed"
            let text = error.message.map { String(cString: $0) } ?? "no reply"
            return .failure(DBusFailure(name: name, message: text))
        }
        defer { dbus_message_unref(reply) }
        switch DBusValue.arguments(of: reply, maxBytes: 1 << 16) {
        case let .success(values): return .success(values)
        case .failure: return .failure(.failed("\(member)'s reply could not be read"))
        }
    }
}
