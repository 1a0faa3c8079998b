#!/usr/bin/env bash
# The SmolLM2-135M-Instruct run behind the "Second backbone" section of lab/EXPERIMENTS.md: one quickstart (self-distill
# through its chat template, train, export int8, calibrate, bench incl. the standalone drafter and the official
# engine), then its numbers (no weights) into lab/results/smollm2-135m; re-render the page with lab/scripts/gemma_results.sh's
# last line (`python lab/results_page.py lab/results/gemma3-270m --auto` picks the sibling run up).
set -euo pipefail
RUN=${RUN:-$HOME/.cache/mtplite/quickstart/smollm2-135m}
mtplite quickstart --backbone smollm2-135m --dir "$RUN" --standalone --budget-minutes "${BUDGET:-70}" "$@"
R=lab/results/smollm2-135m
mkdir -p "$R/head"
cp "$RUN/bench.json" "$RUN/bench.png" "$R/"
cp "$RUN/head/head.json" "$R/head/"
cp "$RUN/bundle-int8-h4/android/manifest.json" "$R/manifest.json"
