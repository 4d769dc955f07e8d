#!/bin/bash
# Kill-and-resume test: runs par_resume_tool uninterrupted, then again with
# SIGKILLs at random moments (resuming each time), and compares the chain files byte for
# byte. Usage: kill_resume.sh <tool> <workdir> <launcher...>  (launcher may be empty or
# "mpiexec -n 2").
set -u
tool=$1; work=$2; shift 2
launch=("$@")
args=(2 50 4000)
rm -rf "$work"; mkdir -p "$work/ref" "$work/x"
timeout 120 "${launch[@]}" "$tool" "$work/ref" "${args[@]}" || { echo "reference run failed"; exit 1; }
[ -f "$work/ref/done" ] || { echo "reference run did not finish"; exit 1; }
# Fault: an exception on the last rank ends every rank, naming it; the checkpoint survives.
nranks=1; [ ${#launch[@]} -gt 0 ] && nranks=${launch[-1]}
start=$(date +%s)
HERD_TEST_FAIL_AFTER=3000 timeout 60 "${launch[@]}" "$tool" "$work/x" "${args[@]}" > "$work/x/fault.log" 2>&1
frc=$?
elapsed=$(( $(date +%s) - start ))
if [ $frc -eq 0 ] || [ $frc -eq 124 ] || ! grep -q "rank $((nranks - 1)) of $nranks failed: .*injected failure" "$work/x/fault.log"; then
  echo "fault test failed (rc $frc, ${elapsed}s):"; cat "$work/x/fault.log"; exit 1
fi
echo "fault: every rank ended (rc $frc) in ${elapsed}s: $(grep -m1 failed "$work/x/fault.log")"
# Kill points by progress, not time (they were 0.2-0.6 s after each start: on a loaded
# machine the start-up alone can last longer, and no run reached a checkpoint): once the
# chain files have grown by a random amount (up to a quarter of the run's), plus a random
# 0-49 ms. Printed, to replay a failure.
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../apps/kill_job.sh"
total=$(cat "$work"/ref/*.chain | wc -c)
record_bytes() { stat -c %s "$work"/x/*.chain 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }
kills=0
for i in 1 2 3 4 5; do
  [ -f "$work/x/done" ] && break
  setsid "${launch[@]}" "$tool" "$work/x" "${args[@]}" > "$work/x/log" 2>&1 &
  pid=$!
  target=$(( $(record_bytes) + 1 + (RANDOM * 32768 + RANDOM) % (total / 4 + 1) ))
  while kill -0 "$pid" 2>/dev/null && [ "$(record_bytes)" -lt "$target" ]; do sleep 0.01; done
  extra=$(( RANDOM % 50 ))
  sleep "$(awk -v m="$extra" 'BEGIN { printf "%.3f", m / 1000 }')"
  if kill -0 "$pid" 2>/dev/null; then
    kill_job "$pid"
    kills=$((kills + 1))
    echo "killed: chain files at $(record_bytes) of $total bytes, +${extra} ms"
  fi
  wait "$pid" 2>/dev/null
done
before=$(cat "$work"/x/*.chain 2>/dev/null | wc -c)
echo "chain bytes before the final resume: $before of $total"
timeout 120 "${launch[@]}" "$tool" "$work/x" "${args[@]}" || { echo "final resumed run failed"; cat "$work/x/log"; exit 1; }
echo "killed $kills times"
status=0
for f in "$work"/ref/*.chain; do
  cmp "$f" "$work/x/$(basename "$f")" || status=1
done
[ "$kills" -ge 1 ] || { echo "the run finished before any kill: nothing tested"; status=1; }
[ "$before" -gt 0 ] || { echo "no checkpoint was reached before the kills: resume not tested"; status=1; }
[ $status -eq 0 ] && echo "resumed chains are byte-identical" && rm -rf "$work"
exit $status
