#!/usr/bin/env python3
"""KDE Connect's clipboard, copy to arrival, both ways: two real kdeconnectd (the anchor), then
kdeconnectd and `xpbd --kdeconnect`. Each side runs in a network namespace of its own, joined to
the other by a veth pair and to nothing else (no packet leaves the machine), on its own Xvfb.

Usage: sudo python3 Benchmarks/kdeconnect.py BIN [ROUNDS]
  BIN: the directory of the static build (xpb, xpbd, xpbd-kdeconnect; make build's .build-static/release)
Prints one Markdown table of p50, p90 and max per direction, in ms.

A round: a text is copied with xclip on one display (the clock starts just before xclip starts) and
the clock stops when `xpb watch` on the other display prints its change (XFixes, no polling); the
text there is then checked with xclip -o. xclip's own start is in every row alike.
"""
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

KDECONNECTD = "/usr/lib/x86_64-linux-gnu/libexec/kdeconnectd"


def run(command, env=None, check=True, timeout=30):
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {result.stderr.strip()}")
    return result


def wait_for(predicate, timeout=30, what="a condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


class Network:
    """Two namespaces joined by a veth pair and nothing else."""

    def __init__(self):
        tag = f"{os.getpid() % 100000}"
        self.names = (f"xpbbA{tag}", f"xpbbB{tag}")
        a, b = self.names
        for step in (["netns", "add", a], ["netns", "add", b],
                     ["link", "add", "xba", "netns", a, "type", "veth", "peer", "name", "xbb", "netns", b],
                     ["-n", a, "addr", "add", "10.62.0.1/24", "broadcast", "10.62.0.255", "dev", "xba"],
                     ["-n", b, "addr", "add", "10.62.0.2/24", "broadcast", "10.62.0.255", "dev", "xbb"],
                     ["-n", a, "link", "set", "xba", "up"], ["-n", b, "link", "set", "xbb", "up"],
                     ["-n", a, "link", "set", "lo", "up"], ["-n", b, "link", "set", "lo", "up"],
                     ["-n", a, "route", "add", "default", "dev", "xba"], ["-n", b, "route", "add", "default", "dev", "xbb"]):
            run(["ip"] + step)

    def close(self):
        for name in self.names:
            run(["ip", "netns", "del", name], check=False)


class Side:
    """A private Xvfb, session bus and home; processes started in a namespace."""

    def __init__(self, work, name, namespace):
        self.namespace = namespace
        self.home = os.path.join(work, name)
        os.makedirs(os.path.join(self.home, "run"), mode=0o700)
        self.processes = []
        self.xvfb = subprocess.Popen(["Xvfb", "-displayfd", "1", "-nolisten", "tcp", "-screen", "0", "640x480x24"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.processes.append(self.xvfb)
        self.display = ":" + self.xvfb.stdout.readline().decode().strip()
        self.env = dict(os.environ, DISPLAY=self.display, HOME=self.home,
                        XDG_CONFIG_HOME=os.path.join(self.home, ".config"),
                        XDG_DATA_HOME=os.path.join(self.home, ".local/share"),
                        XDG_CACHE_HOME=os.path.join(self.home, ".cache"),
                        XDG_STATE_HOME=os.path.join(self.home, ".local/state"),
                        XDG_RUNTIME_DIR=os.path.join(self.home, "run"), QT_QPA_PLATFORM="xcb",
                        QT_LOGGING_RULES="kdeconnect.*=true")
        # A bus of its own, in the namespace, with no service directories: nothing is started by
        # D-Bus activation (a kdeconnectd started so would run where the bus does, and the
        # session bus's default configuration would start it in the machine's own network).
        config = os.path.join(self.home, "bus.conf")
        with open(config, "w") as file:
            file.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:dir={self.home}</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
</busconfig>
""")
        bus = subprocess.Popen(["ip", "netns", "exec", namespace, "dbus-daemon", f"--config-file={config}", "--nofork", "--nopidfile",
                                "--print-address=1"], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.processes.append(bus)
        self.env["DBUS_SESSION_BUS_ADDRESS"] = bus.stdout.readline().decode().strip()

    def start(self, command):
        process = subprocess.Popen(["ip", "netns", "exec", self.namespace] + command, env=self.env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        self.processes.append(process)
        return process

    def call(self, path, method, *arguments):
        return run(["dbus-send", "--session", "--print-reply", "--dest=org.kde.kdeconnect", path, method] + list(arguments),
                   env=self.env).stdout

    def kde_id(self):
        try:
            reply = self.call("/modules/kdeconnect", "org.kde.kdeconnect.daemon.selfId")
        except (RuntimeError, subprocess.TimeoutExpired):
            return None
        parts = reply.split('"')
        return parts[1] if len(parts) > 1 else None

    def kde_trusts(self, device):
        try:
            return "boolean true" in self.call(f"/modules/kdeconnect/devices/{device}", "org.freedesktop.DBus.Properties.Get",
                                               "string:org.kde.kdeconnect.device", "string:isTrusted")
        except RuntimeError:
            return False

    def kde_reachable(self, device):
        try:
            return "boolean true" in self.call(f"/modules/kdeconnect/devices/{device}", "org.freedesktop.DBus.Properties.Get",
                                               "string:org.kde.kdeconnect.device", "string:isReachable")
        except RuntimeError:
            return False

    def kde_has_request(self, device):
        try:
            return "boolean true" in self.call(f"/modules/kdeconnect/devices/{device}", "org.kde.kdeconnect.device.hasPairingRequests")
        except RuntimeError:
            return False

    def clipboard(self):
        result = run(["xclip", "-o", "-selection", "clipboard"], env=self.env, check=False, timeout=10)
        return result.stdout if result.returncode == 0 else None

    def copy(self, text):
        subprocess.run(["xclip", "-selection", "clipboard"], input=text.encode(), env=self.env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)

    def close(self):
        for process in reversed(self.processes):
            try:
                os.killpg(process.pid, signal.SIGTERM) if process.pid != self.xvfb.pid else process.terminate()
            except (ProcessLookupError, PermissionError):
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def rounds(source, destination, xpb, count, label):
    """Copy on source, time until xpb watch on destination prints; the text checked after."""
    watch = subprocess.Popen([xpb, "watch", "--backend", "x11"], env=destination.env, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, bufsize=0)
    times = []
    try:
        time.sleep(0.3)  # the watcher's XFixes selection is set up
        for index in range(count):
            text = f"{label} {index} {time.monotonic_ns()}"
            start = time.monotonic()
            source.copy(text)
            line = watch.stdout.readline()
            elapsed = (time.monotonic() - start) * 1000
            if not line:
                raise RuntimeError("xpb watch ended")
            arrived = wait_for(lambda: destination.clipboard() == text or None, timeout=10, what=f"'{text}' to arrive")
            if arrived:
                times.append(elapsed)
            # Changes that follow (a keeper taking the copy over) are drained before the next round.
            time.sleep(0.15)
            while True:
                ready, _, _ = select.select([watch.stdout], [], [], 0)
                if not ready:
                    break
                if not watch.stdout.readline():
                    break
    finally:
        watch.terminate()
        watch.wait()
    return times


def summary(times):
    ordered = sorted(times)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return f"{pick(0.5):.1f} | {pick(0.9):.1f} | {ordered[-1]:.1f}"


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(64)
    binaries = os.path.abspath(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    xpb = os.path.join(binaries, "xpb")
    work = tempfile.mkdtemp(prefix="xpb-kdeconnect-bench.")
    results = []
    network = Network()
    sides = []
    try:
        # The anchor: two kdeconnectd.
        a = Side(work, "a", network.names[0])
        b = Side(work, "b", network.names[1])
        sides += [a, b]
        a.start([KDECONNECTD])
        a_id = wait_for(a.kde_id, what="kdeconnectd a")
        b.start([KDECONNECTD])
        b_id = wait_for(b.kde_id, what="kdeconnectd b")
        wait_for(lambda: a.kde_reachable(b_id), what="the two kdeconnectd to link")
        b.call(f"/modules/kdeconnect/devices/{a_id}", "org.kde.kdeconnect.device.requestPair")
        wait_for(lambda: a.kde_has_request(b_id), what="a's pairing request")
        a.call(f"/modules/kdeconnect/devices/{b_id}", "org.kde.kdeconnect.device.acceptPairing")
        wait_for(lambda: b.kde_trusts(a_id), what="the two kdeconnectd to pair")
        results.append(("kdeconnectd → kdeconnectd", rounds(a, b, xpb, count, "anchor a to b")))
        results.append(("kdeconnectd ← kdeconnectd", rounds(b, a, xpb, count, "anchor b to a")))
        b.close()
        sides.remove(b)

        # kdeconnectd and xpbd --kdeconnect (restarted side b: xpbd, its helper, the build's binaries).
        c = Side(work, "c", network.names[1])
        sides.append(c)
        c.start([os.path.join(binaries, "xpbd"), "--no-config", "--kdeconnect", "--kdeconnect-name", "xpbd bench"])
        devices = lambda: json.loads(run([xpb, "devices", "--json"], env=c.env, check=False).stdout or "{}")
        wait_for(lambda: any(d["id"] == a_id and d["reachable"] for d in devices().get("devices", [])), what="xpbd to link to kdeconnectd")
        own = devices()["ownId"]
        run([xpb, "devices", "pair", a_id], env=c.env)
        wait_for(lambda: a.kde_has_request(own), what="kdeconnectd to hold xpbd's request")
        a.call(f"/modules/kdeconnect/devices/{own}", "org.kde.kdeconnect.device.acceptPairing")
        wait_for(lambda: any(d["id"] == a_id and d["paired"] for d in devices().get("devices", [])), what="xpbd to pair")
        results.append(("kdeconnectd → xpbd", rounds(a, c, xpb, count, "kde to xpbd")))
        results.append(("xpbd → kdeconnectd", rounds(c, a, xpb, count, "xpbd to kde")))
    finally:
        for side in sides:
            side.close()
        network.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"| copy on one display → arrival on the other ({count} rounds) | p50 ms | p90 ms | max ms |")
    print("|---|---|---|---|")
    for label, times in results:
        print(f"| {label} | {summary(times)} |")


if __name__ == "__main__":
    main()
