#!/bin/bash
# A batched run (device = "cpu_batched") resumed in another process layout of the same total
# of chains: a run of 2 processes x 64 chains, SIGKILLed once its restart record holds a
# checkpoint and draws, is resumed by 1 process x 128 chains (and the other way round); every
# HDF5 dataset must be byte-identical to an uninterrupted 1 x 128 run's (a chain depends only
# on its global id, pooled adaptation on the fixed summation tree). A resume with another total of chains is
# refused in one line naming both totals, another input naming its change, the record left as
# it was.
# Usage: resume_layout_batched.sh <herd-sample> <workdir> <mpiexec> <numproc flag>
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/kill_job.sh"
exe=$1; work=$2; mpiexec=$3; npflag=$4
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
cat > run.toml <<EOT
device = "cpu_batched"
chains_per_rank = 128
warmup = 2000
chain_size = 200000
thin = 20
random_seed = 5
start_point = [0.1, 0.2, 0.3]
delayed_rejection_count = 1
checkpoint_period = 2000
[target]
builtin = "banana"
ndim = 3
EOT
timeout 300 "$exe" run.toml --quiet --output ref/run || { echo "reference run failed"; exit 1; }
status=0
# kill_when_recorded PREFIX COMMAND...: starts the command with --quiet --output PREFIX, SIGKILLs
# it once the record holds a checkpoint and draws (a checkpoint may come after the first block
# of draws).
kill_when_recorded() {
  local prefix=$1; shift
  mkdir -p "$(dirname "$prefix")"
  setsid "$@" --quiet --output "$prefix" > "$prefix.log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null && { ! [ -f "${prefix}_restart/batched.ckpt" ] ||
    [ "$(stat -c %s "${prefix}_restart/draws.bin" 2>/dev/null || echo 0)" -eq 0 ]; }; do
    sleep 0.01
  done
  if ! kill -0 "$pid" 2>/dev/null; then echo "the run of $prefix ended before its kill"; return 1; fi
  kill_job "$pid"
  wait "$pid" 2>/dev/null
  echo "killed $prefix with $(stat -c %s "${prefix}_restart/draws.bin") bytes of draws recorded"
}
compare() { /usr/bin/python3 "$here/same_h5.py" ref/run.h5 "$1"; }
# 2 x 64, killed, resumed as 1 x 128.
kill_when_recorded a/run "$mpiexec" "$npflag" 2 "$exe" run.toml --set chains_per_rank=64 || exit 1
# Another total of chains: refused in one line, the record unchanged.
sum=$(cat a/run_restart/* | md5sum)
other=$(timeout 60 "$exe" run.toml --quiet --output a/run --set chains_per_rank=100 2>&1)
rc=$?
if [ $rc -ne 2 ] || [ "$(wc -l <<< "$other")" -ne 1 ] || ! grep -q "with 128 chain(s), but this run is cpu_batched with 100" <<< "$other"; then
  echo "another total of chains was not refused in one line (rc $rc): $other"; status=1
fi
# Another input in the other layout: the change named, chains_per_rank not (it is no change).
other=$(timeout 60 "$exe" run.toml --quiet --output a/run --set thin=10 2>&1)
rc=$?
if [ $rc -ne 2 ] || ! grep -q "changed: thin (20 in the record, 10 now))" <<< "$other"; then
  echo "another input was not refused naming only its change (rc $rc): $other"; status=1
fi
[ "$sum" = "$(cat a/run_restart/* | md5sum)" ] || { echo "the refused runs changed the record"; status=1; }
timeout 300 "$exe" run.toml --output a/run > a.log 2>&1 || { echo "resume as 1 x 128 failed"; cat a.log; exit 1; }
grep -q "resuming from the restart record" a.log || { echo "1 x 128 did not resume"; cat a.log; status=1; }
compare a/run.h5 || status=1
# 1 x 128, killed, resumed as 2 x 64.
kill_when_recorded b/run "$exe" run.toml || exit 1
timeout 300 "$mpiexec" "$npflag" 2 "$exe" run.toml --output b/run --set chains_per_rank=64 > b.log 2>&1 || {
  echo "resume as 2 x 64 failed"; cat b.log; exit 1; }
grep -q "resuming from the restart record" b.log || { echo "2 x 64 did not resume"; cat b.log; status=1; }
compare b/run.h5 || status=1
[ $status -eq 0 ] && echo "resumed in the other layout: byte-identical" && cd / && rm -rf "$work"
exit $status
