#!/bin/bash
# Kill-and-resume test of herd-sample with device = "cpu_batched": an
# uninterrupted run, then the same input run again and again, each SIGKILLed (whole process
# group) at a random moment and resumed from its restart record (<prefix>_restart/:
# batched.ckpt + draws.bin), then run to the end; every HDF5 dataset must be byte-identical
# to the uninterrupted run's, one more run must report the run as complete (exit 0) without
# redoing it, no <prefix>.h5.tmp.* file of a killed run may be left behind, and a different
# input must be refused while the record is incomplete (naming overwrite = true).
# The kill points follow the record's progress (draws.bin), so the test holds on a loaded
# machine. Usage: kill_resume_batched.sh <herd-sample> <workdir> <adaptation> <chains> <chain_size>
#        <checkpoint_period> [launcher... (its last word: the process count)]
# HERD_TEST_H5_POSTERIOR=compact runs with h5_posterior = "compact" (no posterior and no
# sample_stats group: the draws are kept in memory and the record only).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# kill_job PID: SIGKILLs the run PID (started by setsid) and every process under it, and
# waits until none runs (under mpiexec the ranks are out of the process group's reach).
source "$here/kill_job.sh"
exe=$1; work=$2; adaptation=$3; chains=$4; size=$5; period=$6; shift 6
h5_posterior=${HERD_TEST_H5_POSTERIOR:-verbose}
launch=("$@")
np=1
[ ${#launch[@]} -gt 0 ] && np=${launch[-1]}
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
cat > run.toml <<EOT
device = "cpu_batched"
chains_per_rank = $(( chains / np ))
warmup = 30000
chain_size = $size
thin = 20
random_seed = 11
start_point = [0.1, 0.2, 0.3]
proposal_std = [0.5, 0.5, 0.5]
delayed_rejection_count = 1
batched_adaptation = "$adaptation"
checkpoint_period = $period
h5_posterior = "$h5_posterior"
[target]
builtin = "banana"
ndim = 3
EOT
t0=$(date +%s.%N)
timeout 300 "${launch[@]}" "$exe" run.toml --quiet --output ref/run || { echo "reference run failed"; exit 1; }
t1=$(date +%s.%N)
echo "uninterrupted run: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) * 1000 }') ms"
grep "^checkpoints:" ref/run_report.txt
# The record of the whole run (a complete run removes it): chains x draws x ((d + 3) doubles
# + 2 bytes): the draw, its lp, and its statistics (acceptance probability, adaptation
# measure; accepted, dr_stage).
total=$(( chains * (size / 20) * (6 * 8 + 2) ))
[ -e ref/run_restart/draws.bin ] && { echo "a complete run kept its draws.bin"; exit 1; }
record_bytes() { stat -c %s x/run_restart/draws.bin 2>/dev/null || echo 0; }
kills=0
resumable=0  # largest record a killed run left for the next run to resume from
for i in 1 2 3 4 5; do
  # Kill points by progress, not time: the first run in the warm-up (after its first
  # checkpoint), the next ones once the record has grown by a random amount (up to a third
  # of the draws), plus a random 0-99 ms; the last run at a random 50-349 ms after its
  # start. Printed, to replay a failure.
  setsid "${launch[@]}" "$exe" run.toml --quiet --output x/run > log.$i 2>&1 &
  pid=$!
  extra=$(( RANDOM % 100 ))
  if [ $i -eq 1 ]; then
    # In the warm-up: once its first checkpoint exists (draws.bin still empty).
    while kill -0 "$pid" 2>/dev/null && ! [ -f x/run_restart/batched.ckpt ]; do sleep 0.01; done
    extra=$(( RANDOM % 20 ))
    what="first checkpoint written, record at $(record_bytes) bytes, +${extra} ms"
  elif [ $i -lt 5 ]; then
    target=$(( $(record_bytes) + 1 + (RANDOM * 32768 + RANDOM) % (total / 3 + 1) ))
    while kill -0 "$pid" 2>/dev/null && [ "$(record_bytes)" -lt "$target" ]; do sleep 0.01; done
    what="record at $(record_bytes) of $total bytes, +${extra} ms"
  else
    extra=$(( 50 + RANDOM % 300 ))
    what="${extra} ms after the start"
  fi
  sleep "$(awk -v m="$extra" 'BEGIN { printf "%.3f", m / 1000 }')"
  if kill -0 "$pid" 2>/dev/null; then
    kill_job "$pid"
    kills=$((kills + 1))
    echo "killed: $what"
  else
    echo "run $i had ended ($what)"
  fi
  wait "$pid" 2>/dev/null
  rb=$(record_bytes)
  [ "$rb" -gt "$resumable" ] && resumable=$rb
  if [ $i -eq 2 ] && [ -f x/run_restart/batched.ckpt ] && ! [ -f x/run.h5 ]; then
    # Another input is refused while the record is incomplete, and nothing is changed.
    sum=$(cat x/run_restart/* | md5sum)
    other=$(timeout 60 "${launch[@]}" "$exe" run.toml --quiet --output x/run --set thin=10 2>&1)
    rc=$?
    if [ $rc -ne 2 ] || ! grep -q "overwrite = true" <<< "$other"; then
      echo "a run of another input was not refused (rc $rc): $other"; exit 1
    fi
    [ "$sum" = "$(cat x/run_restart/* | md5sum)" ] || { echo "the refused run changed the record"; exit 1; }
    echo "another input refused: $(head -c 160 <<< "$other")"
  fi
done
# A killed rank may outlive mpiexec for a moment; its temporaries are removed only once it is
# gone (a live process's are kept), so wait for the processes named in them.
for f in x/*.tmp.*; do
  [ -e "$f" ] || continue
  p=${f##*.tmp.}; p=${p%%.*}
  for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
done
before=$(record_bytes)
echo "record bytes before the final resume: $before"
timeout 300 "${launch[@]}" "$exe" run.toml --output x/run > final.log 2>&1 || { echo "final resumed run failed"; cat final.log; exit 1; }
status=0
grep -q "resuming from the restart record\|holds no checkpoint yet\|is complete" final.log || { echo "the final run did not resume"; cat final.log; status=1; }
grep "^checkpoints:" x/run_report.txt
again=$(timeout 60 "${launch[@]}" "$exe" run.toml --output x/run 2>&1)
rc=$?
if [ $rc -ne 0 ] || ! grep -q "is complete" <<< "$again"; then
  echo "a completed run was not reported as complete (rc $rc): $again"; status=1
fi
left=$(ls x | grep '\.tmp\.' || true)
[ -z "$left" ] || { echo "temporary files were left behind: $left"; status=1; }
/usr/bin/python3 "$here/same_h5.py" ref/run.h5 x/run.h5 || status=1
/usr/bin/python3 - ref/run.h5 x/run.h5 "$h5_posterior" <<'EOT' || status=1
import sys, h5py
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
# The per-draw statistics a resumed run takes from the record are among the compared datasets (and not empty:
# the first kill is in the warm-up, whose states carry adaptation measures into the draws).
compact = sys.argv[3] == "compact"
stats = ([] if compact else ["sample_stats/accepted", "sample_stats/dr_stage", "sample_stats/acceptance_probability"]) + [
    "chain_compact/dr_stage", "chain_compact/acceptance_probability", "chain_compact/adaptation_measure"]
missing = [n for n in stats if n not in names]
if missing:
    print(f"datasets missing: {missing}")
# h5_posterior = "compact": neither the uninterrupted nor the resumed file has the verbose groups.
extra = [g for g in ("posterior", "sample_stats") for f in (a, b) if compact and g in f]
if extra:
    print(f"groups of the verbose layout in a compact file: {extra}")
accepted = "" if compact else f"accepted draws: {int(a['sample_stats/accepted'][()].sum())}, "
print(f"{accepted}rows with an adaptation measure: {int((a['chain_compact/adaptation_measure'][()] > 0).sum())}")
sys.exit(1 if missing or extra else 0)
EOT
[ "$kills" -ge 1 ] || { echo "every run finished before its kill: nothing tested"; status=1; }
# The last run may finish (a complete run removes its record), so ask whether any kill left a
# record with draws in it for the next run to resume from.
[ "$resumable" -gt 0 ] || { echo "no kill left a record with draws: resume not tested"; status=1; }
[ $status -eq 0 ] && echo "killed $kills times; the HDF5 datasets are byte-identical" && cd / && rm -rf "$work"
exit $status
