#!/usr/bin/env python3
"""Turns the raw results of Benchmarks/run.sh into RESULTS.md: medians, min/max, ratios, targets."""
import json
import os
import platform
import re
import statistics
import subprocess
import sys

from interval import interval_words, verdict

results, out = sys.argv[1], sys.argv[2]


def hyperfine(name):
    """One command's runs: from name.json, or merged over the rounds name.1.json, name.2.json …"""
    paths = [os.path.join(results, name + ".json")]
    if not os.path.exists(paths[0]):
        paths = sorted(os.path.join(results, f) for f in os.listdir(results) if re.fullmatch(re.escape(name) + r"\.\d+\.json", f))
    rounds = {}
    for path in paths:
        with open(path) as f:
            for r in json.load(f)["results"]:
                rounds.setdefault(r["command"], []).append(r["times"])
    merged = {}
    for command, per_round in rounds.items():
        values = sorted(t for times in per_round for t in times)
        middle = len(values) // 2
        median = values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
        # "times": the runs round by round (interval.py draws whole rounds again).
        merged[command] = {"median": median, "min": values[0], "max": values[-1], "runs": len(values), "times": per_round}
    return merged


def ms(seconds):
    return f"{seconds * 1000:.2f} ms"


def stats(r):
    return f"{ms(r['median'])} ({ms(r['min'])} – {ms(r['max'])})"


def version(command):
    try:
        # xclip prints its version on standard error.
        run = subprocess.run(command, capture_output=True, text=True, timeout=10)
        return (run.stdout.strip() or run.stderr.strip()).splitlines()[0]
    except Exception:
        return "?"


rows = []


def faults(name):
    """The page faults of one paste, xpb's and xsel's: the row's words, or none where not measured."""
    try:
        xpb_faults, xsel_faults = (int(v) for v in open(os.path.join(results, name)).read().split())
    except (OSError, ValueError):
        return ""
    return f"; page faults of one paste: xpb {xpb_faults}, xsel {xsel_faults}"


def beside(runs, measured, what, peer=None):
    """The rows beside a measured one, from the same rounds, where they ran: xpb under a second
    name (`measured (again)`: the run's resolution) and the earlier build (`measured (before)`,
    XPB_BENCH_BEFORE). `what` names the act ("paste", "copy", "pair"); `peer`, (name, runs), the
    other tool each is also compared with."""
    first = runs[measured]
    for suffix in ("again", "before"):
        other = runs.get(f"{measured} ({suffix})")
        if other is None:
            continue
        ratios = [f"{other['median'] / peer[1]['median']:.2f} × {peer[0]}"] if peer else []
        if suffix == "again":
            title = f"the same xpb {what} under a second name, in the same rounds (this run's resolution)"
            ratios.append(f"{other['median'] / first['median']:.2f} × the first ({interval_words(other['times'], first['times'])})")
        else:
            title = f"the same {what}, the earlier build (XPB_BENCH_BEFORE), in the same rounds"
            ratios.append(f"now {first['median'] / other['median']:.2f} × before ({interval_words(first['times'], other['times'])})")
        rows.append((title, f"xpb {suffix} {stats(other)}", "; ".join(ratios), "", ""))


paste = hyperfine("paste13")
xpb, xclip, xsel, floor = paste["xpb paste"], paste["xclip -o"], paste["xsel -o"], paste["swift floor"]
r = xpb["median"] / xclip["median"]
rows.append(("paste 13 bytes, whole process (owner xclip)", f"xpb {stats(xpb)}; xclip {stats(xclip)}; xsel {stats(xsel)}; "
             f"start-up floor of any Swift program linked like xpb (Benchmarks/floor.swift, prints nothing) {stats(floor)}, "
             f"without Foundation (floor-bare.swift) {stats(paste['swift floor, no Foundation'])}" + faults("faults_written.txt"),
             f"{r:.2f} × xclip, {xpb['median'] / xsel['median']:.2f} × xsel ({interval_words(xpb['times'], xsel['times'])}; "
             f"{xpb['runs']} runs each)", "≤ 1.0 × xsel, then ≤ 0.8 ×",
             verdict(xpb["median"] / xsel["median"], 1.0, xpb["times"], xsel["times"])
             + ("" if xpb["median"] / xsel["median"] <= 0.8 else " (0.8: **not met**)")))
beside(paste, "xpb paste", "paste")
if os.path.exists(os.path.join(results, "paste13cold.1.json")):
    cold = hyperfine("paste13cold")
    ratio = cold["xpb paste"]["median"] / cold["xsel -o"]["median"]
    rows.append(("paste 13 bytes, every binary read back from disk (page cache dropped, as after a reboot)",
                 f"xpb {stats(cold['xpb paste'])}; xsel {stats(cold['xsel -o'])}" + faults("faults_read.txt"),
                 f"{ratio:.2f} × xsel ({interval_words(cold['xpb paste']['times'], cold['xsel -o']['times'])})", "≤ 1.0 × xsel",
                 verdict(ratio, 1.0, cold["xpb paste"]["times"], cold["xsel -o"]["times"])))

def copy_rows(name, title, what):
    """A small copy's row (xpb against xclip and xsel, in the rounds of `name`) and the rows beside it."""
    runs = hyperfine(name)
    a, b, c = runs["xpb copy"], runs["xclip -i"], runs["xsel -i"]
    r = a["median"] / b["median"]
    rows.append((title, f"xpb {stats(a)}; xclip {stats(b)}; xsel {stats(c)}",
                 f"{r:.2f} × xclip ({interval_words(a['times'], b['times'])}; {a['runs']} runs each), "
                 f"{a['median'] / c['median']:.2f} × xsel", "≤ 1.0 × xclip", verdict(r, 1.0, a["times"], b["times"])))
    beside(runs, "xpb copy", what, ("xclip", b))


copy_rows("copy13", "copy 13 bytes, whole process (it returns once its background owner holds CLIPBOARD)", "copy")
if os.path.exists(os.path.join(results, "copy13stdin.1.json")):
    copy_rows("copy13stdin", "the same copy from standard input (as an editor's yank or tmux's copy-command pipes it)",
              "copy from standard input")
if os.path.exists(os.path.join(results, "copy13cold.1.json")):
    cold_copy = hyperfine("copy13cold")
    a, b = cold_copy["xpb copy"], cold_copy["xclip -i"]
    r = a["median"] / b["median"]
    rows.append(("the same copy, every binary read back from disk (page cache dropped, as after a reboot)",
                 f"xpb {stats(a)}; xclip {stats(b)}", f"{r:.2f} × xclip ({interval_words(a['times'], b['times'])}; {a['runs']} runs each)",
                 "≤ 1.0 × xclip", verdict(r, 1.0, a["times"], b["times"])))
if os.path.exists(os.path.join(results, "copy13daemon.1.json")):
    copy_rows("copy13daemon", "the same copy while xpbd keeps the clipboard (an xpb copy returns once xpbd has counted it)",
              "copy while xpbd runs")
pair = hyperfine("copypaste13")
a, b, c = pair["xpb copy, xpb paste"], pair["xclip -i, xclip -o"], pair["xsel -i, xsel -o"]
r = a["median"] / b["median"]
rows.append(("copy 13 bytes then paste them at once (a script's pair)", f"xpb {stats(a)}; xclip {stats(b)}; xsel {stats(c)}",
             f"{r:.2f} × xclip's pair ({interval_words(a['times'], b['times'])}), {a['median'] / c['median']:.2f} × xsel's",
             "≤ 1.0 × xclip's pair", verdict(r, 1.0, a["times"], b["times"])))
try:
    hangs = len(open(os.path.join(results, "xsel_hangs.txt")).read().split())
except OSError:
    hangs = 0
hang_note = None
if hangs:
    hang_note = (f"**xsel hung.** In the copy-then-paste rounds, `xsel -o` waited forever {hangs} time(s) on the `xsel -i` "
                 "just before it (xsel -i returns before its background process owns the selection, and xsel -o has no working "
                 "timeout); the benchmark's watchdog ended it after 10 s, and the round was timed again with failures ignored.")
beside(pair, "xpb copy, xpb paste", "pair", ("xclip's pair", b))

size = int(open(os.path.join(results, "size.txt")).read())
rows.append(("`xpb` as `make install` installs it (stripped; xpbd is a link to it)", f"{size / 1048576:.2f} MiB ({size} bytes)",
             f"{size / 1048576:.2f} MiB", "≤ 22 MiB", verdict(size / 1048576, 22)))

def latencies(name):
    values = sorted(float(line) for line in open(os.path.join(results, name)) if line.strip())
    return values[len(values) // 2], values[min(len(values) - 1, int(len(values) * 0.9))]


serve = hyperfine("serve13")
a, b = serve["owner xpb"], serve["owner xclip"]
r = a["median"] / b["median"]
(xa50, xa90), (ca50, ca90) = latencies("answer_xpb.txt"), latencies("answer_xclip.txt")
rows.append(("serve 13 bytes to `xclip -o`",
             f"whole `xclip -o`, both owners at once on two private displays (swapped every round), the readers in the same rounds: "
             f"owner xpb {stats(a)}; owner xclip {stats(b)}. The owner's answer alone "
             f"(Benchmarks/answer.c, 500 conversions from one connection, 25 a round): xpb p50 {xa50:.3f} ms, p90 {xa90:.3f} ms; "
             f"xclip p50 {ca50:.3f} ms, p90 {ca90:.3f} ms",
             f"{r:.2f} (answer {xa50 / ca50:.2f})", "≤ 1.0 ×", verdict(r, 1.0)))

megabyte = hyperfine("paste1mb")
a, b = megabyte["owner xpb"], megabyte["owner xclip"]
r = a["median"] / b["median"]
rows.append(("paste 1 MB, reader xclip", f"both owners at once, as the row above: owner xpb {stats(a)}; owner xclip {stats(b)}", f"{r:.2f}", "≤ 1.0 ×", verdict(r, 1.0)))

copy = hyperfine("copy100")
a, b = copy["xpb -> xpb"], copy["xclip -> xclip"]
r = a["median"] / b["median"]
rows.append(("copy + paste 100 MB through the X server, xpb → xpb (XPB_FAST_PATH=0)", f"xpb {stats(a)}; xclip {stats(b)}", f"{r:.2f}", "≤ 1.0 ×", verdict(r, 1.0)))

ceiling = [line.split() for line in open(os.path.join(results, "ceiling.txt"))]
best_chunk, best = min(((int(c), float(t)) for c, t in ceiling), key=lambda x: x[1])
r = a["median"] / best
rows.append(("the same 100 MB against the ceiling",
             f"xpb {ms(a['median'])} (whole copy + paste processes); ceiling {ms(best)} at {best_chunk}-byte chunks "
             f"({', '.join(f'{c}: {ms(float(t))}' for c, t in ceiling)})",
             f"{r:.2f}", "≤ 1.15 ×", verdict(r, 1.15)))

fast = hyperfine("fast100")
check = open(os.path.join(results, "fast_check.txt")).read().strip()
a, b = fast["xpb -> xpb"], fast["xclip -> xclip"]
af, bf = fast["xpb -> xpb, to a file"], fast["xclip -> xclip, to a file"]
speedup, speedup_file = b["median"] / a["median"], bf["median"] / af["median"]
rows.append(("100 MB xpb → xpb on one host, fast path (descriptor over a UNIX socket)",
             f"to /dev/null: xpb {stats(a)}, xclip {stats(b)}; to a file: xpb {stats(af)}, xclip {stats(bf)}; paste {check}",
             f"{speedup:.1f} × faster ({speedup_file:.1f} × to a file)", "≥ 3 × faster than xclip",
             "met" if min(speedup, speedup_file) >= 3 and check == "byte-exact" else "**not met**"))


def max_rss(name):
    text = open(os.path.join(results, name)).read()
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    return int(m.group(1)) if m else None


rx, rc = max_rss("rss_xpb.txt"), max_rss("rss_xclip.txt")
if rx and rc:
    r = rx / rc
    rows.append(("owner's peak RSS serving a 100 MB file", f"xpb {rx / 1024:.1f} MiB; xclip {rc / 1024:.1f} MiB", f"{r:.2f}", "≤ 0.3 ×", verdict(r, 0.3)))

conc = {}
for line in open(os.path.join(results, "concurrent.txt")):
    parts = line.split()
    conc.setdefault(parts[0], []).append(parts[1:])
# Rounds of one paste and of the eight (xpb's owner): medians; every round's eight must be whole.
single = statistics.median(float(p[0]) for p in conc["single"])
xt, xok = statistics.median(float(p[0]) for p in conc["xpb"]), min(int(p[1]) for p in conc["xpb"])
ct, cok = float(conc["xclip"][0][0]), int(conc["xclip"][0][1])
r = xt / (8 * single)
rounds = len(conc["xpb"])
rows.append(("8 concurrent 100 MB pastes from one owner",
             f"xpb owner: {xok}/8 byte-exact in every one of {rounds} rounds, the eight in {xt:.2f} s (one paste {single:.2f} s; medians); "
             f"xclip owner: {cok}/8 byte-exact in {ct:.2f} s (60 s limit each)",
             f"{r:.2f} × 8 pastes", "all byte-exact, ≤ 1.2 × 8 × one", "met" if xok == 8 and r <= 1.2 else "**not met**"))

lat = sorted(float(line) for line in open(os.path.join(results, "latency.txt")) if line.strip())
p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]
rows.append((f"change seen: foreign SetSelectionOwner → change line of `xpb watch`, {len(lat)} changes",
             f"p50 {p50:.3f} ms, p99 {p99:.3f} ms, max {lat[-1]:.3f} ms (Benchmarks/latency.c owns CLIPBOARD and times each line; "
             "includes the watcher's TARGETS round trip to the new owner and the pipe). Peers: xclip and xsel have no watch mode; "
             "polling watchers at 0.5 s see a change after 250 ms on average",
             "–", "p50 < 2 ms, p99 < 10 ms", "met" if p50 < 2 and p99 < 10 else "**not met**"))

idle = dict(line.split() for line in open(os.path.join(results, "idle.txt")))
rows.append(("idle owner and idle watcher over 10 s, after a copy the watcher saw and two pastes the owner served (one converted)",
             f"context switches, all threads: owner {idle['owner']}, watcher {idle['watcher']}", "–",
             "no wake-ups beyond X events", "met" if int(idle["owner"]) <= 2 and int(idle["watcher"]) <= 2 else "**not met**"))

during = next(iter(hyperfine("slowprov_during").values()))
calm = next(iter(hyperfine("slowprov_idle").values()))
checks = open(os.path.join(results, "slowprov_check.txt")).read().split()
rows.append(("an unrelated conversion while a 2 s provider of the same owner runs (library owner, Tests/ClientPackage)",
             f"`xclip -o -t UTF8_STRING` while another requestor waits for the slow `text/html`: {stats(during)}; owner idle: "
             f"{stats(calm)}; the slow requestor got its bytes {checks.count('ok')}/{len(checks)}",
             f"{during['median'] / calm['median']:.2f} × idle", "≤ 50 ms", "met" if during["max"] <= 0.050 else "**not met**"))

attack_during, attack_idle = hyperfine("attack_during"), hyperfine("attack_idle")
attacked, quiet = attack_during["xclip -o under a MULTIPLE and STRING flood"], attack_idle["xclip -o, owner idle"]
server_flooded, server_idle = attack_during["xprop under the flood"], attack_idle["xprop, idle"]
owner_kb = int(open(os.path.join(results, "attack_owner_kb.txt")).read().split()[0])
after_kb = int(open(os.path.join(results, "attack_owner_after_kb.txt")).read().split()[0])
rows.append(("`xclip -o` of 13 bytes while a hostile requestor floods MULTIPLE (100 pairs) and STRING requests (Tests/Attackers/xhostile.c `flood`)",
             f"under attack {stats(attacked)}; owner idle {stats(quiet)}; the owner's peak memory over five floods {owner_kb // 1024} MiB, "
             f"{after_kb // 1024} MiB a second after the last; a round trip to the X server alone (`xprop -root`, which never "
             f"meets the owner) {stats(server_flooded)} under the flood, {stats(server_idle)} idle",
             f"{attacked['median'] / quiet['median']:.2f} × idle", "≤ 2 × idle", verdict(attacked["median"] / quiet["median"], 2.0)))


# Where the 13-byte paste goes: each tool's start (its --version, which opens no display), then
# the paste's own work over it, in time (the same rounds) and in instructions (callgrind).
cfloor = paste["C floor"]["median"]


def starts_note():
    """Each tool's start alone and its paste's work over it, in the paste row's rounds."""
    if "xpb --version" not in paste:
        return ""
    starts = {tool: paste[name]["median"] for tool, name in
              (("xpb", "xpb --version"), ("xsel", "xsel --version"), ("xclip", "xclip -version"))}
    works = {"xpb": xpb["median"] - starts["xpb"], "xsel": xsel["median"] - starts["xsel"], "xclip": xclip["median"] - starts["xclip"]}
    than = "quicker than" if starts["xpb"] < starts["xsel"] else "no quicker than"
    return (f" Each tool's start alone, in the same rounds (`--version`, which opens no display): xpb {ms(starts['xpb'])}, "
            f"xsel {ms(starts['xsel'])} (its dynamic loader and libraries), xclip {ms(starts['xclip'])}: xpb's "
            f"static start is {than} xsel's. The paste's own work over each start: xpb "
            f"{ms(works['xpb'])}, xsel {ms(works['xsel'])}, xclip {ms(works['xclip'])}.")


def annotated(pattern):
    """The inclusive instruction count callgrind_annotate gives a line of one `xpb paste`
    (run.sh: paste13.annotate), or None."""
    try:
        text = open(os.path.join(results, "paste13.annotate")).read()
    except OSError:
        return None
    m = re.search(r"^\s*([\d,]+) \([^)]*\)\s+" + pattern, text, re.M)
    return int(m.group(1).replace(",", "")) if m else None


def work_instructions_note():
    """callgrind's counts of each tool's paste and start (xpb's paste: paste13.annotate; the
    rest: run.sh's instructions.txt)."""
    try:
        counts = dict(line.split() for line in open(os.path.join(results, "instructions.txt")) if len(line.split()) == 2)
        xv, sp, sv = (int(counts[k]) / 1e6 for k in ("xpb-version", "xsel-paste", "xsel-version"))
    except (OSError, KeyError, ValueError):
        return ""
    total = annotated(r"PROGRAM TOTALS")
    if total is None:
        return ""
    xp = total / 1e6
    return (f" In instructions (callgrind): xpb's paste runs {xp - xv:.2f} M over its start's {xv:.2f} M, xsel's "
            f"{sp - sv:.2f} M over its start's {sv:.2f} M (most of them its dynamic loader's).")


def metadata_note():
    """The inclusive count of the runtime's making prespecialized generic metadata canonical."""
    made, whole = annotated(r"\?\?\?:swift_getCanonicalPrespecializedGenericMetadata "), annotated(r"PROGRAM TOTALS")
    if made is None or whole is None:
        return ""
    return (f" Of the {whole / 1e6:.2f} M instructions of xpb's paste, {made / 1e6:.2f} M ({100 * made / whole:.0f} %) are the Swift runtime making generic types' "
            f"metadata on first use (`swift_getCanonicalPrespecializedGenericMetadata`: each array, dictionary or "
            f"set storage class of a new element type, each optional).")


notes = [
    f"**paste 13 bytes.** xpb is the README's build as `make install` installs it (a fully static executable, "
    f"stripped, no dynamic loader). A Swift "
    f"program linked the same way that does nothing takes {ms(floor['median'])} to run; a C program (`/bin/true`) "
    f"{ms(cfloor)}." + starts_note() + " xpb asks for no XFixes, starts no X thread and makes no closing "
    f"round trip for a one-shot read; it interns its atoms in one round trip and asks for TARGETS with the likely "
    f"target in one round trip to the owner (it picks the type from what the owner offers; xsel asks for "
    f"UTF8_STRING blind, and interns its atoms one round trip each)." + work_instructions_note() + metadata_note() + " "
    f"The static link lays out the functions and globals that a paste "
    f"and a copy touch next to each other (`Scripts/link-order.txt`, written by `Scripts/gen-link-order` from "
    f"callgrind and lackey runs), which took a paste from about 250 faults to 170. How many a run takes also "
    f"depends on the page cache: a binary just written (as the benchmark's stripped copy, or one `make install` "
    f"or dpkg just wrote) is mapped in longer runs than the same file read back from disk, hence the two rows.",
    "**serve 13 bytes.** The whole `xclip -o` process is timed, so the row moves with xclip's own start-up (compare its "
    "min and max); the owner's answer alone is the figure in brackets. Per conversion both owners make the same Xlib calls and "
    "wake one thread. xpb's loop runs about 20 k instructions of its own per conversion (callgrind of its X thread over "
    "200 conversions) and makes 4.9 system calls (xclip 5.6, `strace -c`); `perf stat` gives xpb's owner 26–31 µs of "
    "processor per conversion, xclip's 13–21 µs. The rest of the answer's time is the kernel's: the wake-up and the "
    "socket. Timed by hand on this machine the two owners take turns in the lead.",
]

cpu = "?"
try:
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
except Exception:
    pass

if hang_note:
    notes.append(hang_note)

with open(out, "w") as f:
    f.write("# Benchmark results\n\nWritten by `bash Benchmarks/run.sh`; every row measured in the same run on one private Xvfb.\n\n")
    f.write(f"- machine: {platform.machine()}, {os.cpu_count()} cores, {cpu}; {platform.platform()}\n")
    f.write(f"- xclip: {version(['xclip', '-version']) or '?'}\n")
    f.write(f"- xsel: {version(['xsel', '--version'])}\n")
    f.write(f"- {version(['swift', '--version'])}\n")
    f.write(f"- hyperfine: {version(['hyperfine', '--version'])}\n\n")
    f.write("Times are medians (min – max) of hyperfine runs of whole processes; the small pastes and copies are timed in twenty short rounds, each round starting one command further along (no command always first or last).\n\n")
    f.write("| scenario | measured | ratio xpb/peer | target | |\n|---|---|---|---|---|\n")
    for row in rows:
        f.write("| " + " | ".join(row) + " |\n")
    f.write("\n## Notes\n\n")
    for note in notes:
        f.write(f"- {note}\n")
