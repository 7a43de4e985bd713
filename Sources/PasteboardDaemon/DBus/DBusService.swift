import CDBus
import CDBusGlue
import CLinux
import FoundationEssentials
import Glibc
import Logging
import PasteboardKit
import PasteboardWire
import Synchronization

/// An object xpbd answers on the session bus (``KlipperObject``, ``PasteboardObject``).
package protocol DBusObject: AnyObject, Sendable {
    /// The bus name it is offered under; taken only when free, never queued for.
    var busName: String { get }
    var path: String { get }
    var interface: String { get }
    /// Its `<interface>` element, for `Introspect`.
    var introspection: String { get }
    /// Each method's arguments, as a D-Bus signature: a call of another method is
    /// `UnknownMethod`, one with other arguments (an object path for a string, one more) is
    /// `InvalidArgs`, before anything is read.
    var signatures: [String: String] { get }
    /// The most bytes of strings and byte arrays one call's arguments may hold: past it,
    /// `InvalidArgs` before any is copied.
    var maxArgumentBytes: Int { get }
    /// Answers a method call of its interface, from `caller`: the reply's values, or a D-Bus error.
    func call(_ member: String, _ arguments: [DBusValue], caller: DBusCaller) -> Result<[DBusValue], DBusFailure>
}

/// Who sent a method call: its process, asked of the bus when a method needs it.
package struct DBusCaller {
    /// The caller's process id, nil when the bus does not say (at most 1 s).
    package let processID: () -> Int?
}

/// A D-Bus error: its name (`org.freedesktop.DBus.Error.InvalidArgs` …) and message.
package struct DBusFailure: Error {
    package var name: String
    package var message: String

    package static func invalidArguments(_ message: String) -> DBusFailure { DBusFailure(name: "org.freedesktop.DBus.Error.InvalidArgs", message: message) }
    package static func failed(_ message: String) -> DBusFailure { DBusFailure(name: "org.freedesktop.DBus.Error.Failed", message: message) }
    package static func unknownMethod(_ message: String) -> DBusFailure { DBusFailure(name: "org.freedesktop.DBus.Error.UnknownMethod", message: message) }
}

/// xpbd's connection to the session bus, through libdbus-1 (the reference implementation): a
/// private connection read by one thread (`xpbd.dbus`), which owns the names of the objects it
/// serves and routes each method call to its object. Only the session bus of the user who runs
/// xpbd reaches it (the bus's own policy: the session bus lets only its user connect).
package final class DBusService: @unchecked Sendable {
    private let connection: OpaquePointer
    private let objects: [any DBusObject]
    private let logger: Logger
    private let isStopped = Mutex(false)
    /// Wakes the thread from its wait when xpbd stops (it waits with no timeout: an idle daemon
    /// does not wake for nothing).
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// libdbus's connection is used from the reading thread and from signal senders.
    private let sending = Mutex(())
    /// Told when the bus goes away (not when stopped).
    private let lost: @Sendable () -> Void
    /// Whose call is served next, and what may be sent: used by the thread alone.
    private var flow = DBusCallFlow<OpaquePointer>()

    /// Connects to the session bus and takes each object's name where it is free; nil (logged,
    /// at debug when `retrying`) when there is no session bus or no object got its name. `lost`
    /// is told if the bus goes away later.
    package static func start(_ candidates: [any DBusObject], logger: Logger, retrying: Bool = false,
                      lost: @escaping @Sendable () -> Void = {}) -> DBusService? {
        guard let address = getenv("DBUS_SESSION_BUS_ADDRESS"), address.pointee != 0 else {
            logger.debug("D-Bus: no session bus (DBUS_SESSION_BUS_ADDRESS is not set): no D-Bus interface is offered")
            return nil
        }
        _ = cdbusglue_linked()
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let connection = dbus_bus_get_private(DBUS_BUS_SESSION, &error) else {
            logger.log(level: retrying ? .debug : .warning, "D-Bus: cannot reach the session bus (\(Self.message(error))): no D-Bus interface is offered")
            return nil
        }
        dbus_connection_set_exit_on_disconnect(connection, 0)
        var objects: [any DBusObject] = []
        for object in candidates {
            dbus_error_free(&error)
            dbus_error_init(&error)
            let result = dbus_bus_request_name(connection, object.busName, UInt32(DBUS_NAME_FLAG_DO_NOT_QUEUE), &error)
            guard result == DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER else {
                let why = result < 0 ? Self.message(error) : "another program has it"
                logger.info("D-Bus: \(object.busName) not taken: \(why)")
                continue
            }
            objects.append(object)
        }
        guard !objects.isEmpty else {
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
            return nil
        }
        let service = DBusService(connection: connection, objects: objects, logger: logger, lost: lost)
        do {
            try DetachedThread.start(name: "xpbd.dbus") { service.run() }
        } catch {
            logger.warning("D-Bus: cannot start its thread: \(error)")
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
            return nil
        }
        for object in objects { logger.info("D-Bus: \(object.busName) \(object.path) answers \(object.interface) on the session bus") }
        return service
    }

    private init(connection: OpaquePointer, objects: [any DBusObject], logger: Logger, lost: @escaping @Sendable () -> Void) {
        self.lost = lost
        var fds: [Int32] = [-1, -1]
        if clinux_wake_pipe(&fds) != 0 { fds = [-1, -1] }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        self.connection = connection
        self.objects = objects
        self.logger = logger
    }

    private static func message(_ error: DBusError) -> String {
        error.message.map { String(cString: $0) } ?? "unknown error"
    }

    deinit {
        // Here, not as the thread ends: stop() may still be writing its byte.
        if wakeRead >= 0 { Glibc.close(wakeRead) }
        if wakeWrite >= 0 { Glibc.close(wakeWrite) }
    }

    /// Whether `object` got its name and is served.
    func serves(_ object: any DBusObject) -> Bool { objects.contains { $0 === object } }

    /// Stops the thread; it closes the connection (the names go with it).
    package func stop() {
        isStopped.withLock { $0 = true }
        var byte: UInt8 = 1
        if wakeWrite >= 0 { _ = write(wakeWrite, &byte, 1) }
    }

    /// The thread: reads and answers until stopped or the bus goes. It reads every message that
    /// came, then serves one call (``DBusCallFlow`` says whose), and reads again.
    private func run() {
        defer {
            for call in flow.drain() { dbus_message_unref(call) }
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
        }
        while !isStopped.withLock({ $0 }) {
            // Waits for input without the lock (a signal can be sent meanwhile), then reads.
            var fd: Int32 = -1
            let pending = sending.withLock { _ in dbus_connection_get_dispatch_status(connection) == DBUS_DISPATCH_DATA_REMAINS }
            let busy = pending || flow.hasTurn
            // The socket (a unix one, or TCP where the bus is reached so); without one, libdbus
            // waits itself, holding the lock (as it must not spin).
            let hasSocket = dbus_connection_get_socket(connection, &fd) != 0 && fd >= 0
            if !busy, hasSocket {
                var pollers = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
                _ = poll(&pollers, wakeRead >= 0 ? 2 : 1, wakeRead >= 0 ? -1 : 200)
            }
            let alive = sending.withLock { _ in dbus_connection_read_write(connection, busy || hasSocket ? 0 : 200) }
            guard alive != 0 else {
                logger.warning("D-Bus: the session bus went away")
                if !isStopped.withLock({ $0 }) { lost() }
                return
            }
            while let message = sending.withLock({ _ in dbus_connection_pop_message(connection) }) {
                receive(message)
            }
            if let (caller, call) = flow.next() {
                handle(call, from: caller)
                dbus_message_unref(call)
            }
        }
    }

    /// A message came: a call waits for its turn (or is refused, or dropped), the answer to a Ping
    /// tells that its caller read its replies, the rest is let go.
    private func receive(_ message: OpaquePointer) {
        switch dbus_message_get_type(message) {
        case DBUS_MESSAGE_TYPE_METHOD_CALL:
            let caller = dbus_message_get_sender(message).map { String(cString: $0) } ?? ""
            // A held caller's call waits only if its arguments are small (a short check: past
            // 4 KiB it stops reading them).
            let small: Bool? = flow.isHeld(caller) ? (try? DBusValue.arguments(of: message, maxBytes: 4 << 10).get()) != nil : nil
            switch flow.arrived(message, from: caller, small: small) {
            case .queued:
                return
            case .refused:
                reply(to: message, from: caller, .failure(DBusFailure(name: "org.freedesktop.DBus.Error.LimitsExceeded",
                                                                      message: "more than \(DBusCallFlow<OpaquePointer>.maxQueued) calls wait for an answer: wait for them first")))
            case let .dropped(first):
                if first { logger.notice("D-Bus: \(caller) has not read \(ByteCount.format(DBusCallFlow<OpaquePointer>.maxUnread)) of replies: its calls are dropped until it reads them") }
            }
        case DBUS_MESSAGE_TYPE_METHOD_RETURN, DBUS_MESSAGE_TYPE_ERROR:
            let answer = flow.answered(serial: dbus_message_get_reply_serial(message))
            if let caller = answer.pingAgain { ping(caller) }
        default:
            break
        }
        dbus_message_unref(message)
    }

    /// Asks `caller` for a `Peer.Ping`: its answer comes once it read everything sent before.
    private func ping(_ caller: String) {
        guard !caller.isEmpty, let message = dbus_message_new_method_call(caller, "/", "org.freedesktop.DBus.Peer", "Ping") else {
            return flow.pingFailed(caller)
        }
        if let serial = send(message) { flow.pinged(caller, serial: serial) } else { flow.pingFailed(caller) }
    }

    /// Emits a signal of `object` (from any thread).
    func signal(_ object: any DBusObject, _ name: String, _ values: [DBusValue] = []) {
        guard serves(object), !isStopped.withLock({ $0 }), let signal = dbus_message_new_signal(object.path, object.interface, name) else { return }
        var iterator = DBusMessageIter()
        dbus_message_iter_init_append(signal, &iterator)
        for value in values { value.append(to: &iterator) }
        send(signal)
    }

    /// Sends `message` and lets it go: its serial, nil when libdbus had no memory for it.
    @discardableResult
    private func send(_ message: OpaquePointer) -> UInt32? {
        var serial: UInt32 = 0
        let sent = sending.withLock { _ in
            defer { dbus_connection_flush(connection) }
            return dbus_connection_send(connection, message, &serial) != 0
        }
        dbus_message_unref(message)
        return sent ? serial : nil
    }

    // MARK: Calls

    private func handle(_ message: OpaquePointer, from caller: String) {
        let reply = { (result: Result<[DBusValue], DBusFailure>) in self.reply(to: message, from: caller, result) }
        guard let memberPointer = dbus_message_get_member(message) else { return reply(.failure(.unknownMethod("a call with no method"))) }
        let member = String(cString: memberPointer)
        let interface = dbus_message_get_interface(message).map { String(cString: $0) }
        let path = dbus_message_get_path(message).map { String(cString: $0) } ?? "/"
        if interface == "org.freedesktop.DBus.Introspectable", member == "Introspect" {
            return reply(.success([.string(introspection(of: path))]))
        }
        if interface == "org.freedesktop.DBus.Peer", member == "Ping" { return reply(.success([])) }
        guard let object = objects.first(where: { $0.path == path && (interface == nil || interface == $0.interface) }) else {
            return reply(.failure(.unknownMethod("no method \(member) on \(path) (\(interface ?? "no interface"))")))
        }
        guard let expected = object.signatures[member] else {
            return reply(.failure(.unknownMethod("no method \(member) in \(object.interface)")))
        }
        let signature = dbus_message_get_signature(message).map { String(cString: $0) } ?? ""
        guard signature == expected else {
            return reply(.failure(.invalidArguments("\(member) takes (\(expected)), not (\(signature)): see Introspect")))
        }
        let arguments: [DBusValue]
        switch DBusValue.arguments(of: message, maxBytes: object.maxArgumentBytes) {
        case let .success(values):
            arguments = values
        case .failure(.tooLarge):
            return reply(.failure(.invalidArguments("\(member): the arguments hold more than the \(ByteCount.format(object.maxArgumentBytes)) it takes")))
        case .failure(.unreadable):
            return reply(.failure(.invalidArguments("\(member): arguments of a type \(object.interface) does not take")))
        }
        let connection = self.connection
        let who = DBusCaller(processID: {
            guard !caller.isEmpty else { return nil }
            let pid = cdbus_connection_pid(connection, caller, 1000)
            return pid > 0 ? Int(pid) : nil
        })
        reply(object.call(member, arguments, caller: who))
    }

    /// The most a reply of xpbd holds (``DBusValue/wireSize``, a bound): under D-Bus's 64 MiB for
    /// one array and its 128 MiB for a message. A reply past either made the bus drop xpbd.
    static let maxReply = 60 << 20

    /// Answers `message` of `caller` with `result` (unless it asked for no reply): a reply past
    /// ``maxReply``, or a large one while callers hold too many unread (``DBusCallFlow``), is
    /// refused with a short error instead.
    private func reply(to message: OpaquePointer, from caller: String, _ result: Result<[DBusValue], DBusFailure>) {
        guard dbus_message_get_no_reply(message) == 0 else {
            _ = flow.replied(to: caller, bytes: 0)
            return
        }
        var result = result
        var bytes = 0
        if case let .success(values) = result {
            let size = values.reduce(0) { $0 + $1.wireSize }
            bytes = size
            let member = dbus_message_get_member(message).map { String(cString: $0) } ?? "the call"
            if size > Self.maxReply {
                logger.info("D-Bus: the reply to \(member) would take \(ByteCount.format(size)): refused (at most \(ByteCount.format(Self.maxReply)))")
                result = .failure(.failed("the reply would take \(ByteCount.format(size)), more than the \(ByteCount.format(Self.maxReply)) a D-Bus message of xpbd carries: read it with xpb paste, or ask for fewer entries"))
            } else if !flow.mayReply(size) {
                logger.info("D-Bus: the reply to \(member) would take \(ByteCount.format(size)) while callers have not read \(ByteCount.format(flow.unread)): refused")
                result = .failure(DBusFailure(name: "org.freedesktop.DBus.Error.LimitsExceeded",
                                              message: "xpbd holds \(ByteCount.format(flow.unread)) of replies other callers have not read: try again"))
            }
        }
        switch result {
        case let .success(values):
            guard let reply = dbus_message_new_method_return(message) else { return }
            var iterator = DBusMessageIter()
            dbus_message_iter_init_append(reply, &iterator)
            for value in values { value.append(to: &iterator) }
            send(reply)
        case let .failure(failure):
            guard let reply = dbus_message_new_error(message, failure.name, failure.message) else { return }
            bytes = failure.name.utf8.count + failure.message.utf8.count
            send(reply)
        }
        let wasHeld = flow.isHeld(caller)
        if flow.replied(to: caller, bytes: bytes + 128) { ping(caller) }
        if !wasHeld, flow.isHeld(caller) {
            logger.info("D-Bus: \(caller) has not read \(ByteCount.format(DBusCallFlow<OpaquePointer>.maxUnread)) of replies: its calls wait until it does")
        }
    }

    /// The introspection of `path`: its objects' interfaces, or the nodes under it.
    private func introspection(of path: String) -> String {
        let header = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>
            """
        let standard = """
              <interface name="org.freedesktop.DBus.Introspectable">
                <method name="Introspect"><arg name="xml_data" type="s" direction="out"/></method>
              </interface>
              <interface name="org.freedesktop.DBus.Peer">
                <method name="Ping"/>
              </interface>
            """
        let here = objects.filter { $0.path == path }
        if !here.isEmpty { return header + "\n" + here.map(\.introspection).joined(separator: "\n") + "\n" + standard + "\n</node>" }
        // The next path element of each object below.
        let prefix = path == "/" ? "/" : path + "/"
        var children: [String] = []
        for object in objects where object.path.hasPrefix(prefix) {
            let next = object.path.dropFirst(prefix.count).split(separator: "/").first.map(String.init) ?? ""
            if !next.isEmpty, !children.contains(next) { children.append(next) }
        }
        return header + children.map { "<node name=\"\($0)\"/>" }.joined() + "</node>"
    }
}
