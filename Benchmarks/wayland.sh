#!/usr/bin/env bash
# xpb against wl-paste (wl-clipboard) on one private headless sway, in one run; writes
# Benchmarks/WAYLAND.md. Usage: bash Benchmarks/wayland.sh   (needs hyperfine, GNU time, sway,
# wl-clipboard; installs what is missing). sway refuses root: it runs as nobody, with a runtime
# directory of its own; the clients (root) reach its socket by path. XPB_BENCH_BEFORE=BINARY: an
# earlier build of xpb also runs the small copy rows, in the same rounds (a change's before and after).
# XPB_BENCH_KEEP=DIRECTORY: the raw results (hyperfine's JSON of every round, the counts) are copied
# there at the end, as run.sh does.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
work=$(mktemp -d /tmp/xpb-bench-wl.XXXXXX)
# sway (as nobody) reads its configuration here and keeps its runtime directory below.
chmod 755 "$work"
# The small rows run in this many short rounds of five runs of each command (300 runs each; run.sh
# says why short rounds, and many).
runs=${XPB_BENCH_RUNS:-60}

need=()
for tool in hyperfine:hyperfine /usr/bin/time:time sway:sway wl-paste:wl-clipboard setpriv:util-linux; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || need+=("${tool##*:}")
done
if ((${#need[@]})); then
    echo "bench: installing ${need[*]}"
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

echo "bench: building the README's build (make: fully static executables)"
(cd "$root" && make build SCRATCH="$root/.build-bench" >/dev/null 2>&1)
strip -o "$work/xpb" "$root/.build-bench/release/xpb"
xpb="$work/xpb"
ln -s xpb "$work/xpbd"

sway_pid=
cleanup() {
    pkill -f "$xpb copy" 2>/dev/null || true
    pkill -x wl-copy 2>/dev/null || true
    kill $sway_pid 2>/dev/null || true
    if [ -n "${XPB_BENCH_KEEP:-}" ] && [ -d "$work/results" ]; then
        mkdir -p "$XPB_BENCH_KEEP" && cp -r "$work/results/." "$XPB_BENCH_KEEP/"
    fi
    rm -rf "$work"
}
trap cleanup EXIT
. "$root/Scripts/headless-sway.sh"
start_headless_sway "$work" || { echo "bench: sway did not start" >&2; exit 1; }
unset XPB_BACKEND
echo "bench: sway at $socket, work in $work"

printf 'hello, world\n' | head -c 13 > "$work/small"
head -c 104857600 /dev/urandom > "$work/100mb"
results="$work/results"
mkdir -p "$results"

. "$here/before.sh"
before_rows "$work" "$work/small"
# The rounds of the small rows take turns (rotated, before.sh), and run xpb under a second name
# too: how far apart the same binary comes out is the run's resolution, written beside the rows.
# Two owners: wl-copy forks and starts cat for every request (about a millisecond of each paste
# is its), xpb's background owner writes from memory (what the readers themselves cost shows).
# Each in short rounds of five, as the copies below: the machine drifts.
echo "bench: 1 paste 13 bytes (owner wl-copy, then owner xpb copy)"
short_runs=5
for owner in wlcopy xpb; do
    if [ "$owner" = wlcopy ]; then wl-copy -t text/plain < "$work/small"; else "$xpb" copy "$work/small"; fi
    for round in $(seq 1 "$runs"); do
        rotated "$round" -n "xpb paste" "$xpb paste" -n "xpb paste (again)" "$xpb paste" -n "wl-paste -n" "wl-paste -n" "${before_paste[@]}"
        hyperfine -N --warmup 2 --runs "$short_runs" --export-json "$results/paste13$owner.$round.json" --style basic "${rotation[@]}" >/dev/null
    done
done

# A small copy, and a copy followed at once by a paste (what a script does), each tool against
# itself, through sh as scripts run them (hyperfine subtracts the shell's start). wl-copy names its
# type: without -t it runs xdg-mime to guess one (about 50 ms).
echo "bench: 1b copy 13 bytes, and copy then paste"
# As in run.sh: a copy replaces the last owner, and the machine drifts; in three rounds of 40 in a
# row the same build under two names came out 0.84 × apart. Many short rounds, two untimed runs
# first in each.
for round in $(seq 1 "$runs"); do
    rotated "$round" -n "xpb copy" "$xpb copy $work/small" -n "xpb copy (again)" "$xpb copy $work/small" \
        -n "wl-copy -t text/plain" "wl-copy -t text/plain < $work/small" "${before_copy[@]}"
    hyperfine --warmup 2 --runs "$short_runs" --export-json "$results/copy13.$round.json" --style basic "${rotation[@]}" >/dev/null
    rotated "$round" -n "xpb copy, xpb paste" "$xpb copy $work/small && $xpb paste > /dev/null" \
        -n "wl-copy, wl-paste" "wl-copy -t text/plain < $work/small && wl-paste -n > /dev/null" "${before_pair[@]}"
    hyperfine --warmup 2 --runs "$short_runs" --export-json "$results/copypaste13.$round.json" --style basic "${rotation[@]}" >/dev/null
done
[ -z "${XPB_BENCH_BEFORE:-}" ] || pkill -f "$work/xpb-before copy" 2>/dev/null || true

# xpbd's start (exec to "listening on": the compositor bound, the clipboard read, the socket up)
# and its stop (SIGTERM to exit, the history written), 20 runs on one history.
echo "bench: 1c xpbd's start and stop"
XDG_STATE_HOME="$work/state" python3 "$here/startstop.py" 20 "listening on" "$work/xpbd" > "$results/startstop.json"

echo "bench: 2 paste 100 MB (owner wl-copy, then owner xpb), to /dev/null"
wl-copy -t application/octet-stream < "$work/100mb"
hyperfine --warmup 1 --runs 10 --export-json "$results/paste100_wlcopy.json" --style basic \
    -n "xpb paste" "$xpb paste -t application/octet-stream > /dev/null" \
    -n "wl-paste" "wl-paste -t application/octet-stream > /dev/null" >/dev/null
"$xpb" paste -t application/octet-stream | cmp -s - "$work/100mb" && echo "byte-exact" > "$results/check_wlcopy.txt" || echo "DIFFERENT" > "$results/check_wlcopy.txt"
"$xpb" copy -t application/octet-stream "$work/100mb"
hyperfine --warmup 1 --runs 10 --export-json "$results/paste100_xpb.json" --style basic \
    -n "xpb paste" "$xpb paste -t application/octet-stream > /dev/null" \
    -n "wl-paste" "wl-paste -t application/octet-stream > /dev/null" >/dev/null
wl-paste -t application/octet-stream | cmp -s - "$work/100mb" && echo "byte-exact" > "$results/check_xpb.txt" || echo "DIFFERENT" > "$results/check_xpb.txt"

echo "bench: 3 peak memory of a 100 MB paste"
wl-copy -t application/octet-stream < "$work/100mb"
/usr/bin/time -v -o "$results/rss_xpb.txt" "$xpb" paste -t application/octet-stream > /dev/null
/usr/bin/time -v -o "$results/rss_wlpaste.txt" wl-paste -t application/octet-stream > /dev/null

python3 - "$results" "$here/WAYLAND.md" "$(wl-paste --version 2>&1 | head -1)" "$(sway --version 2>&1 | head -1)" <<'PY'
import json, os, re, sys
results, out, wlv, swayv = sys.argv[1:5]
sys.path.insert(0, os.path.dirname(os.path.abspath(out)))
from interval import interval_words, verdict

def rounds(prefix):
    """Each command's runs, round by round (interval.py draws whole rounds again)."""
    times = {}
    for name in sorted(os.listdir(results)):
        if re.fullmatch(re.escape(prefix) + r"(\.\d+)?\.json", name):
            for r in json.load(open(os.path.join(results, name)))["results"]:
                times.setdefault(r["command"], []).append(r["times"])
    return times

def merged(blocks):
    """Each command's runs of `rounds`, sorted, in one list."""
    return {c: sorted(t for times in v for t in times) for c, v in blocks.items()}

def median(v):
    m = len(v) // 2
    return v[m] if len(v) % 2 else (v[m - 1] + v[m]) / 2

def ms(s):
    return f"{s * 1000:.2f} ms"

def rss(name):
    text = open(os.path.join(results, name)).read()
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) / 1024

rows = []
def beside(times, blocks, command, x, w, what):
    # The rows beside a measured one: xpb under a second name (the run's resolution), and the
    # earlier build (XPB_BENCH_BEFORE), where the rounds ran them.
    if f"{command} (again)" in times:
        again = median(times[f"{command} (again)"])
        rows.append((f"the same xpb {what} under a second name, in the same rounds (this run's resolution)", f"xpb again {ms(again)}",
                     f"{again / w:.2f} ×; {again / x:.2f} × the first ({interval_words(blocks[f'{command} (again)'], blocks[command])})", "", ""))
    if f"{command} (before)" in times:
        b = median(times[f"{command} (before)"])
        rows.append((f"the same {what}, the earlier build (XPB_BENCH_BEFORE), in the same rounds", f"xpb before {ms(b)}",
                     f"{b / w:.2f} ×; now {x / b:.2f} × before ({interval_words(blocks[command], blocks[f'{command} (before)'])})", "", ""))

# The issue's target for a small Wayland paste: at most 0.6 × wl-paste's time.
for prefix, owner in [("paste13wlcopy", "wl-copy: it starts cat for each request"), ("paste13xpb", "xpb copy")]:
    small_rounds = rounds(prefix)
    small = merged(small_rounds)
    x, w = median(small["xpb paste"]), median(small["wl-paste -n"])
    rows.append((f"paste 13 bytes, whole process (owner {owner})", f"xpb {ms(x)}; wl-paste -n {ms(w)} ({len(small['xpb paste'])} runs each)",
                 f"{x / w:.2f} × ({interval_words(small_rounds['xpb paste'], small_rounds['wl-paste -n'])})", "≤ 0.6 ×",
                 verdict(x / w, 0.6, small_rounds["xpb paste"], small_rounds["wl-paste -n"])))
    beside(small, small_rounds, "xpb paste", x, w, "paste")
for prefix, owner, check in [("paste100_wlcopy", "wl-copy", "check_wlcopy.txt"), ("paste100_xpb", "xpb copy", "check_xpb.txt")]:
    big = merged(rounds(prefix))
    x, w = median(big["xpb paste"]), median(big["wl-paste"])
    exact = open(os.path.join(results, check)).read().strip()
    rows.append((f"paste 100 MB to /dev/null (owner {owner})", f"xpb {ms(x)}; wl-paste {ms(w)}; {exact}",
                 f"{x / w:.2f} ×", "≤ 0.5 ×", verdict(x / w, 0.5)))
copy_rounds = rounds("copy13")
copy = merged(copy_rounds)
x, w = median(copy["xpb copy"]), median(copy["wl-copy -t text/plain"])
rows.append(("copy 13 bytes, whole process (it returns once the compositor has its source)",
             f"xpb {ms(x)}; wl-copy -t text/plain {ms(w)} ({len(copy['xpb copy'])} runs each)",
             f"{x / w:.2f} × ({interval_words(copy_rounds['xpb copy'], copy_rounds['wl-copy -t text/plain'])})", "≤ 1.0 ×",
             verdict(x / w, 1.0, copy_rounds["xpb copy"], copy_rounds["wl-copy -t text/plain"])))
beside(copy, copy_rounds, "xpb copy", x, w, "copy")
pair_rounds = rounds("copypaste13")
pair = merged(pair_rounds)
x, w = median(pair["xpb copy, xpb paste"]), median(pair["wl-copy, wl-paste"])
rows.append(("copy 13 bytes then paste them at once (a script's pair)", f"xpb {ms(x)}; wl-copy then wl-paste -n {ms(w)}",
             f"{x / w:.2f} × ({interval_words(pair_rounds['xpb copy, xpb paste'], pair_rounds['wl-copy, wl-paste'])})", "≤ 1.0 ×",
             verdict(x / w, 1.0, pair_rounds["xpb copy, xpb paste"], pair_rounds["wl-copy, wl-paste"])))
beside(pair, pair_rounds, "xpb copy, xpb paste", x, w, "pair")
timing = json.load(open(os.path.join(results, "startstop.json")))
ready, stop = timing["ready_ms"], timing["stop_ms"]
rows.append((f"xpbd ready: exec to listening, the compositor's clipboard read ({timing['runs']} runs)",
             f"median {ready['median']:.1f} ms, slowest {ready['max']:.1f} ms", "", "≤ 100 ms", "met" if ready["median"] <= 100 else "**not met**"))
rows.append(("xpbd's stop: SIGTERM to exit, history written", f"median {stop['median']:.1f} ms, slowest {stop['max']:.1f} ms",
             "", "≤ 200 ms", "met" if stop["max"] <= 200 else "**not met**"))
rows.append(("peak memory of a 100 MB paste", f"xpb {rss('rss_xpb.txt'):.1f} MiB; wl-paste {rss('rss_wlpaste.txt'):.1f} MiB", "", "", ""))

with open(out, "w") as f:
    f.write("# Wayland: xpb against wl-paste\n\n")
    f.write(f"Written by `bash Benchmarks/wayland.sh` on a headless sway ({swayv}), {wlv}; both readers ask the\n")
    f.write("same source (a forked wl-copy, or xpb's background owner) on the same compositor. Medians.\n\n")
    f.write("| measure | result | ratio | target | |\n|---|---|---|---|---|\n")
    for row in rows:
        f.write("| " + " | ".join(row) + " |\n")
PY
cat "$here/WAYLAND.md"
