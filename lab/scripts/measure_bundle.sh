#!/usr/bin/env bash
# The measurements every head's int8 bundle gets, into a results dir: calibrate, one bench of MODES (more bench
# arguments after them, e.g. --also NAME=DIR), the head and lookup on the same cycles (same_cycles.py), and every
# drafting rule on one exact-mode stream (draft_table.py; the table itself stays beside the bundle, only its replay
# lands in the repo), then the bundle's manifest. Used by gemma_experiment.sh and smollm2_head_more.sh.
#   lab/scripts/measure_bundle.sh BUNDLE RESULTS_DIR MODES [BENCH_ARGS ...]
set -euo pipefail
B=${1:?bundle dir}; R=${2:?results dir}; MODES=${3:?bench modes}
mkdir -p "$R"
mtplite calibrate "$B"
mtplite bench "$B" --modes "$MODES" "${@:4}" --no-engine --json "$R/bench.json"
python lab/scripts/same_cycles.py "$B" --json "$R/same_cycles.json"
python lab/scripts/draft_table.py "$B" --json "$(dirname "$B")/draft_table.json"
python lab/scripts/draft_table.py --replay "$(dirname "$B")/draft_table.json" --json "$R/draft_replay.json"
cp "$B/android/manifest.json" "$R/manifest.json"
