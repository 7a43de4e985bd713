# Sourced by Benchmarks/wayland.sh and Scripts/gen-link-order: a private headless sway for one
# run (the tests start theirs from Swift: X11TestSupport's Compositor). sway refuses root: it runs
# as nobody, with a runtime directory of its own under WORK, and clients (root) reach its socket
# by path. Usage: start_headless_sway WORK; sets sway_pid and socket, exports WAYLAND_DISPLAY and
# XDG_RUNTIME_DIR and unsets DISPLAY. Returns 1, with sway's log on stderr, when it did not start.
start_headless_sway() {
    local work=$1 runtime=$1/runtime
    chmod 755 "$work"
    mkdir -m 700 "$runtime"
    chown 65534:65534 "$runtime"
    printf 'xwayland disable\n' > "$work/sway.conf"
    chmod 644 "$work/sway.conf"
    setpriv --reuid=65534 --regid=65534 --clear-groups env -i XDG_RUNTIME_DIR="$runtime" HOME="$runtime" \
        WLR_BACKENDS=headless WLR_LIBINPUT_NO_DEVICES=1 WLR_RENDERER=pixman sway -c "$work/sway.conf" \
        > "$work/sway.log" 2>&1 < /dev/null &
    sway_pid=$!
    socket=
    # Ready once its socket takes a connection: the file is there from its bind, a moment before
    # its listen.
    for _ in $(seq 1 200); do
        socket=$(find "$runtime" -maxdepth 1 -name 'wayland-*' ! -name '*.lock' | head -1)
        [ -n "$socket" ] && python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$socket" 2>/dev/null && break
        socket=
        sleep 0.05
    done
    [ -n "$socket" ] || { cat "$work/sway.log" >&2; return 1; }
    export WAYLAND_DISPLAY="$socket" XDG_RUNTIME_DIR="$runtime"
    unset DISPLAY
}
