#!/usr/bin/env bash
# xpbd as the desktop's clipboard service (issue 46), measured on a private Xvfb and a private
# session bus; writes Benchmarks/DESKTOP.md.
# Usage: bash Benchmarks/desktop.sh   (needs hyperfine, Xvfb, xclip, dbus-daemon, gdbus, qdbus,
# Debian's python3 and sqlite3; the history filler is history.sh's)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
work=$(mktemp -d /tmp/xpb-desktop.XXXXXX)
runs=${XPB_BENCH_RUNS:-30}
out="$here/DESKTOP.md"

echo "bench: building the README's build (make)" >&2
(cd "$root" && make build >/dev/null 2>&1)
strip -o "$work/xpb" "$root/.build-static/release/xpb"
ln -s xpb "$work/xpbd"
xpb="$work/xpb"
xpbd="$work/xpbd"
# The history filler of history.sh, taken from it (one copy of it in the tree).
sed -n "/^cat > \"\$work\/fill.py\" <<'EOF'$/,/^EOF$/p" "$here/history.sh" | sed '1d;$d' > "$work/fill.py"

exec 9< <(Xvfb -displayfd 1 -nolisten tcp -noreset 2>/dev/null & echo "pid $!")
read -r _ xvfb_pid <&9
read -r number <&9
exec 8< <(dbus-daemon --session --nofork --nopidfile --print-address=1 2>/dev/null & echo "pid $!")
read -r _ bus_pid <&8
read -r address <&8
export DISPLAY=":$number" DBUS_SESSION_BUS_ADDRESS="$address"
# From a Wayland session too: xpb and the library go to this X display, not the compositor.
unset WAYLAND_DISPLAY XPB_BACKEND
daemon=""
trap 'kill $daemon $xvfb_pid $bus_pid 2>/dev/null || true; pkill -f "$xpb copy" 2>/dev/null || true; rm -rf "$work"' EXIT

median_ms() { /usr/bin/python3 -c "import json, sys; print('%.2f' % (1000 * json.load(open(sys.argv[1]))['results'][0]['median']))" "$1"; }
start_daemon() { # home, options…
    local home=$1; shift
    export XDG_STATE_HOME="$home/state" XDG_RUNTIME_DIR="$home/runtime" XDG_CACHE_HOME="$home/cache" XDG_CONFIG_HOME="$home/config"
    mkdir -p "$XDG_STATE_HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
    "$xpbd" "$@" > "$home/xpbd.log" 2>&1 &
    daemon=$!
    for _ in $(seq 600); do grep -q "answers org.kde.klipper.klipper" "$home/xpbd.log" 2>/dev/null && return; sleep 0.05; done
    echo "xpbd did not start" >&2; cat "$home/xpbd.log" >&2; exit 1
}
stop_daemon() { kill "$daemon" && wait "$daemon" 2>/dev/null || true; daemon=""; }
count_lines() { grep -c "$2" "$1" || true; }

# 1. A paste from a copy xpbd keeps, against one from the paste queue (every request takes its turn).
home="$work/paste"
start_daemon "$home"
printf 'thirteen byte' | xclip -selection clipboard
for _ in $(seq 100); do grep -q "kept CLIPBOARD" "$home/xpbd.log" && break; sleep 0.05; done
pkill -x xclip; for _ in $(seq 100); do grep -q "serving its" "$home/xpbd.log" && break; sleep 0.05; done
hyperfine -N -w 5 -r "$runs" --export-json "$work/kept.json" "xclip -o -selection clipboard" > /dev/null 2>&1
printf 'thirteen byte' | "$xpb" queue add - ; printf 'thirteen byte' | "$xpb" queue add -
# Two runs of hyperfine's warm-up take the two items; the rest read the last, which the queue keeps.
hyperfine -N -w 5 -r "$runs" --export-json "$work/queued.json" "xclip -o -selection clipboard" > /dev/null 2>&1
hyperfine -N -w 3 -r "$runs" --export-json "$work/copy.json" -p "$xpb clear" "sh -c 'printf x | $xpb copy'" > /dev/null 2>&1
hyperfine -N -w 3 -r "$runs" --export-json "$work/queue.json" "sh -c 'printf x | $xpb copy --queue'" > /dev/null 2>&1
left=$("$xpb" queue --json | /usr/bin/python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
"$xpb" queue clear > /dev/null
stop_daemon

# 2. D-Bus at 200 entries (xpbd's default cap): Klipper's menu, and xpbd's own listing and contents.
home="$work/bus"
start_daemon "$home"
stop_daemon
/usr/bin/python3 "$work/fill.py" "$XDG_STATE_HOME/xpb/history.sqlite" 200
start_daemon "$home"
entries=$("$xpb" history --json | /usr/bin/python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
object=(--session --dest org.xpb.Pasteboard1 --object-path /org/xpb/Pasteboard1)
hyperfine -N -w 3 -r "$runs" --export-json "$work/menu.json" "qdbus org.kde.klipper /klipper org.kde.klipper.klipper.getClipboardHistoryMenu" > /dev/null 2>&1
hyperfine -N -w 3 -r "$runs" --export-json "$work/klipper.json" "qdbus org.kde.klipper /klipper org.kde.klipper.klipper.getClipboardContents" > /dev/null 2>&1
hyperfine -N -w 3 -r "$runs" --export-json "$work/list.json" "gdbus call ${object[*]} --method org.xpb.Pasteboard1.ListHistory 0 200" > /dev/null 2>&1
hyperfine -N -w 3 -r "$runs" --export-json "$work/contents.json" "gdbus call ${object[*]} --method org.xpb.Pasteboard1.GetContents CLIPBOARD" > /dev/null 2>&1
hyperfine -N -w 3 -r "$runs" --export-json "$work/history.json" "$xpb history" > /dev/null 2>&1
hyperfine -N -w 3 -r "$runs" --export-json "$work/ping.json" "gdbus call ${object[*]} --method org.freedesktop.DBus.Peer.Ping" > /dev/null 2>&1
stop_daemon

# 3. Forgetting a secret taken back, at 200 and 10,000 entries (xpbd logs the time it took).
mkdir -p "$work/bin"; cp "$(command -v xclip)" "$work/bin/buttercup"
forget_rows=()
for count in 200 10000; do
    home="$work/forget-$count"
    start_daemon "$home" --max-entries 200000
    stop_daemon
    /usr/bin/python3 "$work/fill.py" "$XDG_STATE_HOME/xpb/history.sqlite" "$count"
    start_daemon "$home" --max-entries 200000
    times=()
    for round in 1 2 3 4 5; do
        printf 'secret %s %s' "$count" "$round" | "$work/bin/buttercup" -selection clipboard
        for _ in $(seq 200); do [ "$(count_lines "$home/xpbd.log" "kept CLIPBOARD")" -ge "$round" ] && break; sleep 0.05; done
        sleep 0.3
        printf '' | "$work/bin/buttercup" -selection clipboard
        for _ in $(seq 200); do [ "$(count_lines "$home/xpbd.log" "was a secret, forgotten")" -ge "$round" ] && break; sleep 0.05; done
        times+=("$(grep "was a secret, forgotten" "$home/xpbd.log" | tail -1 | sed -n 's/.* in \([0-9]*\) ms.*/\1/p')")
    done
    stop_daemon
    database="$XDG_STATE_HOME/xpb/history.sqlite"
    left_bytes=$(grep -r -a -l -F "secret $count" "$XDG_STATE_HOME" "$XDG_CACHE_HOME" 2>/dev/null | wc -l || true)
    median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)
    forget_rows+=("| $count | $median ms (of ${times[*]}) | $((($(stat -c %s "$database")) / 1048576)) MiB | $left_bytes |")
done

{
    echo "# xpbd on the desktop"
    echo
    echo "Written by \`bash Benchmarks/desktop.sh\` on $(date -u +%F), the README's static build (stripped), $(nproc) cores;"
    echo "medians of $runs runs (hyperfine, \`-N\`: no shell), a private Xvfb and session bus."
    echo
    echo "## Pasting from the queue"
    echo
    echo "| measure | median |"
    echo "|---|---|"
    echo "| \`xclip -o\`, 13 B that xpbd keeps (its owner gone) | $(median_ms "$work/kept.json") ms |"
    echo "| \`xclip -o\`, 13 B from the paste queue (each request takes its turn) | $(median_ms "$work/queued.json") ms |"
    echo "| \`xpb copy\` of 1 byte (a background owner starts) | $(median_ms "$work/copy.json") ms |"
    echo "| \`xpb copy --queue\` of 1 byte (handed to xpbd) | $(median_ms "$work/queue.json") ms ($left items queued by the runs) |"
    echo
    echo "## D-Bus, $entries history entries"
    echo
    echo "Each row is a whole client process (its start is most of it): \`qdbus\` for Klipper's interface, \`gdbus\` for xpbd's own."
    echo
    echo "| call | median |"
    echo "|---|---|"
    echo "| \`gdbus call … Peer.Ping\` (the client's own cost) | $(median_ms "$work/ping.json") ms |"
    echo "| \`qdbus … getClipboardContents\` | $(median_ms "$work/klipper.json") ms |"
    echo "| \`qdbus … getClipboardHistoryMenu\` | $(median_ms "$work/menu.json") ms |"
    echo "| \`gdbus call … GetContents CLIPBOARD\` | $(median_ms "$work/contents.json") ms |"
    echo "| \`gdbus call … ListHistory 0 200\` | $(median_ms "$work/list.json") ms |"
    echo "| \`xpb history\` (the control socket, for comparison) | $(median_ms "$work/history.json") ms |"
    echo
    echo "## Forgetting a secret taken back"
    echo
    echo "An xclip named \`buttercup\` copies a secret, then an empty copy; xpbd logs how long forgetting took (the entry's secure"
    echo "delete, the search index merged, the log cut). Five rounds on a history filled as history.sh fills it."
    echo
    echo "| entries | forgetting (median) | database | files under the state and cache directories holding a secret after |"
    echo "|---|---|---|---|"
    printf '%s\n' "${forget_rows[@]}"
} > "$out"
echo "bench: wrote $out" >&2
