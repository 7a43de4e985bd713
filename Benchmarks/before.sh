# Sourced by run.sh and wayland.sh: with XPB_BENCH_BEFORE=BINARY (an earlier build of xpb), the
# hyperfine arguments that run it in the small copy rows' rounds, named "(before)": before_copy
# and before_pair (empty without it). Usage: before_rows WORK SMALL
before_rows() {
    local work=$1 small=$2 before
    before_copy=() before_pair=()
    [ -n "${XPB_BENCH_BEFORE:-}" ] || return 0
    cp "$XPB_BENCH_BEFORE" "$work/xpb-before"
    before="$work/xpb-before"
    before_copy=(-n "xpb copy (before)" "$before copy $small")
    before_pair=(-n "xpb copy, xpb paste (before)" "$before copy $small && $before paste > /dev/null")
}
