import CDBus
import CDBusGlue
import FoundationEssentials
import Glibc
import Logging
import PasteboardKit
import PasteboardSelections
import Synchronization

/// Klipper's D-Bus interface on the session bus, so that what already calls KDE's clipboard
/// manager works with xpbd unchanged: `org.kde.klipper`, object `/klipper`, interface
/// `org.kde.klipper.klipper`. `pass` and gopass call `clearClipboardHistory` after every password
/// they copy; scripts and launchers use the rest. The name is taken only when it is free (a real
/// Klipper keeps it), never queued for.
///
/// Through libdbus-1 (the reference implementation), on a private connection of its own read by
/// one thread (`xpbd.dbus`). What each method does in xpbd's terms:
/// - `getClipboardContents() → s`: the text of the newest history entry of CLIPBOARD;
/// - `setClipboardContents(s)`: a copy of that text, served and kept as a history entry;
/// - `clearClipboardContents()`: CLIPBOARD emptied (not brought back);
/// - `clearClipboardHistory()`: the history forgotten, pinned entries kept;
/// - `saveClipboardHistory()`: the history written to disk now (it always is; this checkpoints);
/// - `getClipboardHistoryMenu() → as`: the entries' texts, newest first;
/// - `getClipboardHistoryItem(i) → s`: entry i's text (an error past the end);
/// - the signal `clipboardHistoryUpdated()`: whenever the history changed.
final class KlipperService: @unchecked Sendable {
    static let busName = "org.kde.klipper"
    static let objectPath = "/klipper"
    static let interface = "org.kde.klipper.klipper"
    /// The longest text `setClipboardContents` takes.
    static let maxText = 16 << 20

    private let connection: OpaquePointer
    private weak var daemon: ClipboardDaemon?
    private let logger: Logger
    private let isStopped = Mutex(false)
    private let sending = Mutex(())

    /// Connects to the session bus and takes the name; nil (logged) when there is no session bus,
    /// or another program has the name.
    static func start(for daemon: ClipboardDaemon, logger: Logger) -> KlipperService? {
        guard let address = getenv("DBUS_SESSION_BUS_ADDRESS"), address.pointee != 0 else {
            logger.debug("D-Bus: no session bus (DBUS_SESSION_BUS_ADDRESS is not set): Klipper's interface is not offered")
            return nil
        }
        _ = cdbusglue_linked()
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let connection = dbus_bus_get_private(DBUS_BUS_SESSION, &error) else {
            logger.warning("D-Bus: cannot reach the session bus (\(Self.message(error))): Klipper's interface is not offered")
            return nil
        }
        dbus_connection_set_exit_on_disconnect(connection, 0)
        let result = dbus_bus_request_name(connection, busName, UInt32(DBUS_NAME_FLAG_DO_NOT_QUEUE), &error)
        guard result == DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER else {
            let why = result < 0 ? Self.message(error) : "another program (a real Klipper) has it"
            logger.info("D-Bus: \(busName) not taken: \(why)")
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
            return nil
        }
        let service = KlipperService(connection: connection, daemon: daemon, logger: logger)
        do {
            try DetachedThread.start(name: "xpbd.dbus") { service.run() }
        } catch {
            logger.warning("D-Bus: cannot start its thread: \(error)")
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
            return nil
        }
        logger.info("D-Bus: \(busName) \(objectPath) answers Klipper's interface on the session bus")
        return service
    }

    private init(connection: OpaquePointer, daemon: ClipboardDaemon, logger: Logger) {
        self.connection = connection
        self.daemon = daemon
        self.logger = logger
    }

    private static func message(_ error: DBusError) -> String {
        error.message.map { String(cString: $0) } ?? "unknown error"
    }

    /// Stops the thread; it closes the connection (the name goes with it).
    func stop() {
        isStopped.withLock { $0 = true }
    }

    /// The thread: reads and answers until stopped or the bus goes.
    private func run() {
        defer {
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
        }
        while !isStopped.withLock({ $0 }) {
            let alive = sending.withLock { _ in dbus_connection_read_write(connection, 200) }
            guard alive != 0 else {
                logger.warning("D-Bus: the session bus went away")
                return
            }
            while let message = sending.withLock({ _ in dbus_connection_pop_message(connection) }) {
                handle(message)
                dbus_message_unref(message)
            }
        }
    }

    /// The history changed: the signal goes out (from any thread).
    func historyUpdated() {
        guard !isStopped.withLock({ $0 }), let signal = dbus_message_new_signal(Self.objectPath, Self.interface, "clipboardHistoryUpdated") else { return }
        send(signal)
    }

    private func send(_ message: OpaquePointer) {
        sending.withLock { _ in
            _ = dbus_connection_send(connection, message, nil)
            dbus_connection_flush(connection)
        }
        dbus_message_unref(message)
    }

    // MARK: Methods

    private func handle(_ message: OpaquePointer) {
        guard dbus_message_get_type(message) == DBUS_MESSAGE_TYPE_METHOD_CALL,
              let memberPointer = dbus_message_get_member(message) else { return }
        let member = String(cString: memberPointer)
        let interface = dbus_message_get_interface(message).map { String(cString: $0) }
        let path = dbus_message_get_path(message).map { String(cString: $0) }
        if interface == "org.freedesktop.DBus.Introspectable", member == "Introspect" {
            return reply(to: message, .string(path == Self.objectPath ? Self.introspection : Self.rootIntrospection))
        }
        if interface == "org.freedesktop.DBus.Peer", member == "Ping" { return reply(to: message, nil) }
        guard path == Self.objectPath, interface == nil || interface == Self.interface else {
            return fail(message, "org.freedesktop.DBus.Error.UnknownMethod", "no method \(member) on \(path ?? "?") (\(interface ?? "no interface"))")
        }
        guard let daemon else { return fail(message, "org.freedesktop.DBus.Error.Failed", "xpbd is stopping") }
        let arguments = Self.arguments(of: message)
        do {
            switch member {
            case "getClipboardContents":
                reply(to: message, .string(try text(at: 0, in: daemon, selection: .general) ?? ""))
            case "setClipboardContents":
                guard arguments.count == 1, case let .string(text) = arguments[0] else {
                    return fail(message, "org.freedesktop.DBus.Error.InvalidArgs", "setClipboardContents takes one string")
                }
                try daemon.setClipboardText(text)
                reply(to: message, nil)
            case "clearClipboardContents":
                try daemon.host.clearSelection(.general)
                reply(to: message, nil)
            case "clearClipboardHistory":
                try daemon.store.withLock { try $0.clear() }
                daemon.historyChanged()
                logger.info("D-Bus: clearClipboardHistory: the history was cleared (pinned entries kept)")
                reply(to: message, nil)
            case "saveClipboardHistory":
                daemon.store.withLock { $0.checkpoint() }
                reply(to: message, nil)
            case "getClipboardHistoryMenu":
                var texts: [String] = []
                let count = daemon.store.withLock { $0.totals().count }
                for index in 0 ..< count {
                    guard let text = try daemon.store.withLock({ try $0.snapshot(at: index) })?.text(limit: 4096) else { continue }
                    texts.append(text)
                }
                reply(to: message, .strings(texts))
            case "getClipboardHistoryItem":
                guard arguments.count == 1, case let .int(index) = arguments[0] else {
                    return fail(message, "org.freedesktop.DBus.Error.InvalidArgs", "getClipboardHistoryItem takes one int32")
                }
                guard index >= 0, let snapshot = try daemon.store.withLock({ try $0.snapshot(at: Int(index)) }) else {
                    return fail(message, "org.freedesktop.DBus.Error.InvalidArgs", "no history entry \(index)")
                }
                reply(to: message, .string(snapshot.text(limit: Self.maxText) ?? ""))
            default:
                fail(message, "org.freedesktop.DBus.Error.UnknownMethod", "no method \(member) in \(Self.interface)")
            }
        } catch {
            fail(message, "org.freedesktop.DBus.Error.Failed", "\(error)")
        }
    }

    /// The text of CLIPBOARD's newest history entry.
    private func text(at index: Int, in daemon: ClipboardDaemon, selection: Pasteboard.Name) throws -> String? {
        try daemon.store.withLock { try $0.latest(selection: selection, display: daemon.host.nodeName) }?.text(limit: Self.maxText)
            ?? daemon.store.withLock { try $0.snapshot(at: index) }?.text(limit: Self.maxText)
    }

    // MARK: Wire

    private enum Value {
        case string(String)
        case strings([String])
        case int(Int32)
    }

    /// The arguments of a call: strings and 32-bit integers (what Klipper's methods take).
    private static func arguments(of message: OpaquePointer) -> [Value] {
        var iterator = DBusMessageIter()
        guard dbus_message_iter_init(message, &iterator) != 0 else { return [] }
        var values: [Value] = []
        repeat {
            switch dbus_message_iter_get_arg_type(&iterator) {
            case Int32(UInt8(ascii: "s")):
                var pointer: UnsafePointer<CChar>?
                dbus_message_iter_get_basic(&iterator, &pointer)
                // libdbus checked it is UTF-8; the length is the message's to bound (the bus does).
                values.append(.string(pointer.map { String(cString: $0) } ?? ""))
            case Int32(UInt8(ascii: "i")):
                var value: Int32 = 0
                dbus_message_iter_get_basic(&iterator, &value)
                values.append(.int(value))
            default:
                values.append(.strings([]))
            }
        } while dbus_message_iter_next(&iterator) != 0 && values.count < 8
        return values
    }

    private func reply(to message: OpaquePointer, _ value: Value?) {
        guard dbus_message_get_no_reply(message) == 0, let reply = dbus_message_new_method_return(message) else { return }
        var iterator = DBusMessageIter()
        dbus_message_iter_init_append(reply, &iterator)
        func append(_ text: String, to iterator: inout DBusMessageIter) {
            // D-Bus strings are UTF-8 without NUL: what a copy's text holds otherwise is dropped.
            let clean = String(decoding: text.utf8.filter { $0 != 0 }, as: UTF8.self)
            clean.withCString { pointer in
                var pointer: UnsafePointer<CChar>? = pointer
                _ = dbus_message_iter_append_basic(&iterator, Int32(UInt8(ascii: "s")), &pointer)
            }
        }
        switch value {
        case let .string(text)?: append(text, to: &iterator)
        case let .strings(texts)?:
            var array = DBusMessageIter()
            _ = dbus_message_iter_open_container(&iterator, Int32(UInt8(ascii: "a")), "s", &array)
            for text in texts { append(text, to: &array) }
            _ = dbus_message_iter_close_container(&iterator, &array)
        case let .int(number)?:
            var number = number
            _ = dbus_message_iter_append_basic(&iterator, Int32(UInt8(ascii: "i")), &number)
        case nil: break
        }
        send(reply)
    }

    private func fail(_ message: OpaquePointer, _ name: String, _ text: String) {
        guard dbus_message_get_no_reply(message) == 0, let reply = dbus_message_new_error(message, name, text) else { return }
        send(reply)
    }

    static let rootIntrospection = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node><node name="klipper"/></node>
        """

    static let introspection = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>
          <interface name="org.kde.klipper.klipper">
            <method name="getClipboardContents"><arg type="s" direction="out"/></method>
            <method name="setClipboardContents"><arg name="s" type="s" direction="in"/></method>
            <method name="clearClipboardContents"/>
            <method name="clearClipboardHistory"/>
            <method name="saveClipboardHistory"/>
            <method name="getClipboardHistoryMenu"><arg type="as" direction="out"/></method>
            <method name="getClipboardHistoryItem"><arg type="s" direction="out"/><arg name="i" type="i" direction="in"/></method>
            <signal name="clipboardHistoryUpdated"/>
          </interface>
          <interface name="org.freedesktop.DBus.Introspectable">
            <method name="Introspect"><arg name="xml_data" type="s" direction="out"/></method>
          </interface>
          <interface name="org.freedesktop.DBus.Peer">
            <method name="Ping"/>
          </interface>
        </node>
        """
}
