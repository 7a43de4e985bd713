#!/usr/bin/env python3
"""xpbd's start and stop, as a restart feels them: the time from exec to the log line that says
it is ready, and from SIGTERM to its exit with "history written" logged. Prints one JSON object.

Usage: startstop.py RUNS READY-PATTERN XPBD [ARGUMENTS ...]
READY-PATTERN is a regular expression every line before which must be logged for xpbd to count
as ready (the last one it logs on the way up: "listening on" on one host, "bridging" on two).
Each run is a fresh process on the same history; a run that never gets ready, exits on its own,
or does not write its history fails the whole measurement (exit 1), never a number.
"""
import json
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import time

runs, pattern, command = int(sys.argv[1]), re.compile(sys.argv[2]), sys.argv[3:]


def lines_until(process, predicate, deadline):
    """Reads stderr lines until one matches; returns (time it was read, all text read)."""
    text = ""
    buffer = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(process.stderr.fileno(), 65536)
        if not chunk:
            return None, text + buffer.decode(errors="replace")
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            text += line.decode(errors="replace") + "\n"
            if predicate(line.decode(errors="replace")):
                return time.monotonic(), text
    return None, text


starts, stops = [], []
for run in range(runs):
    began = time.monotonic()
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    at, log = lines_until(process, pattern.search, began + 10)
    if at is None:
        process.kill()
        process.wait()
        sys.exit(f"startstop: run {run + 1}: xpbd was not ready within 10 s; its log:\n{log}")
    starts.append(at - began)
    # Settled a moment (its idle work begun) before it is asked to stop.
    time.sleep(0.3)
    asked = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        rest = process.communicate(timeout=10)[1].decode(errors="replace")
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        sys.exit(f"startstop: run {run + 1}: xpbd did not stop within 10 s of SIGTERM")
    stops.append(time.monotonic() - asked)
    if process.returncode != 0 or "history written" not in rest:
        sys.exit(f"startstop: run {run + 1}: xpbd exited {process.returncode} without writing its history:\n{log}{rest}")

print(json.dumps({
    "runs": runs,
    "ready_ms": {"median": 1000 * statistics.median(starts), "max": 1000 * max(starts)},
    "stop_ms": {"median": 1000 * statistics.median(stops), "max": 1000 * max(stops)},
}))
