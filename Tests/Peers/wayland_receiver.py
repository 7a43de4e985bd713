"""A Wayland data-control reader written on the bare wire (no libwayland), for the tests: it
asks the clipboard's source for a type and closes its end of the pipe at once, as often as told,
the way a reader killed mid-paste or a hostile client does; then it reads the type properly and
writes the bytes to standard output.

Usage: wayland_receiver.py SOCKET TYPE CLOSED_EARLY
Exit status 2 when the clipboard is empty or does not offer TYPE.
"""
import array
import os
import socket
import struct
import sys

path, wanted, closed_early = sys.argv[1], sys.argv[2], int(sys.argv[3])
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
conn.connect(path)
next_id = 2
buffered = b""


def new_id():
    global next_id
    made = next_id
    next_id += 1
    return made


def string(text):
    raw = text.encode() + b"\0"
    return struct.pack("<I", len(raw)) + raw + b"\0" * (-len(raw) % 4)


def send(obj, opcode, payload=b"", fd=None):
    message = struct.pack("<II", obj, ((8 + len(payload)) << 16) | opcode) + payload
    if fd is None:
        conn.sendall(message)
    else:
        conn.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])


def events():
    """Yields (object, opcode, payload) as they come."""
    global buffered
    while True:
        while len(buffered) >= 8:
            obj, word = struct.unpack_from("<II", buffered)
            size = word >> 16
            if len(buffered) < size:
                break
            payload, buffered = buffered[8:size], buffered[size:]
            yield obj, word & 0xFFFF, payload
        chunk = conn.recv(65536)
        if not chunk:
            sys.exit("the compositor closed the connection")
        buffered += chunk


def roundtrip(handle):
    callback = new_id()
    send(1, 0, struct.pack("<I", callback))
    for obj, opcode, payload in events():
        if obj == callback:
            return
        handle(obj, opcode, payload)


def read_string(payload, offset):
    length = struct.unpack_from("<I", payload, offset)[0]
    text = payload[offset + 4:offset + 4 + length - 1].decode()
    return text, offset + 4 + length + (-length % 4)


registry = new_id()
send(1, 1, struct.pack("<I", registry))
globals_ = {}


def on_global(obj, opcode, payload):
    if obj == registry and opcode == 0:
        name = struct.unpack_from("<I", payload)[0]
        interface, offset = read_string(payload, 4)
        globals_[interface] = (name, struct.unpack_from("<I", payload, offset)[0])


roundtrip(on_global)
seat, manager = new_id(), new_id()
for interface, made, version in (("wl_seat", seat, 1), ("zwlr_data_control_manager_v1", manager, 1)):
    name, _ = globals_[interface]
    send(registry, 0, struct.pack("<I", name) + string(interface) + struct.pack("<II", version, made))
device = new_id()
send(manager, 1, struct.pack("<II", device, seat))
offers = {}
selection = [0]


def on_device(obj, opcode, payload):
    if obj == device and opcode == 0:
        offers[struct.unpack_from("<I", payload)[0]] = []
    elif obj == device and opcode == 1:
        selection[0] = struct.unpack_from("<I", payload)[0]
    elif obj in offers and opcode == 0:
        offers[obj].append(read_string(payload, 0)[0])


roundtrip(on_device)
offer = selection[0]
if not offer or wanted not in offers.get(offer, []):
    sys.exit(2)
for _ in range(closed_early):
    read_end, write_end = os.pipe()
    send(offer, 0, string(wanted), fd=write_end)
    os.close(write_end)
    os.close(read_end)
roundtrip(on_device)
read_end, write_end = os.pipe()
send(offer, 0, string(wanted), fd=write_end)
os.close(write_end)
while True:
    chunk = os.read(read_end, 1 << 20)
    if not chunk:
        break
    sys.stdout.buffer.write(chunk)
