"""Announce latency between a desktop display and a headless xpbd linked to it.

Usage: headless.py RUNS XPB DISPLAY SERVER_RUNTIME SERVER_HOME
Prints two lines: "to-server P50 P99 MAX N" and "to-desktop P50 P99 MAX N" (milliseconds).

To the server: an `xclip -i` owner is started on the desktop's display; the time until the
server's `xpb watch` prints the change. To the desktop: `xpb copy` on the server; the time until
the desktop's `xpb watch` (XFixes) prints the change. Both include the copying process's start
(xclip's, about 2 ms; xpb's, about 3 ms), which a copy made by an app does not pay.
"""
import os
import select
import subprocess
import sys
import time

runs, xpb, display, runtime, home = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
desktop_env = dict(os.environ, DISPLAY=display)
server_env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
server_env.update(XDG_RUNTIME_DIR=runtime, HOME=home)


def watcher(env):
    process = subprocess.Popen([xpb, "watch"], env=env, stdout=subprocess.PIPE, bufsize=0)
    time.sleep(0.5)
    return process


def wait_line(process, timeout=10):
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    if not ready:
        raise SystemExit("no change seen within %d s" % timeout)
    return process.stdout.readline()


def percentiles(values):
    values = sorted(values)
    at = lambda p: values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]
    return "%.2f %.2f %.2f %d" % (at(50), at(99), values[-1], len(values))


# To the server.
server_watch = watcher(server_env)
latencies, owners = [], []
for index in range(runs):
    start = time.monotonic()
    owners.append(subprocess.Popen(["xclip", "-i", "-selection", "clipboard", "-quiet"], env=desktop_env,
                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    owners[-1].stdin.write(b"to the server %d" % index)
    owners[-1].stdin.close()
    wait_line(server_watch)
    latencies.append((time.monotonic() - start) * 1000)
    time.sleep(0.1)
    for owner in owners[:-1]:
        owner.kill()
        owner.wait()
    owners = owners[-1:]
print("to-server", percentiles(latencies))
server_watch.kill()
for owner in owners:
    owner.kill()

# To the desktop.
desktop_watch = watcher(desktop_env)
latencies = []
for index in range(runs):
    start = time.monotonic()
    subprocess.run([xpb, "copy"], env=server_env, input=b"to the desktop %d" % index, check=True)
    # The desktop's watch sees the daemon take CLIPBOARD for the server's copy.
    wait_line(desktop_watch)
    latencies.append((time.monotonic() - start) * 1000)
    time.sleep(0.1)
print("to-desktop", percentiles(latencies))
desktop_watch.kill()
