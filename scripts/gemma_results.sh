#!/usr/bin/env bash
# Reproduce BENCHMARKS.md on this machine: Gemma 3 270M, head + standalone baseline, int8 bundle, calibrate, bench.
# Everything Gemma-derived stays in the cache dir (Gemma Terms); only the numbers land in the repo.
set -euo pipefail
RUN=${RUN:-$HOME/.cache/mtplite/quickstart/gemma3-270m}
mtplite quickstart --backbone gemma3-270m --dir "$RUN" --standalone "$@"
python -m mtplite.results "$RUN" --out BENCHMARKS.md
