#!/bin/bash
# herd-rl's live outputs under kills (issue: results people can look at while training):
# 1. an uninterrupted reference run;
# 2. the same run SIGKILLed again and again at random points (kill points follow the rows
#    of <prefix>_progress.csv, so the test holds on a loaded machine) and resumed: after
#    every kill the CSV has its header once and whole rows of consecutive iterations only;
#    the finished CSV equals the reference's in every column but the wall-clock ones;
# 3. SIGINT and SIGTERM: exit 130 / 143, the message names the checkpoint and prints the
#    command that resumes; that command, run as printed, finishes the run with the same
#    CSV and the same evaluation as the reference.
# Usage: kill_resume_rl.sh <herd-rl> <workdir> <iterations> [launcher...]
#   iterations: 150 for one process, 150 / N for N ranks (4 envs x 32 steps per rank)
set -u
# kill_job PID: SIGKILLs the run PID (started by setsid) and every process under it, and
# waits until none runs (under mpiexec the ranks are out of the process group's reach).
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kill_job.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/signal_train.sh"
exe=$1; work=$2; iters=$3; shift 3
launch=("$@")
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
RANDOM=2024  # fixed kill points (printed, to replay a failure)
cat > run.toml <<'TOML'
total_steps = 19200
checkpoint_period = 10
progress_period = 20
[sampler]
num_envs = 4
num_steps = 32
[algo]
epochs = 2
minibatch_size = 64
[logging]
tensorboard = true
[network]
hidden = [256, 256]
TOML
# The wide layers make an iteration last about 10 ms alone (tens of ms under a launcher,
# whose all-reduces wait on the load), much longer than one poll below: on a loaded machine
# the polling loop can stall for 100 ms or more, and with 2-3 ms iterations the runs then
# ended before the kills (a failure seen under ctest -j2 beside other work).
fail() { echo "FAIL: $*"; exit 1; }
rows() { [ -f "$1" ] && echo $(( $(wc -l < "$1") - 1 )) || echo 0; }
# Header once, whole rows of 19 fields, iterations 1, 2, ..., a final newline.
check_csv() {
  local f=$1
  [ -f "$f" ] || return 0
  [ "$(head -1 "$f")" = "iteration,env_steps,wall_time_s,episodes,return_mean,return_min,return_max,length_mean,length_min,length_max,policy_loss,value_loss,entropy,approx_kl,clip_fraction,explained_variance,learning_rate,sample_steps_per_s,train_steps_per_s" ] ||
    fail "$f: bad header: $(head -1 "$f")"
  [ "$(grep -c '^iteration,' "$f")" = 1 ] || fail "$f: header more than once"
  if [ -s "$f" ] && [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" != '\n' ]; then fail "$f: last row not whole"; fi
  awk -F, 'NR > 1 && (NF != 19 || $1 != NR - 1) { print "row " NR ": " $0; bad = 1 } END { exit bad }' "$f" ||
    fail "$f: rows not whole or not consecutive"
}
# The columns that do not depend on the wall clock.
steady() { cut -d, -f1,2,4-17 "$1"; }

timeout 300 "${launch[@]}" "$exe" train run.toml --quiet --set output_prefix=ref || fail "reference run failed"
total=$(rows ref_progress.csv)
[ "$total" = "$iters" ] || fail "reference: $total rows, expected $iters"
check_csv ref_progress.csv

# 2. SIGKILL at random points.
kills=0
for i in 1 2 3 4 5 6; do
  setsid "${launch[@]}" "$exe" train run.toml --quiet --resume --set output_prefix=x > kill.$i.log 2>&1 &
  pid=$!
  target=$(( $(rows x_progress.csv) + 1 + RANDOM % (iters / 4) ))
  extra=$(( RANDOM % 30 ))
  [ $i = 6 ] && target=0  # the last one: within its start-up, or early
  while kill -0 "$pid" 2>/dev/null && [ "$(rows x_progress.csv)" -lt "$target" ]; do sleep 0.005; done
  sleep "$(awk -v m="$extra" 'BEGIN { printf "%.3f", m / 1000 }')"
  if kill -0 "$pid" 2>/dev/null; then
    kill_job "$pid"
    kills=$((kills + 1))
    echo "killed run $i at row $(rows x_progress.csv) (target $target, +$extra ms)"
  else
    echo "run $i had ended"
  fi
  wait "$pid" 2>/dev/null
  check_csv x_progress.csv
done
[ "$kills" -ge 3 ] || fail "only $kills runs were killed"
timeout 300 "${launch[@]}" "$exe" train run.toml --quiet --resume --set output_prefix=x || fail "final resume failed"
check_csv x_progress.csv
diff <(steady ref_progress.csv) <(steady x_progress.csv) > /dev/null || fail "x_progress.csv differs from the reference"
echo "SIGKILL: $kills kills, CSV whole after each, final CSV equal to the reference"

# checkpoint_period_seconds: without iteration-based checkpoints, a run killed after 30
# rows has a checkpoint by wall time (every 2 ms: an iteration takes longer) and resumes
# from it; with neither, it
# has none. These runs are 100 times longer than the others, so that the kill lands before
# their end (the 45 iterations after row 30 can take less than the polling and the kill).
for secs in 0.002 0; do
  p=secs_$secs
  setsid "${launch[@]}" "$exe" train run.toml --quiet --set output_prefix=$p --set checkpoint_period=0 \
    --set checkpoint_period_seconds=$secs --set total_steps=1920000 > $p.log 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && [ "$(rows ${p}_progress.csv)" -lt 30 ]; do sleep 0.005; done
  kill_job "$pid"
  wait "$pid" 2>/dev/null
  out=$("${launch[@]}" "$exe" train run.toml --set output_prefix=$p --set total_steps=1920000 --stop-after 0 \
    --resume 2>&1)
  if [ $secs = 0 ]; then
    echo "$out" | grep -q "no checkpoint $p.ckpt yet" || fail "checkpoint_period_seconds = 0: $out"
  else
    at=$(echo "$out" | sed -n "s/.*resumed from $p.ckpt at iteration \([0-9]*\).*/\1/p")
    [ -n "$at" ] && [ "$at" -gt 0 ] || fail "checkpoint_period_seconds = $secs: no checkpoint by time: $out"
    echo "checkpoint_period_seconds = $secs: resumed at iteration $at after a kill at row 30 or later"
  fi
done

# 3. SIGINT and SIGTERM: finish the iteration, checkpoint, print the resume command.
set -m  # background jobs with job control: SIGINT is not ignored
for sig in INT TERM; do
  p=sig_$sig
  signal_train $sig $p $(( 5 + RANDOM % (iters / 3) ))
  want=$([ $sig = INT ] && echo 130 || echo 143)
  cat $p.err
  [ "$rc" = "$want" ] || fail "SIG$sig: exit $rc, expected $want"
  grep -q "herd-rl: interrupted by SIG$sig after iteration [0-9]* of $iters; checkpoint written to $p.ckpt" $p.err ||
    fail "SIG$sig: no interruption message"
  check_csv ${p}_progress.csv
  at=$(sed -n "s/.*after iteration \([0-9]*\) of.*/\1/p" $p.err)
  [ "$(rows ${p}_progress.csv)" = "$at" ] || fail "SIG$sig: $(rows ${p}_progress.csv) rows, stopped after $at"
  cmd=$(sed -n 's/^herd-rl: resume with: //p' $p.err)
  [ -n "$cmd" ] || fail "SIG$sig: no resume command"
  # Under a launcher the command starts "mpiexec -n N": run it with this test's launcher.
  if [ ${#launch[@]} -gt 0 ]; then
    case "$cmd" in
      "mpiexec -n ${launch[-1]} "*) cmd="${launch[*]} ${cmd#mpiexec -n * }" ;;
      *) fail "SIG$sig: the resume command does not start with mpiexec -n ${launch[-1]}: $cmd" ;;
    esac
  fi
  echo "resuming: $cmd"
  eval "$cmd --quiet" || fail "SIG$sig: the printed command failed"
  check_csv ${p}_progress.csv
  diff <(steady ref_progress.csv) <(steady ${p}_progress.csv) > /dev/null || fail "SIG$sig: CSV differs from the reference"
  [ "$("$exe" eval $p.ckpt --episodes 3)" = "$("$exe" eval ref.ckpt --episodes 3)" ] || fail "SIG$sig: eval differs"
  echo "SIG$sig: exit $rc after iteration $at, resumed to the reference's result"
done
echo "1 passed, 0 failed"
