# Sourced by the kill-and-resume scripts (bash).
# kill_job PID: SIGKILLs the run started as PID (setsid) and every process under it, then
# waits until none of them runs. Under MPICH's mpiexec a kill of the process group alone
# reaches mpiexec only: Hydra starts its proxy and each rank in a session of its own, and
# they ended later, when the proxy noticed, while the next run started.
# The launcher's process group is stopped at once (SIGSTOP: the kill's moment), then every
# process under it, and the tree is listed again, so that no process forked meanwhile is
# missed.
job_tree() {
  local pids=("$1") i=0 p
  while [ $i -lt ${#pids[@]} ]; do
    for p in $(pgrep -P "${pids[$i]}" 2>/dev/null); do pids+=("$p"); done
    i=$((i + 1))
  done
  echo "${pids[@]}"
}
kill_job() {
  local pids p
  kill -STOP -- -"$1" 2>/dev/null
  kill -STOP $(job_tree "$1") 2>/dev/null
  pids=($(job_tree "$1"))
  kill -9 -- -"$1" "${pids[@]}" 2>/dev/null
  for p in "${pids[@]}"; do
    # Gone, or a zombie (its files and lock already released).
    while [ -e /proc/$p ] && [ "$(awk '{ print $3 }' /proc/$p/stat 2>/dev/null)" != Z ]; do sleep 0.01; done
  done
}
