#!/bin/bash
# herd-rl train algorithm = "dqn" killed and resumed, by hand or under a launcher
# (mpiexec -n 2: data-parallel DQN, each rank's replay buffer and streams in the checkpoint):
# 1. an uninterrupted reference run;
# 2. the same run SIGKILLed (the whole process group, launcher included) at fixed random
#    points after its checkpoints, and resumed each time: the finished progress CSV equals
#    the reference's in every column but the wall-clock ones, and so do the networks (eval);
# 3. SIGTERM: exit 143 after the current iteration, and the printed resume command finishes
#    the run with the reference's CSV.
# Usage: kill_resume_dqn.sh <herd-rl> <workdir> [launcher...]
set -u
# kill_job PID: SIGKILLs the run PID (started by setsid) and every process under it, and
# waits until none runs (under mpiexec the ranks are out of the process group's reach).
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kill_job.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/signal_train.sh"
exe=$1; work=$2; shift 2
launch=("$@")
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
RANDOM=2025  # fixed kill points (printed, to replay a failure)
iters=24
cat > run.toml <<'TOML'
algorithm = "dqn"
total_steps = 4800
checkpoint_period = 2
[sampler]
num_envs = 2
num_steps = 500
[network]
hidden = [16]
[dqn]
learning_starts = 100
train_freq = 4
batch_size = 16
target_update_interval = 100
n_step = 2
prioritized = true
buffer_size = 400
TOML
ranks=1
[ ${#launch[@]} -gt 0 ] && ranks=${launch[-1]}
# Wider layers make an iteration last tens of ms (about 25 ms alone, against 4 ms with
# [16]): on a loaded machine the polling loop below can stall long enough for few-ms
# iterations to end the runs before the kills (seen under a launcher, and once in about 14
# serial runs under ctest -j2 beside other work).
sed -i 's/^hidden = .*/hidden = [128, 128]/' run.toml
# 1000 env steps (250 updates) per iteration: an iteration lasts a few ms even on an idle
# machine, so the kill points below (polled every 5 ms) fall inside the runs.
sed -i "s/^total_steps = .*/total_steps = $((iters * 1000 * ranks))/" run.toml
fail() { echo "FAIL: $*"; exit 1; }
rows() { [ -f "$1" ] && echo $(( $(wc -l < "$1") - 1 )) || echo 0; }
# The columns that do not depend on the wall clock (wall_time_s and the two rates).
steady() { cut -d, -f1,2,4-16 "$1"; }

timeout 300 "${launch[@]}" "$exe" train run.toml --quiet --set output_prefix=ref || fail "reference run failed"
[ "$(rows ref_progress.csv)" = "$iters" ] || fail "reference: $(rows ref_progress.csv) rows, expected $iters"

# 2. SIGKILL at random points.
kills=0
for i in 1 2 3 4; do
  setsid "${launch[@]}" "$exe" train run.toml --quiet --resume --set output_prefix=x > kill.$i.log 2>&1 &
  pid=$!
  target=$(( $(rows x_progress.csv) + 1 + RANDOM % (iters / 4) ))
  while kill -0 "$pid" 2>/dev/null && [ "$(rows x_progress.csv)" -lt "$target" ]; do sleep 0.005; done
  if kill -0 "$pid" 2>/dev/null; then
    kill_job "$pid"
    kills=$((kills + 1))
    echo "killed run $i at row $(rows x_progress.csv) (target $target)"
  else
    echo "run $i had ended"
  fi
  wait "$pid" 2>/dev/null
done
[ "$kills" -ge 2 ] || fail "only $kills runs were killed"
timeout 300 "${launch[@]}" "$exe" train run.toml --quiet --resume --set output_prefix=x || fail "final resume failed"
diff <(steady ref_progress.csv) <(steady x_progress.csv) > /dev/null || fail "x_progress.csv differs from the reference"
[ "$("$exe" eval x.ckpt --episodes 3)" = "$("$exe" eval ref.ckpt --episodes 3)" ] || fail "SIGKILL: eval differs"
echo "SIGKILL: $kills kills, final CSV and networks equal to the reference"

# 3. SIGTERM: finish the iteration, checkpoint, print the resume command.
set -m
p=sig_TERM
signal_train TERM $p $(( 3 + RANDOM % (iters / 3) ))
cat $p.err
[ "$rc" = 143 ] || fail "SIGTERM: exit $rc, expected 143"
cmd=$(sed -n 's/^herd-rl: resume with: //p' $p.err)
[ -n "$cmd" ] || fail "SIGTERM: no resume command"
if [ ${#launch[@]} -gt 0 ]; then
  case "$cmd" in
    "mpiexec -n ${launch[-1]} "*) cmd="${launch[*]} ${cmd#mpiexec -n * }" ;;
    *) fail "SIGTERM: the resume command does not start with mpiexec -n ${launch[-1]}: $cmd" ;;
  esac
fi
echo "resuming: $cmd"
eval "$cmd --quiet" || fail "SIGTERM: the printed command failed"
diff <(steady ref_progress.csv) <(steady ${p}_progress.csv) > /dev/null || fail "SIGTERM: CSV differs from the reference"
echo "SIGTERM: exit 143, resumed to the reference's result"
echo "1 passed, 0 failed"
