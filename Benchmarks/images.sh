#!/usr/bin/env bash
# Image conversion as an owner serves it: a 3840×2160 screenshot PNG copied with xpb, read as BMP
# and as JPEG by xclip, the first request (converted) and the second (kept for the ownership),
# with the owner's peak memory; against ImageMagick's convert of the same file in the same run.
# Also the bytes xpbd keeps for a Qt image copy, keeping one image (now) against every encoding
# Qt offers (before); and that kept image asked of xpbd as JPEG (made on the first request) against
# ImageMagick. Writes Benchmarks/IMAGES.md.
# Usage: bash Benchmarks/images.sh   (needs Xvfb, xclip, GNU time, ImageMagick, Debian's python3
# with python3-gi and python3-pyqt5; installs what is missing)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
work=$(mktemp -d /tmp/xpb-images.XXXXXX)
runs=${XPB_BENCH_RUNS:-5}

need=()
for tool in /usr/bin/time:time Xvfb:xvfb xclip:xclip import:imagemagick /usr/bin/convert:imagemagick; do
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

# A private 4K display, never the user's, with a GTK window of text on it: the screenshot.
exec 9< <(Xvfb -displayfd 1 -screen 0 3840x2160x24 -nolisten tcp -noreset 2>/dev/null & echo "pid $!")
read -r _ xvfb_pid <&9
read -r number <&9
export DISPLAY=":$number"
# From a Wayland session too: xpb and the library go to this X display, not the compositor.
unset WAYLAND_DISPLAY XPB_BACKEND
# The daemon started below, by its pid; a cleanup that finds nothing to stop is no failure.
xpbd_pid=""
trap 'kill $xvfb_pid $xpbd_pid 2>/dev/null || true; rm -rf "$work"' EXIT
/usr/bin/python3 - "$root/docs/xpb.md" "$root/docs/xpbd.md" "$root/docs/library.md" > /dev/null 2>&1 <<'EOF' &
import sys, gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gtk, GLib
window = Gtk.Window(default_width=3840, default_height=2160)
view = Gtk.TextView()
view.get_buffer().set_text("".join(open(path).read() for path in sys.argv[1:]) * 2)
window.add(view)
window.show_all()
GLib.timeout_add(30000, Gtk.main_quit)
Gtk.main()
EOF
gtk_pid=$!
sleep 2
import -window root "$work/shot.png"
kill $gtk_pid 2>/dev/null || true
size=$(stat -c %s "$work/shot.png")
echo "bench: screenshot $(identify -format '%wx%h' "$work/shot.png"), $size bytes" >&2

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ms() { python3 -c 'import sys, time; print(round(float(sys.argv[1]) * 1000))' "$1"; }

row() {
    local format=$1 target=$2 extension=$3
    local first=() second=() peak=() magick_time=() magick_peak=()
    for _ in $(seq "$runs"); do
        "$xpb" copy "$work/shot.png"
        owner=$("$xpb" info --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["ownerPID"])')
        start=$(date +%s.%N); xclip -o -selection clipboard -t "$target" > "$work/out.$extension"; end=$(date +%s.%N)
        first+=("$(python3 -c "print(round(($end - $start) * 1000))")")
        start=$(date +%s.%N); xclip -o -selection clipboard -t "$target" > /dev/null; end=$(date +%s.%N)
        second+=("$(python3 -c "print(round(($end - $start) * 1000))")")
        peak+=("$(awk '/VmHWM/ { print int($2 / 1024) }' "/proc/$owner/status")")
        /usr/bin/time -f "%e %M" -o "$work/time" /usr/bin/convert "$work/shot.png" -quality 90 "$work/magick.$extension"
        read -r seconds kilobytes < "$work/time"
        magick_time+=("$(ms "$seconds")")
        magick_peak+=("$((kilobytes / 1024))")
    done
    printf '| PNG → %s | %s ms | %s ms | %s MiB | %s ms | %s MiB | %s | %s |\n' "$format" \
        "$(printf '%s\n' "${first[@]}" | median)" "$(printf '%s\n' "${second[@]}" | median)" \
        "$(printf '%s\n' "${peak[@]}" | median)" "$(printf '%s\n' "${magick_time[@]}" | median)" \
        "$(printf '%s\n' "${magick_peak[@]}" | median)" \
        "$(stat -c %s "$work/out.$extension")" "$(stat -c %s "$work/magick.$extension")"
}

exec > "$here/IMAGES.md"
echo "# Image conversion"
echo
echo "Written by \`bash Benchmarks/images.sh\`; every row measured in the same run on one private 3840×2160 Xvfb."
echo
echo "- machine: $(uname -m), $(nproc) cores; $(uname -r)"
echo "- $(/usr/bin/convert -version | head -1)"
echo "- the screenshot: \`import -window root\` of a GTK window of text filling the display (PNG, $size bytes)"
echo
echo "Medians of $runs runs. A request's time is the whole \`xclip -o\` to a file, so the BMP rows carry a 25 MB"
echo "transfer; the second request is that transfer alone (the conversion is kept for the ownership). The owner's"
echo "peak RSS is its VmHWM after the two requests. ImageMagick's BMP is smaller because it writes a palette for an"
echo "image of few colours; xpb writes 24-bit BMP, as Qt and GTK do."
echo
echo "| conversion (3840×2160 PNG, $size B) | xpb owner, 1st request | 2nd request | owner's peak RSS | ImageMagick convert | its peak RSS | xpb's bytes | ImageMagick's bytes |"
echo "|---|---|---|---|---|---|---|---|"
row BMP image/bmp bmp
row JPEG image/jpeg jpg

# What xpbd keeps of a Qt image copy: one image now; every encoding Qt offered before.
export XDG_STATE_HOME="$work/state" XDG_RUNTIME_DIR="$work/runtime" XDG_CACHE_HOME="$work/cache"
mkdir -p "$XDG_STATE_HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
"$xpbd" > "$work/xpbd.log" 2>&1 &
xpbd_pid=$!
for _ in $(seq 100); do "$xpb" daemon status > /dev/null 2>&1 && break; sleep 0.1; done
QT_QPA_PLATFORM=xcb /usr/bin/python3 "$root/Tests/Peers/qt_clipboard.py" set-image-and-exit "$work/shot.png" "$work/qt-exit" > "$work/qt.log" 2>&1 &
for _ in $(seq 300); do grep -q ready "$work/qt.log" 2>/dev/null && break; sleep 0.1; done
# Identical encodings under two names (Qt's image/jpeg and image/jpg) counted once, as xpbd keeps them.
offered=$(for target in $(xclip -o -selection clipboard -t TARGETS | grep '^image/'); do
    xclip -o -selection clipboard -t "$target" | python3 -c 'import hashlib, sys; data = sys.stdin.buffer.read(); print(hashlib.sha256(data).hexdigest(), len(data))'
done | sort -u | awk '{ total += $2 } END { print total }')
touch "$work/qt-exit"
for _ in $(seq 300); do grep -q "saved CLIPBOARD" "$work/xpbd.log" && break; sleep 0.1; done
kept=$("$xpb" history --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["keptBytes"])')
echo
echo "| a Qt image copy (QClipboard.setImage of the screenshot), kept by xpbd | bytes |"
echo "|---|---|"
echo "| every image target Qt offers (what a manager that keeps each target stores) | $offered |"
echo "| what xpbd keeps (the PNG once; the formats xpb does not write, Qt's icons and X bitmap, as they came) | $kept |"

# The kept image asked of the manager as JPEG (Qt offered JPEG; a browser's image copy offers PNG
# alone, and xpbd offers the same formats for both): made from the kept PNG on the first request,
# kept for that ownership. Each run selects the entry again, so each first request converts.
daemon_pid=$("$xpb" daemon status --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["status"]["pid"])')
rss() { awk '/VmRSS/ { print int($2 / 1024) }' "/proc/$daemon_pid/status"; }
"$xpb" history select 0 > /dev/null
idle=$(rss)
offers=$(xclip -o -selection clipboard -t TARGETS | grep -c '^image/')
first=(); second=(); grown=(); magick=()
for _ in $(seq "$runs"); do
    "$xpb" history select 0 > /dev/null
    before=$(rss)
    start=$(date +%s.%N); xclip -o -selection clipboard -t image/jpeg > "$work/kept.jpg"; end=$(date +%s.%N)
    first+=("$(python3 -c "print(round(($end - $start) * 1000))")")
    start=$(date +%s.%N); xclip -o -selection clipboard -t image/jpeg > /dev/null; end=$(date +%s.%N)
    second+=("$(python3 -c "print(round(($end - $start) * 1000))")")
    grown+=("$(( $(rss) - before ))")
    /usr/bin/time -f "%e %M" -o "$work/time" /usr/bin/convert "$work/shot.png" -quality 90 "$work/magick.jpg"
    read -r seconds _ < "$work/time"
    magick+=("$(ms "$seconds")")
done
echo
echo "| the kept screenshot asked of xpbd as JPEG (\`xclip -o -t image/jpeg\`) | result |"
echo "|---|---|"
echo "| image formats xpbd offers for it, none made yet | $offers (xpbd's RSS $idle MiB) |"
echo "| 1st request (converted from the kept PNG) | $(printf '%s\n' "${first[@]}" | median) ms |"
echo "| 2nd request (kept for the ownership) | $(printf '%s\n' "${second[@]}" | median) ms |"
echo "| xpbd's RSS after the two, more than before | $(printf '%s\n' "${grown[@]}" | median) MiB |"
echo "| ImageMagick \`convert shot.png -quality 90 shot.jpg\` | $(printf '%s\n' "${magick[@]}" | median) ms |"
echo "| bytes: xpbd's JPEG, ImageMagick's | $(stat -c %s "$work/kept.jpg"), $(stat -c %s "$work/magick.jpg") |"
echo "bench: wrote Benchmarks/IMAGES.md" >&2
