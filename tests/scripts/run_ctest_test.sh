#!/usr/bin/env bash
# scripts/run_ctest on tiny hand-written build folders: a folder without tests (as left by a
# configure with HERD_BUILD_TESTS=OFF), one whose only test is labelled slow, one passing, one
# failing and one skipped test. No test run must be a failure; the summary line must count.
# Usage: run_ctest_test.sh <herd source dir> <work dir>
set -uo pipefail
src="$1"
work="$2"
rm -rf "$work"
mkdir -p "$work"
fails=0

# make_dir <name> <CTestTestfile.cmake body>
make_dir() {
  mkdir -p "$work/$1"
  printf '%s\n' "$2" >"$work/$1/CTestTestfile.cmake"
}
# expect <name> <expected exit: 0 or nonzero> <expected last line>
expect() {
  local out rc last
  out="$(HERD_JOBS=1 "$src/scripts/run_ctest" "$work/$1" 2>&1)"
  rc=$?
  last="$(printf '%s\n' "$out" | tail -1)"
  if [[ "$2" == 0 && $rc -ne 0 ]] || [[ "$2" != 0 && $rc -eq 0 ]]; then
    echo "FAIL $1: exit $rc, expected $2"; printf '%s\n' "$out"; fails=$((fails + 1)); return
  fi
  if [[ "$last" != "$3" ]]; then
    echo "FAIL $1: last line '$last', expected '$3'"; printf '%s\n' "$out"; fails=$((fails + 1)); return
  fi
  echo "ok   $1: exit $rc, '$last'"
}

make_dir none ''
make_dir only_slow 'add_test(long /bin/true)
set_tests_properties(long PROPERTIES LABELS "slow")'
make_dir pass 'add_test(a /bin/true)
add_test(b /bin/true)
add_test(long /bin/false)
set_tests_properties(long PROPERTIES LABELS "slow")'
make_dir fail 'add_test(a /bin/true)
add_test(b /bin/false)'
make_dir skip 'add_test(a /bin/true)
add_test(b /bin/sh -c "exit 77")
set_tests_properties(b PROPERTIES SKIP_RETURN_CODE 77)'

expect none nonzero "ctest: 0 passed, 0 failed, 0 skipped"
expect only_slow nonzero "ctest: 0 passed, 0 failed, 0 skipped"
expect pass 0 "ctest: 2 passed, 0 failed, 0 skipped"
expect fail nonzero "ctest: 1 passed, 1 failed, 0 skipped"
expect skip 0 "ctest: 1 passed, 0 failed, 1 skipped"
exit $((fails > 0))
