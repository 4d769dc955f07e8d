#!/bin/bash
# Cost of the batched runs' checkpoints (docs/batched.md "Restart"): herd-sample
# with device = "cpu_batched" on the issue's workload (10-D Gaussian, AR(1) 0.5, one
# delayed-rejection stage, pooled adaptation, thin 10), without checkpoints (the baseline,
# checkpoint_period_seconds = 0) and at the default period (5 s), alternated `repeats`
# times; prints one JSON object with the median wall times, their ratio, and the
# checkpoints' own share of the wall time as the report measures it (gather, fsync of
# draws.bin, atomic write of batched.ckpt). The default-period runs also append every draw
# to draws.bin, which the ratio includes.
# Usage: bench_batched_checkpoint.sh <herd-sample> [chains=2000] [chain_size=40000] [repeats=3] [launcher...]
set -eu
exe=$1; chains=${2:-2000}; size=${3:-40000}; repeats=${4:-3}; shift $(( $# < 4 ? $# : 4 ))
launch=("$@")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; cd "$work"
cat > run.toml <<EOT
device = "cpu_batched"
chains_per_rank = $chains
warmup = 2000
chain_size = $size
thin = 10
random_seed = 3
start_point = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
delayed_rejection_count = 1
batched_adaptation = "pooled"
[target]
builtin = "normal"
ndim = 10
rho = 0.5
EOT
base=(); ckpt=(); share=(); count=()
for r in $(seq "$repeats"); do
  for mode in base ckpt; do
    rm -rf out
    period=0; [ $mode = ckpt ] && period=5
    t0=$(date +%s.%N)
    "${launch[@]}" "$exe" run.toml --quiet --output out/run --set checkpoint_period_seconds=$period
    t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
    if [ $mode = base ]; then base+=("$t"); else
      ckpt+=("$t")
      line=$(grep "^checkpoints:" out/run_report.txt)
      count+=("$(awk '{ print $2 }' <<< "$line")")
      share+=("$(sed -E 's/.*\(([0-9.]+)% of.*/\1/' <<< "$line")")
    fi
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
mb=$(median "${base[@]}"); mc=$(median "${ckpt[@]}")
printf '{"workload": "10-D Gaussian AR(1) 0.5, DR 1, pooled, thin 10", "chains": %s, "proposals_per_chain": %s, ' \
  "$chains" "$(( size + 2000 ))"
printf '"seconds_no_checkpoints": %s, "seconds_default_period": %s, "ratio": %s, "checkpoints": %s, ' \
  "$mb" "$mc" "$(awk -v a="$mc" -v b="$mb" 'BEGIN { printf "%.4f", a / b }')" "$(median "${count[@]}")"
printf '"checkpoint_share_percent": %s}\n' "$(median "${share[@]}")"
