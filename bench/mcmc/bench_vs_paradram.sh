#!/bin/bash
# herd against ParaMonte's ParaDRAM, whole run (docs/dram.md, "Against ParaDRAM, whole run").
#
# One C program, paradram_gauss10.c (a 10-D Gaussian log density with AR(1) correlation 0.5
# and a main that calls ParaMonte 1.x's C entry point `runParaDRAM`), is compiled twice: linked
# to herd's libherd.so (herd's C API, herd/mcmc/paradram.h) and to ParaDRAM's C-callable
# library from PyPI's paramonte 2.5.2 (installed by bench/peer-venv into the bench venv; the
# package has no C header, the prototype is the one its Python caller declares with ctypes).
# Both read the same `&ParaDRAM` namelist: chainSize (accepted states; about 3 proposals per
# state here), randomSeed (1000 + pair, the same on both sides), startPointVec = 0,
# delayedRejectionCount = 1, adaptiveUpdatePeriod = 40 (4 d), scaleFactor = "gelman",
# outputRealPrecision = 8 (ParaDRAM's default; herd's is 17), chainFileFormat "compact" (text)
# or "binary"; everything else at each side's defaults (so herd also writes its .h5 and HTML
# report, ParaDRAM its restart file).
#
# Per run, interleaved herd / ParaDRAM for `pairs` pairs: whole-process wall, CPU (user + sys)
# and peak RSS (/usr/bin/time), proposals and accepted states (each report's
# stats.numFuncCall.acceptedRejected / .accepted), log-density calls (counted by the program),
# and the minimum over the 10 coordinates of the bulk ESS that herd-diagnose computes from each
# side's chain file (binary chains are first converted to ParaDRAM's text layout by
# paradram_bench_tools.py; the diagnosis is not timed). Prints Markdown tables (min / median /
# max, ratios herd / ParaDRAM of the medians) and keeps, for the largest size and each chain
# format, herd's `== time per phase ==` table of the last pair. Benchmark only: CI never runs it.
#
# Usage: bench_vs_paradram.sh <herd build dir> [chain sizes="30000 300000"] [pairs=3]
#                             [formats="compact binary"]
#   e.g. bench/mcmc/bench_vs_paradram.sh build "30000 300000" 5
# Needs: <build>/libherd.so and <build>/apps/herd-diagnose (ninja herd_shared herd-diagnose),
# cc, /usr/bin/time, network access for the first bench/peer-venv call.
# Environment: HERD_BENCH_OUT  folder for the JSON lines, logs and phase table (default: a
#                              temporary folder, printed; runs are deleted after measuring)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: bench_vs_paradram.sh <herd build dir> [sizes] [pairs] [formats]}" && pwd)
sizes=${2:-30000 300000}; pairs=${3:-3}; formats=${4:-compact binary}
diagnose=$build/apps/herd-diagnose
[ -e "$build/libherd.so" ] || { echo "bench_vs_paradram: $build/libherd.so missing (ninja herd_shared)" >&2; exit 2; }
[ -x "$diagnose" ] || { echo "bench_vs_paradram: $diagnose missing (ninja herd-diagnose)" >&2; exit 2; }

py=$("$here/../peer-venv" paramonte)
# The package's folder without importing it: paramonte's first import in a fresh venv prints an
# 83-line banner on stdout (its dependency check), which would end up in the path.
pmlib=$("$py" -c 'import importlib.util, os; d = importlib.util.find_spec("paramonte").submodule_search_locations[0]; print(os.path.join(d, "lib", "x64", "gnu"))')
pmso=libparamonte_python_linux_x64_gnu_release_shared_heap.so
[ -e "$pmlib/$pmso" ] || { echo "bench_vs_paradram: $pmlib/$pmso missing" >&2; exit 2; }
tools=$here/paradram_bench_tools.py

out=${HERD_BENCH_OUT:-$(mktemp -d /tmp/bench_vs_paradram.XXXXXX)}
mkdir -p "$out"; out=$(cd "$out" && pwd)
echo "bench_vs_paradram: results in $out; $("$py" -c 'import paramonte as p; print(p.version.interface.get(), "/", p.version.kernel.get())' 2>/dev/null | tail -n 1 || echo 'paramonte version unknown')" >&2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; cd "$work"
cc -O2 -o herd.exe "$here/paradram_gauss10.c" -L"$build" -lherd -Wl,-rpath,"$build"
cc -O2 -o paradram.exe "$here/paradram_gauss10.c" -L"$pmlib" -l:$pmso -Wl,-rpath,"$pmlib"

results=$out/runs.jsonl; : > "$results"
largest=$(tr ' ' '\n' <<< "$sizes" | sort -g | tail -1)
for size in $sizes; do
  for fmt in $formats; do
    for pair in $(seq "$pairs"); do
      for side in herd paradram; do
        rm -rf run; mkdir run
        cat > run/input.nml <<EOT
&ParaDRAM
    outputFileName = "./run/out"
    chainSize = $size
    randomSeed = $((1000 + pair))
    startPointVec = 10*0.0
    delayedRejectionCount = 1
    adaptiveUpdatePeriod = 40
    scaleFactor = "gelman"
    outputRealPrecision = 8
    chainFileFormat = "$fmt"
/
EOT
        tag=$side-$size-$fmt-$pair
        if ! /usr/bin/time -f "%e %U %S %M" -o run/time.txt ./$side.exe run/input.nml > "$out/$tag.log" 2> run/err.txt; then
          cat run/err.txt >&2; echo "bench_vs_paradram: $tag failed (log: $out/$tag.log)" >&2; exit 1
        fi
        cp run/err.txt "$out/$tag.err"
        if [ $side = herd ]; then
          report=run/out_report.txt; chain=run/out_chain; kind=herd
          if [ "$size" = "$largest" ]; then
            sed -n '/^== time per phase/,/^total/p' "$report" > "$out/herd_phases_${size}_$fmt.txt"
          fi
        else
          report=run/out_process_1_report.txt; chain=run/out_process_1_chain; kind=paradram
        fi
        if [ "$fmt" = binary ]; then
          "$py" "$tools" chain2txt $kind "$chain.bin" run/chain_as_text.txt; chain=run/chain_as_text.txt
        else
          chain=$chain.txt
        fi
        "$diagnose" --json "$chain" > run/diag.json
        "$py" "$tools" record $side "$size" "$fmt" "$pair" "$report" run/time.txt run/err.txt run/diag.json | tee -a "$results" >&2
      done
    done
  done
done
"$py" "$tools" summary "$results"
for f in "$out"/herd_phases_*.txt; do [ -e "$f" ] && { echo; echo "herd, $(basename "$f" .txt):"; cat "$f"; }; done
echo; echo "bench_vs_paradram: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
