#!/usr/bin/env python3
"""Convergence of xpbd sync: simultaneous copies on every display, then the time until every
display's CLIPBOARD holds the same contents (read with real xclip processes).

Usage: converge.py ROUNDS DISPLAY...   (each display runs an xpbd synced with the others)
Prints one line per round: "ok MS", "disagree VALUES" or "empty VALUES", then a summary line
"rounds N agreed N disagreements N empty N p50 MS p99 MS max MS".
"""
import os
import subprocess
import sys
import time

TIMEOUT = 10.0  # seconds a round may take to agree
STABLE = 0.2    # the agreement must still hold this much later


def env_for(display):
    environment = dict(os.environ)
    environment["DISPLAY"] = display
    return environment


def read(display):
    try:
        return subprocess.run(["xclip", "-o", "-selection", "clipboard"], env=env_for(display),
                              capture_output=True, timeout=5).stdout
    except subprocess.TimeoutExpired:
        return b""


def main():
    rounds = int(sys.argv[1])
    displays = sys.argv[2:]
    latencies, disagreements, empties = [], 0, 0
    for number in range(rounds):
        texts = [f"round {number} on {display}".encode() for display in displays]
        owners = [subprocess.Popen(["xclip", "-i", "-selection", "clipboard", "-quiet"], env=env_for(display),
                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                  for display in displays]
        # xclip takes the selection once its input ends: close all inputs back to back.
        for owner, text in zip(owners, texts):
            owner.stdin.write(text)
        for owner in owners:
            owner.stdin.close()
        start = time.monotonic()
        wall = time.time()
        values = []
        agreed_at = None
        while time.monotonic() - start < TIMEOUT:
            values = [read(display) for display in displays]
            if len(set(values)) == 1 and values[0] in texts:
                agreed_at = time.monotonic() - start
                time.sleep(STABLE)
                values = [read(display) for display in displays]
                if len(set(values)) != 1 or values[0] not in texts:
                    agreed_at = None
                break
            time.sleep(0.002)
        if agreed_at is not None:
            latencies.append(agreed_at * 1000)
            print(f"ok {agreed_at * 1000:.1f}")
        elif any(value == b"" for value in values):
            empties += 1
            print(f"empty {values} (round {number}, began at {wall:.3f})")
        else:
            disagreements += 1
            print(f"disagree {values} (round {number}, began at {wall:.3f})")
        for owner in owners:
            owner.kill()
            owner.wait()
        # Let the daemons take over from the killed owners before the next round.
        time.sleep(0.2)
    latencies.sort()
    at = lambda p: latencies[min(len(latencies) - 1, int(round(p / 100 * (len(latencies) - 1))))] if latencies else float("nan")
    print(f"rounds {rounds} agreed {len(latencies)} disagreements {disagreements} empty {empties} "
          f"p50 {at(50):.1f} p99 {at(99):.1f} max {at(100):.1f}")


if __name__ == "__main__":
    main()
