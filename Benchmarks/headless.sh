#!/usr/bin/env bash
# A host without a display (xpbd --headless) linked to a desktop's xpbd over a loopback sshd of
# the script's own; writes Benchmarks/HEADLESS.md.
# Usage: bash Benchmarks/headless.sh   (needs hyperfine, Xvfb, xclip, openssh-server and
# openssh-client, Debian's python3; XPB_HEADLESS_RUNS sets the announce count, default 100)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
work=$(mktemp -d /tmp/xpb-headless-bench.XXXXXX)
out="$here/HEADLESS.md"
runs=${XPB_HEADLESS_RUNS:-100}
python3=/usr/bin/python3

echo "bench: building release binaries"
(cd "$root" && swift build -c release --scratch-path "$root/.build-bench" >/dev/null)
xpb="$root/.build-bench/release/xpb"
xpbd="$root/.build-bench/release/xpbd"

pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    pkill -f "$work" 2>/dev/null || true
    pkill -f "xpbd --headless" -U "$(id -u)" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# The desktop: a private Xvfb and its xpbd.
exec 9< <(Xvfb -displayfd 1 -screen 0 320x240x24 -nolisten tcp -noreset 2>/dev/null & echo "pid $!")
read -r _ xvfb_pid <&9
read -r number <&9
pids+=("$xvfb_pid")
A=":$number"
# The server: no display, a runtime directory and home of its own.
S_RUN="$work/server-run"; S_HOME="$work/server-home"
mkdir -p "$S_RUN" "$S_HOME" "$work/desktop-run"; chmod 700 "$S_RUN" "$work/desktop-run"
server() { env -u DISPLAY XDG_RUNTIME_DIR="$S_RUN" HOME="$S_HOME" "$@"; }

# The loopback sshd (Benchmarks/loopback-sshd.sh): reached as host bench-server with "$ssh".
. "$here/loopback-sshd.sh"
loopback_sshd bench-server

# The desktop's daemon links to the server; its ssh starts the headless daemon there.
DISPLAY="$A" XDG_RUNTIME_DIR="$work/desktop-run" "$xpbd" --state-dir "$work/state" --peer bench-server --ssh "$ssh" \
    --remote-xpb "env -u DISPLAY XDG_RUNTIME_DIR=$S_RUN HOME=$S_HOME $xpb" 2>"$work/desktop.log" &
pids+=("$!")
for _ in $(seq 400); do grep -q "connected to" "$work/desktop.log" && break; sleep 0.05; done
grep -q "connected to" "$work/desktop.log" || { echo "no link" >&2; cat "$work/desktop.log" >&2; exit 1; }
export XDG_RUNTIME_DIR="$work/desktop-run"

echo "bench: announce latency ($runs copies each way)"
"$python3" "$here/headless.py" "$runs" "$xpb" "$A" "$S_RUN" "$S_HOME" > "$work/announce.txt"
read -r _ up_p50 up_p99 up_max up_n < <(grep '^to-server' "$work/announce.txt")
read -r _ down_p50 down_p99 down_max down_n < <(grep '^to-desktop' "$work/announce.txt")

head -c 52428800 /dev/urandom > "$work/50mb.bin"
$ssh -M -S "$work/master" -o ControlPersist=no -fN bench-server
ceiling="$ssh -S $work/master bench-server cat $work/50mb.bin > /dev/null"

# 1. The server pastes the desktop's copy (the desktop's daemon keeps it and serves it over the link).
DISPLAY="$A" "$xpb" copy -t application/octet-stream "$work/50mb.bin"
for _ in $(seq 200); do server "$xpb" types --targets 2>/dev/null | grep -q application/octet-stream && break; sleep 0.05; done
server "$xpb" paste -t application/octet-stream | cmp - "$work/50mb.bin"
echo "bench: 50 MiB, desktop to server"
hyperfine -N --warmup 1 --runs 10 --export-json "$work/up.json" --style basic \
    "env -u DISPLAY XDG_RUNTIME_DIR=$S_RUN HOME=$S_HOME $xpb paste -t application/octet-stream -o /dev/null" \
    "sh -c '$ceiling'" >/dev/null

# 2. The desktop pastes the server's copy (held by the headless daemon, fetched over the link).
server "$xpb" copy -t application/octet-stream "$work/50mb.bin"
for _ in $(seq 200); do DISPLAY="$A" "$xpb" types --targets 2>/dev/null | grep -q application/octet-stream && break; sleep 0.05; done
DISPLAY="$A" xclip -o -selection clipboard -t application/octet-stream | cmp - "$work/50mb.bin"
echo "bench: 50 MiB, server to desktop"
hyperfine -N --warmup 1 --runs 10 --export-json "$work/down.json" --style basic \
    "sh -c 'DISPLAY=$A xclip -o -selection clipboard -t application/octet-stream > /dev/null'" \
    "sh -c 'DISPLAY=$A $xpb paste -t application/octet-stream > /dev/null'" \
    "sh -c '$ceiling'" >/dev/null
$ssh -S "$work/master" -O exit bench-server 2>/dev/null || true
server_pid=$(server "$xpb" daemon status --json | "$python3" -c "import json, sys; print(json.load(sys.stdin)['status']['pid'])")
server_peak=$(awk '/VmHWM/ { printf "%.1f", $2 / 1024 }' /proc/"$server_pid"/status)

read -r up_ms up_cat < <("$python3" -c "
import json, sys
print('%.0f %.0f' % tuple(r['median'] * 1000 for r in json.load(open(sys.argv[1]))['results']))" "$work/up.json")
read -r down_xclip down_xpb down_cat < <("$python3" -c "
import json, sys
print('%.0f %.0f %.0f' % tuple(r['median'] * 1000 for r in json.load(open(sys.argv[1]))['results']))" "$work/down.json")
ratio() { "$python3" -c "print('%.2f' % ($1 / $2))"; }
verdict() { "$python3" -c "print('met' if $1 else '**not met**')"; }
up_ratio=$(ratio "$up_ms" "$up_cat")
down_ratio=$(ratio "$down_xclip" "$down_cat")
xpb_ratio=$(ratio "$down_xpb" "$down_cat")
cat > "$out" <<REPORT
# A host without a display: benchmarks

Written by \`bash Benchmarks/headless.sh\` on $(date -u +%Y-%m-%d): a desktop (a private Xvfb and its
xpbd) linked with \`--peer\` to a "server" reached over a loopback sshd of the script's own, whose
\`xpb daemon link\` started \`xpbd --headless\` there (no \`DISPLAY\`, its own runtime directory and
home); release build, this machine ($(nproc) cores).

| measure | result | target | |
|---|---|---|---|
| 50 MiB \`xpb paste\` on the server of a desktop copy, median of 10 | ${up_ms} ms, against \`ssh host cat\` of the same bytes over an open master connection ${up_cat} ms: ${up_ratio} × | ≤ 1.3 × | $(verdict "$up_ratio <= 1.3") |
| 50 MiB paste on the desktop (\`xclip -o\`) of a server copy, median of 10 | ${down_xclip} ms (\`xpb paste\` ${down_xpb} ms, ${xpb_ratio} ×), against \`ssh host cat\` ${down_cat} ms: ${down_ratio} × | ≤ 1.3 × | $(verdict "$down_ratio <= 1.3") |
| announce latency, desktop copy (\`xclip -i\` started) to the server's \`xpb watch\` line ($up_n copies) | p50 ${up_p50} ms, p99 ${up_p99} ms, max ${up_max} ms | p99 < 20 ms | $(verdict "$up_p99 < 20") |
| announce latency, server \`xpb copy\` (started) to the desktop's \`xpb watch\` line ($down_n copies) | p50 ${down_p50} ms, p99 ${down_p99} ms, max ${down_max} ms | p99 < 20 ms | $(verdict "$down_p99 < 20") |
| the headless daemon's peak RSS over the run | ${server_peak} MiB (it holds the server's 50 MiB copy in memory) | | |

Both latencies include the start of the copying process (xclip's, about 2 ms; xpb's, about
3 ms) and the watcher's read of the change; the link is the same ssh as the pastes'. A desktop
copy is kept by the desktop's xpbd and served from its memory; a server copy is held by the
headless daemon and streamed over the link under the 4 MiB credit window as the desktop reads.
REPORT
cat "$out"
