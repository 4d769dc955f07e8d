# Sourced by the herd-rl kill-resume scripts. Needs: exe, launch (array), iters, rows().
# signal_train SIG PREFIX FIRST_ROW: runs `herd-rl train run.toml` with output PREFIX in
# the background (stdout PREFIX.out, stderr PREFIX.err), sends SIG to its process group
# (as a terminal's Ctrl-C) once its progress CSV has FIRST_ROW rows, and sets rc to its
# exit status. On a busy machine the poll can be starved until the run has finished; such
# an attempt tests nothing and is made again, signalled at the first row (up to 3,
# printed). Call it with job control on (set -m), so that SIGINT is not ignored.
signal_train() {
  local sig=$1 p=$2 target=$3 attempt pid
  for attempt in 1 2 3; do
    rm -f "$p".* "$p"_*
    "${launch[@]}" "$exe" train run.toml --set output_prefix="$p" > "$p".out 2> "$p".err &
    pid=$!
    while kill -0 "$pid" 2>/dev/null && [ "$(rows "${p}"_progress.csv)" -lt "$target" ]; do sleep 0.005; done
    kill -"$sig" -- -"$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    [ "$rc" = 0 ] && [ "$(rows "${p}"_progress.csv)" = "$iters" ] || return 0
    echo "SIG$sig attempt $attempt: the run finished before the signal reached it; again"
    target=1
  done
}
