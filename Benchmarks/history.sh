#!/usr/bin/env bash
# The history at scale: `xpb history` (the newest 1,000), `xpb history search WORD` and
# `xpb history menu` with 1,000, 10,000, 100,000 and 1,000,000 entries (XPB_HISTORY_SIZES, a list of
# counts, chooses others), timed by hyperfine against the
# README's static build. Each history is the database xpbd makes, filled in one transaction with
# copies shaped like a desktop's (a line to a page of words, every fifth with its HTML; the
# apps that copied them), then opened by xpbd, which describes and indexes what it did not write.
# Each size twice, in one run: the history plain (xpbd --plain-history) and sealed at rest (the
# default: the plain history is sealed at that first open); XPB_HISTORY_MODES="sealed" runs one.
# Replaces the "History at scale" section of Benchmarks/DAEMON.md.
# Usage: [XPB_HISTORY_SIZES="1000 100000"] bash Benchmarks/history.sh   (needs Xvfb, hyperfine, Debian's python3; installs what is missing)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
work=$(mktemp -d /tmp/xpb-history.XXXXXX)
runs=${XPB_BENCH_RUNS:-20}
sizes=${XPB_HISTORY_SIZES:-1000 10000 100000 1000000}
modes=${XPB_HISTORY_MODES:-plain sealed}

need=()
for tool in Xvfb:xvfb hyperfine:hyperfine /usr/bin/python3:python3 sqlite3:sqlite3 xclip:xclip; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || need+=("${tool##*:}")
done
if ((${#need[@]})); then
    echo "bench: installing ${need[*]}" >&2
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi

echo "bench: building the README's build (make)" >&2
(cd "$root" && make build >/dev/null 2>&1)
xpb="$root/.build-static/release/xpb"
xpbd="$root/.build-static/release/xpbd"

exec 9< <(Xvfb -displayfd 1 -nolisten tcp -noreset 2>/dev/null & echo "pid $!")
read -r _ xvfb_pid <&9
read -r number <&9
export DISPLAY=":$number"
# From a Wayland session too: xpb and the library go to this X display, not the compositor.
unset WAYLAND_DISPLAY XPB_BACKEND
daemon=""
trap 'kill $xvfb_pid $daemon 2>/dev/null || true; rm -rf "$work"' EXIT

cat > "$work/fill.py" <<'EOF'
import hashlib, random, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
count = int(sys.argv[2])
rng = random.Random(7)
words = ("alpha beta gamma delta clipboard window kernel paste copy shell script rust swift python table "
         "cell image link note todo meeting invoice").split()
apps = ["firefox", "chromium", "xterm", "nvim", "tmux", "mousepad", "soffice.bin"]
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=OFF")
first = (db.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()[0]) + 1
for start in range(0, count, 10000):
    entries, targets = [], []
    for n in range(start, min(count, start + 10000)):
        text = " ".join(rng.choice(words) for _ in range(rng.choice([3, 8, 20, 60, 200]))) + " #%d" % n
        if n % 1000 == 7:
            text += " needle"
        data = text.encode()
        html = n % 5 == 0
        entry = first + n
        entries.append((entry, 1e9 + n, 1e9 + n, 1000 + n, len(data), text[:100], text,
                        "TARGETS\ntext/html\nUTF8_STRING" if html else "TARGETS\nUTF8_STRING", rng.choice(apps)))
        position = 0
        if html:
            markup = ("<p>%s</p>" % text).encode()
            targets.append((entry, position, "text/html", "text/html", hashlib.sha256(markup).hexdigest(), len(markup), markup))
            position += 1
        targets.append((entry, position, "UTF8_STRING", "UTF8_STRING", hashlib.sha256(data).hexdigest(), len(data), data))
    with db:
        db.executemany(
            "INSERT INTO entries(id, selection, display, created, used, source, pid, size, preview, text, advertised, app) "
            "VALUES (?, 'general', ':0', ?, ?, NULL, ?, ?, ?, ?, ?, ?)", entries)
        db.executemany("INSERT INTO targets(entry, position, name, type, digest, size, data) VALUES (?, ?, ?, ?, ?, ?, ?)", targets)
EOF

median_ms() { python3 -c "import json, sys; print('%.1f' % (1000 * json.load(open(sys.argv[1]))['results'][0]['median']))" "$1"; }

cat > "$work/during.py" <<'EOF'
# Pastes (xclip -o of the copy xpbd serves) and listings (xpb history --count 1), one after the
# other, until xpbd's log has MARKER COUNT times: the median and the slowest of each.
import statistics, subprocess, sys, time
log, xpb, marker, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
pastes, listings = [], []
deadline = time.time() + 3600
while open(log, errors="replace").read().count(marker) < count and time.time() < deadline:
    began = time.perf_counter()
    subprocess.run(["xclip", "-o", "-selection", "clipboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pastes.append(time.perf_counter() - began)
    began = time.perf_counter()
    subprocess.run([xpb, "history", "--count", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    listings.append(time.perf_counter() - began)
def said(times):
    return "%.1f ms, slowest %.1f ms (%d)" % (1000 * statistics.median(times), 1000 * max(times), len(times)) if times else "none ran"
print("paste %s; `xpb history --count 1` %s" % (said(pastes), said(listings)))
EOF

now_ms() { date +%s%3N; }
# Starts xpbd on the history (caps from xpbd.conf; $1 its log, then its options) and waits for
# it to answer: $took is the milliseconds that took.
start_daemon() {
    local began; began=$(now_ms)
    "$xpbd" "${@:2}" > "$1" 2>&1 &
    daemon=$!
    for _ in $(seq 3000); do "$xpb" daemon status > /dev/null 2>&1 && break; sleep 0.02; done
    took=$(($(now_ms) - began))
}
stop_daemon() { kill "$daemon" && wait "$daemon" 2>/dev/null || true; daemon=""; }
# Waits until xpbd is idle (its CPU time still for half a second): the check of the whole file
# that follows each open, in the background, is over (at a million entries, about 30 s).
settle() {
    local last=-1 now
    for _ in $(seq 600); do
        now=$(awk '{print $14 + $15}' "/proc/$daemon/stat")
        [ "$now" = "$last" ] && return
        last=$now; sleep 0.5
    done
}
rss_mib() { awk -v key="$2:" '$1 == key { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }
caps() { mkdir -p "$XDG_CONFIG_HOME/xpb" && echo "--max-entries $1 --max-size 64G" > "$XDG_CONFIG_HOME/xpb/xpbd.conf"; }
# A copy xpbd keeps and serves itself: xclip's, its owner gone ($1: xpbd's log).
serve_copy() {
    echo "a copy xpbd serves" | xclip -i -selection clipboard -quiet > /dev/null 2>&1 &
    local owner=$!
    for _ in $(seq 500); do grep -q "kept CLIPBOARD" "$1" && break; sleep 0.02; done
    kill "$owner"; wait "$owner" 2>/dev/null || true
    for _ in $(seq 500); do grep -q "went away; serving" "$1" && break; sleep 0.02; done
}
upkeep_ms() { sed -n 's/.*history upkeep: .* in \([0-9]*\) ms, in turns.*/\1/p' "$1" | tail -1; }

rows=()
pruned=()
disk=()
for count in $sizes; do
for mode in $modes; do
    flags=(); [ "$mode" = plain ] && flags=(--plain-history)
    home="$work/home-$count-$mode"
    export XDG_STATE_HOME="$home/state" XDG_RUNTIME_DIR="$home/runtime" XDG_CACHE_HOME="$home/cache" XDG_CONFIG_HOME="$home/config"
    mkdir -p "$XDG_STATE_HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
    caps 2000000
    # The database as xpbd makes it (plain: the filling writes it), then filled.
    start_daemon "$home/first.log" --plain-history
    stop_daemon
    database="$XDG_STATE_HOME/xpb/history.sqlite"
    echo "bench: filling $count entries ($mode)" >&2
    /usr/bin/python3 "$work/fill.py" "$database" "$count"
    # The first open (sealed: the plain history sealed first): xpbd answers, then describes and
    # indexes what it did not write, in turns, while it serves a paste and lists.
    start_daemon "$home/upkeep.log" "${flags[@]}"; first=$took
    sealing=$(sed -n 's/.*its plain pages were overwritten (\([0-9]*\) ms).*/\1/p' "$home/upkeep.log")
    [ "$mode" = plain ] || [ -n "$sealing" ] || { echo "bench: the history was not sealed: $(cat "$home/upkeep.log")" >&2; exit 1; }
    serve_copy "$home/upkeep.log"
    during=$(python3 "$work/during.py" "$home/upkeep.log" "$xpb" "history upkeep:" 1)
    stop_daemon
    # A restart, as at every login.
    start_daemon "$home/xpbd.log" "${flags[@]}"; opened=$took
    settle
    hyperfine -N -w 3 -r "$runs" --export-json "$home/list.json" "$xpb history" > /dev/null 2>&1
    hyperfine -N -w 3 -r "$runs" -i --export-json "$home/few.json" "$xpb history search needle" > /dev/null 2>&1
    hyperfine -N -w 3 -r "$runs" --export-json "$home/many.json" "$xpb history search gamma" > /dev/null 2>&1
    hyperfine -N -w 3 -r "$runs" -i --export-json "$home/none.json" "$xpb history search 'no such words'" > /dev/null 2>&1
    hyperfine -N -w 3 -r "$runs" --export-json "$home/menu.json" "$xpb history menu --menu 'head -n 1'" > /dev/null 2>&1
    matched=$("$xpb" history search gamma --all --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
    rss=$(rss_mib "$daemon" VmRSS); peak=$(rss_mib "$daemon" VmHWM)
    rows+=("| $count | $mode | $(median_ms "$home/list.json") ms | $(median_ms "$home/few.json") ms | $(median_ms "$home/many.json") ms (${matched:-?} found) | $(median_ms "$home/none.json") ms | $(median_ms "$home/menu.json") ms | $opened ms | $rss MiB (peak $peak) | $first ms${sealing:+ (sealing $sealing ms)}; upkeep $(upkeep_ms "$home/upkeep.log") ms; $during |")
    # A tenth pruned at once: the caps lowered on SIGHUP, met in turns while pastes and listings go on.
    if [ "$count" -ge 100000 ]; then
        serve_copy "$home/xpbd.log"
        caps $((count * 9 / 10))
        kill -HUP "$daemon"
        during=$(python3 "$work/during.py" "$home/xpbd.log" "$xpb" "history upkeep:" 1)
        pruned+=("| $count | $mode | $((count / 10)) | $(upkeep_ms "$home/xpbd.log") ms | $during |")
    fi
    stop_daemon
    bytes=$(du -sb "$XDG_STATE_HOME/xpb" | cut -f1)
    if [ "$mode" = plain ]; then
        index=$(sqlite3 "$database" "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name LIKE 'entries_search%'" 2>/dev/null || echo 0)
        index="$((index / 1048576)) MiB ($((index / count)) B an entry)"
    else
        index="(sealed: not readable)"
    fi
    disk+=("| $count | $mode | $((bytes / 1048576)) MiB | $((bytes / count)) B | $index |")
    echo "bench: $count entries measured ($mode)" >&2
    rm -rf "$home"
done
done

section=$(
    echo "## History at scale"
    echo
    echo "Written by \`bash Benchmarks/history.sh\` on $(date -u +%F), the README's static build, $(nproc) cores; medians of $runs runs (hyperfine)."
    echo "Each history: xpbd's own database filled with copies shaped like a desktop's (a line to a page of words, every fifth with"
    echo "its HTML, seven apps), as another writer leaves it (no description, not in the search index). \`search needle\` finds one"
    echo "entry in 1,000; \`search gamma\` about six in ten (the newest 1,000 shown); \`menu\` lists the newest 1,000 through \`head -n 1\`"
    echo "and selects the first. The index is SQLite's FTS5 (trigram) over each text's first 4,096 characters, its preview, app and types."
    echo "The first open answers at once; the upkeep (describing, indexing) follows in turns of about 25 ms, while a paste of the"
    echo "copy xpbd serves (\`xclip -o\`) and a listing run one after the other until it ends. A restart is what every login costs;"
    echo "the timings follow it once xpbd is idle (the check of the whole file after each open, in the background, is over)."
    echo "Each size twice: the history plain (\`xpbd --plain-history\`) and sealed at rest (the default; sealing the plain history is part"
    echo "of its first open: \`VACUUM INTO\` through the sealing VFS, then the plain file overwritten)."
    echo
    echo "| entries | history | \`xpb history\` (newest 1000) | \`search needle\` | \`search gamma\` | search, no match (exit 1) | \`history menu\` | restart to the first answer | xpbd's RSS | first open to the first answer; upkeep; meanwhile |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "A tenth of the history pruned at once (the caps lowered, SIGHUP), in turns, while a paste and a listing run one after the other:"
    echo
    echo "| entries | history | pruned | prune | meanwhile |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${pruned[@]}"
    echo
    echo "The state directory (database, log, payload files) and the search index's share of it:"
    echo
    echo "| entries | history | state directory | an entry | search index |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${disk[@]}"
    echo
    echo "Targets at a million (issue 60): \`xpb history\` ≤ 20 ms, a search ≤ 100 ms, \`history menu\` ≤ 50 ms, RSS ≤ 48 MiB, the open ≤ 2 s or never blocking a copy or a paste."
)
python3 - "$here/DAEMON.md" "$section" <<'EOF'
import sys
path, section = sys.argv[1], sys.argv[2]
text = open(path).read()
start = text.find("## History at scale")
if start >= 0:
    end = text.find("\n## ", start + 1)
    text = text[:start] + text[end + 1:] if end >= 0 else text[:start]
open(path, "w").write(text.rstrip("\n") + "\n\n" + section + "\n")
EOF
echo "bench: wrote the history section of Benchmarks/DAEMON.md" >&2
