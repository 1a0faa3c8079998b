#!/usr/bin/env bash
# Reproduce lab/EXPERIMENTS.md on this machine (Gemma 3 270M). Everything Gemma-derived stays in the cache dir (Gemma
# Terms); only the numbers land in the repo. Steps:
#  1. quickstart --standalone: distill, train the head + the standalone baseline, export int8, calibrate
#  2. lab/scripts/gemma_quant.sh: float/int4 exports, QAT head, one bench over all bundles, quant-report, probes
#  3. engine check on the float bundle, soak, reliability tests; optionally (TIMED=1) a quickstart from an empty cache
#  4. render the page from the JSON
set -euo pipefail
RUN=${RUN:-$HOME/.cache/mtplite/quickstart/gemma3-270m}
export W=${W:-$HOME/.cache/mtplite/results-run}
mtplite quickstart --backbone gemma3-270m --dir "$RUN" --standalone "$@"
RUN="$RUN" lab/scripts/gemma_quant.sh
mtplite bench "$W/float" --modes plain,mtp --json "$W/bench_float_engine.json"
mtplite soak "$RUN/bundle-int8-h4" --n 200 --threads 1 --json "$W/soak-gemma-int8.json"
python lab/scripts/reliability_report.py --json "$W/reliability.json"
if [ "${TIMED:-0}" = 1 ]; then
  FRESH=$(mktemp -d)
  MTPLITE_CACHE="$FRESH" mtplite quickstart
  cp "$FRESH/quickstart/gemma3-270m/bench.json" "$W/fresh_quickstart_bench.json"
  FRESH=$(mktemp -d)
  MTPLITE_CACHE="$FRESH" mtplite quickstart --quick
  cp "$FRESH/quickstart/gemma3-270m-quick/bench.json" "$W/fresh_quickstart_quick_bench.json"
fi
# numbers only (no weights, no graphs) go into the repo; the page renders from them
R=lab/results/gemma3-270m
mkdir -p "$R/head"
cp "$W"/*.json "$W/bench.png" "$R/"
cp "$RUN/head/head.json" "$R/head/"
cp "$RUN/bundle-int8-h4/android/manifest.json" "$R/manifest.json"
python lab/results_page.py "$R" --out lab/EXPERIMENTS.md --auto  # every known JSON in $R + sibling backbone runs
