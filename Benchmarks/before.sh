# Sourced by run.sh and wayland.sh. With XPB_BENCH_BEFORE=BINARY (an earlier build of xpb), the
# hyperfine arguments that run it in the small rows' rounds, named "(before)": before_paste,
# before_copy, before_copy_stdin and before_pair (empty without it). Usage: before_rows WORK SMALL
before_rows() {
    local work=$1 small=$2 before
    before_paste=() before_copy=() before_copy_stdin=() before_pair=()
    [ -n "${XPB_BENCH_BEFORE:-}" ] || return 0
    # Written as the measured build is (strip -o, as make install's install -s leaves a file): a
    # copy made with cp took 12 fewer page faults a run, and came out faster under the same code.
    strip -o "$work/xpb-before" "$XPB_BENCH_BEFORE"
    before="$work/xpb-before"
    before_paste=(-n "xpb paste (before)" "$before paste")
    before_copy=(-n "xpb copy (before)" "$before copy $small")
    before_copy_stdin=(-n "xpb copy (before)" "$before copy < $small")
    before_pair=(-n "xpb copy, xpb paste (before)" "$before copy $small && $before paste > /dev/null")
}

# Usage: rotated ROUND -n NAME COMMAND [-n NAME COMMAND …]; sets `rotation` to the same hyperfine
# arguments, each round starting one command further along. In a fixed order the command that
# always runs first and the one that always runs last were measured apart even when they were the
# same binary (0.99 × and 1.08 × xclip in one run): now no command is always first or last.
rotated() {
    local round=$1 i count
    shift
    local -a names=() commands=()
    while (($#)); do
        names+=("$2")
        commands+=("$3")
        shift 3
    done
    count=${#names[@]}
    rotation=()
    for ((i = 0; i < count; i++)); do
        rotation+=(-n "${names[(i + round) % count]}" "${commands[(i + round) % count]}")
    done
}
