#!/usr/bin/env bash
# CPU dry run of `scripts/gpu-check run` with stub programs: a test program with three
# cases (one passing, one with Catch2's special characters in its name, one failing), a
# program that skips (exit 77), one that hangs, one that crashes, a benchmark and a herd-rl
# stub, plus a stub nvidia-smi. Checks the table rows (stdout and $OUT/gpu-check.txt), the
# per-program timeout, the exit status, and the global deadline (a second run with a short
# deadline must stop on time and list what it left out as NOT-RUN).
# Usage: gpu_check_dry_run.sh <repo root> <work dir>
set -euo pipefail
root="$1"
work="$2"
rm -rf "$work"
mkdir -p "$work/gpu/bin" "$work/gpu/apps" "$work/gpu/presets" "$work/path"
fail() { echo "gpu_check_dry_run: FAIL: $*" >&2; exit 1; }

cat >"$work/path/nvidia-smi" <<'S'
#!/usr/bin/env bash
case "$*" in
  *driver_version*) echo "580.65.06" ;;
  *) echo "NVIDIA H200, 143771 MiB" ;;
esac
S
# A Catch2-like test program: lists its cases, runs the one named by its test spec.
cat >"$work/gpu/bin/test_stub_cases" <<'S'
#!/usr/bin/env bash
if [[ "${1:-}" == "--list-test-names-only" ]]; then
  printf '%s\n' "stub: passes" "stub: a, b [and] c" "stub: fails"
  exit 0
fi
case "$1" in
  'stub: passes') exit 0 ;;
  'stub: a\, b \[and\] c') exit 0 ;;
  'stub: fails') echo "expected 1 == 2"; exit 1 ;;
  *) echo "unknown test spec: $1"; exit 3 ;;
esac
S
printf '#!/usr/bin/env bash\n[[ "${1:-}" == --list-test-names-only ]] && exit 0\necho "no CUDA device"; exit 77\n' \
  >"$work/gpu/bin/test_stub_skip"
printf '#!/usr/bin/env bash\n[[ "${1:-}" == --list-test-names-only ]] && exit 0\nexec sleep 600\n' \
  >"$work/gpu/bin/test_stub_hang"
printf '#!/usr/bin/env bash\n[[ "${1:-}" == --list-test-names-only ]] && exit 0\nkill -SEGV $$\n' \
  >"$work/gpu/bin/test_stub_crash"
cat >"$work/gpu/bin/bench_stub_gpu" <<'S'
#!/usr/bin/env bash
echo "Benchmark          Time             CPU   Iterations"
echo "bm_stub/4096    1234 us         1200 us          100 steps_per_s=3.3M/s"
S
cat >"$work/gpu/apps/herd-rl" <<'S'
#!/usr/bin/env bash
echo "iteration 10  123456.7 steps/s  mean return 187.5  (stub)"
S
touch "$work/gpu/presets/cartpole_ppo_gpu.toml"
chmod +x "$work"/path/* "$work"/gpu/bin/* "$work"/gpu/apps/*

# Run 1: generous deadline; the hanging program is cut by its own 2 s timeout.
set +e
PATH="$work/path:$PATH" GPU_CHECK_NCCL_LIB=/nonexistent GPU_CHECK_DIR="$work/gpu" OUT="$work/out1" GPU_CHECK_DEADLINE=60 \
  GPU_CHECK_TEST_TIMEOUT=2 GPU_CHECK_BENCH_TIMEOUT=5 GPU_CHECK_RL_TIMEOUT=5 \
  bash "$root/scripts/gpu-check" run >"$work/stdout1" 2>&1
rc=$?
set -e
cat "$work/stdout1"
[[ $rc -ne 0 ]] || fail "run 1 exited 0 although a case failed, one hung and one crashed"
cmp -s "$work/stdout1" "$work/out1/gpu-check.txt" || fail "stdout and \$OUT/gpu-check.txt differ"
expect() {  # expect FILE REGEX WHAT
  grep -Eq "$2" "$1" || fail "no row for $3 in $1 (wanted /$2/)"
}
t="$work/out1/gpu-check.txt"
expect "$t" '^PRE +nvidia-smi: NVIDIA H200.* PASS' "the preflight GPU"
expect "$t" '^PRE +driver 580\.65\.06, glibc' "the driver and glibc"
expect "$t" '^PRE +NVIDIA_TF32_OVERRIDE=0' "TF32 off"
expect "$t" '^TEST +test_stub_cases:stub: passes +PASS' "a passing case"
expect "$t" '^TEST +test_stub_cases:stub: a, b \[and\] c +PASS' "a case name with special characters"
expect "$t" '^TEST +test_stub_cases:stub: fails +FAIL .*exit 1' "a failing case"
expect "$t" '^TEST +test_stub_skip +SKIP' "a skipped program"
expect "$t" '^TEST +test_stub_hang +TIMEOUT .*limit 2s' "a hanging program"
expect "$t" '^TEST +test_stub_crash +CRASH .*signal 11' "a crashing program"
expect "$t" '^BENCH +bench_stub_gpu +PASS' "the benchmark"
expect "$t" '^ +bm_stub/4096 +1234 us' "the benchmark's result line"
expect "$t" '^RL +herd-rl cartpole_ppo_gpu +PASS' "herd-rl"
expect "$t" '^RL +cartpole_ppo_gpu +INFO .*steps/s 123456\.7, return 187\.5' "herd-rl's steps/s and return"
expect "$t" '^END +pass 4, skip 1, fail/timeout/crash 3, not run 0 +FAIL' "the summary"
[[ -s "$work/out1/logs/test_stub_cases.3.log" ]] || fail "no log kept for the failing case"
[[ ! -e "$work/out1/logs/test_stub_cases.1.log" ]] || fail "a passing case's log was kept"
awk 'length > 100 { exit 1 }' "$t" || fail "a row is longer than 100 characters"
# Rows appear in order: preflight, tests, benchmarks, herd-rl, summary.
order="$(awk '{print $1}' "$t" | grep -E '^(PRE|TEST|BENCH|RL|END)$' | uniq | tr '\n' ' ')"
[[ "$order" == "PRE TEST BENCH RL END " ]] || fail "rows out of order: $order"

# Run 2: a 5 s deadline with a 30 s test timeout: the hang is cut at the deadline, what
# follows is NOT-RUN, and the whole run ends within a few seconds of the deadline.
start=$SECONDS
set +e
PATH="$work/path:$PATH" GPU_CHECK_NCCL_LIB=/nonexistent GPU_CHECK_DIR="$work/gpu" OUT="$work/out2" GPU_CHECK_DEADLINE=5 \
  GPU_CHECK_TEST_TIMEOUT=30 bash "$root/scripts/gpu-check" run >"$work/stdout2" 2>&1
rc=$?
set -e
took=$((SECONDS - start))
cat "$work/stdout2"
[[ $rc -ne 0 ]] || fail "run 2 exited 0"
((took <= 12)) || fail "run 2 took ${took}s with a 5 s deadline"
t="$work/out2/gpu-check.txt"
expect "$t" '^TEST +test_stub_hang +TIMEOUT' "the hang cut at the deadline"
expect "$t" 'NOT-RUN +0s deadline' "items left out by the deadline"
expect "$t" '^END .*not run [1-9].* FAIL' "the summary's not-run count"
expect "$t" '^TEST +test_stub_cases:stub: passes +PASS' "a case run before the deadline"
echo "gpu_check_dry_run: OK"
