# Sourced by the herd-rl kill-resume scripts. Needs: exe, launch (array), iters, rows().
# signal_train SIG PREFIX FIRST_ROW: runs `herd-rl train run.toml` with output PREFIX in
# the background (stdout PREFIX.out, stderr PREFIX.err), sends SIG to its process group
# (as a terminal's Ctrl-C; SIGTERM under a launcher to the launcher alone) once its progress CSV has FIRST_ROW rows, and sets rc to its
# exit status. On a busy machine the poll can be starved until the run has finished; such
# an attempt tests nothing and is made again, signalled at the first row (up to 3,
# printed). Under a launcher rc is the ranks' status when they printed their interruption
# line (MPICH's own status is not reliable after a signal). Call it with job control on (set -m), so that SIGINT is not ignored.
signal_train() {
  local sig=$1 p=$2 target=$3 attempt pid
  for attempt in 1 2 3; do
    rm -f "$p".* "$p"_*
    "${launch[@]}" "$exe" train run.toml --set output_prefix="$p" > "$p".out 2> "$p".err &
    pid=$!
    while kill -0 "$pid" 2>/dev/null && [ "$(rows "${p}"_progress.csv)" -lt "$target" ]; do sleep 0.005; done
    # SIGTERM under a launcher to the launcher alone, as `kill` or a scheduler sends it: one to
    # the whole process group also ends MPICH's proxies, which then kill the ranks (docs/rl.md).
    if [ "$sig" = TERM ] && [ ${#launch[@]} -gt 0 ]; then kill -TERM "$pid" 2>/dev/null
    else kill -"$sig" -- -"$pid" 2>/dev/null; fi
    wait "$pid"
    rc=$?
    # MPICH's mpiexec exits 0, 2 / 15 or 130 / 143 after a signal, by timing, sometimes
    # before its ranks are done (docs/rl.md): wait for the ranks (up to 60 s); their
    # interruption line, not the launcher's status, says that they stopped; rc is then the
    # status they exit with.
    if [ ${#launch[@]} -gt 0 ]; then
      for _ in $(seq 1200); do pgrep -f "output_prefix=$p\$" > /dev/null || break; sleep 0.05; done
      if grep -q "^herd-rl: interrupted by SIG$sig after" "$p".err; then
        echo "SIG$sig: mpiexec exited $rc; the ranks stopped (130 / 143)"
        rc=$([ "$sig" = INT ] && echo 130 || echo 143)
      fi
    fi
    [ "$rc" = 0 ] && [ "$(rows "${p}"_progress.csv)" = "$iters" ] || return 0
    echo "SIG$sig attempt $attempt: the run finished before the signal reached it; again"
    target=1
  done
}
