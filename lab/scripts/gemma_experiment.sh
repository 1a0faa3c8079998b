#!/usr/bin/env bash
# One head trained differently, measured against the page's int8 bundle in the same bench run, into
# lab/results/gemma3-270m/experiments/NAME (rendered by `python lab/results_page.py ... --auto`). The head and its bundle
# stay in the cache dir (Gemma Terms); only numbers land in the repo. A rerun redoes the bench only (delete
# $R/copy_probe.json or the cached bundle to redo those).
#   lab/scripts/gemma_experiment.sh NAME HEAD_DIR [PAGE_BUNDLE|-] [NAME2=BUNDLE2 ...]   (more bundles in the same bench;
#   "-": no page bundle, on a machine that has none cached; τ still compares across runs, speeds do not)
set -euo pipefail
NAME=${1:?experiment name}; HEAD=${2:?trained head dir}
PAGE=${3:-$HOME/.cache/mtplite/quickstart/gemma3-270m-run2/bundle-int8}
ALSO=()
[ "$PAGE" = "-" ] || ALSO=(--also page="$PAGE")
for x in "${@:4}"; do ALSO+=(--also "$x"); done
E_DIR=$HOME/.cache/mtplite/experiments/$NAME
R=lab/results/gemma3-270m/experiments/$NAME
mkdir -p "$E_DIR" "$R"
[ -f "$E_DIR/bundle-int8/android/manifest.json" ] || mtplite export --backbone gemma3-270m --head "$HEAD" \
  --out "$E_DIR/bundle-int8" --quant int8
lab/scripts/measure_bundle.sh "$E_DIR/bundle-int8" "$R" plain,mtp,mtp+ctx,lookup,hybrid,hybrid+ctx,mtp+ctx+gate,hybrid+ctx+gate \
  "${ALSO[@]}"
FP=$(python -c 'import json,sys;print(json.load(open(sys.argv[1]))["backbone_fingerprint"])' "$HEAD/head.json")
[ -f "$R/generalization_gap.json" ] || python lab/scripts/generalization_gap.py --backbone gemma3-270m --head "$HEAD" \
  --data "$HOME/.cache/mtplite/distill/$FP-n96.jsonl" --free-running --json "$R/generalization_gap.json"
[ -f "$R/copy_probe.json" ] || python lab/scripts/copy_probe.py --backbone gemma3-270m --head "$HEAD" \
  --data "$HOME/.cache/mtplite/distill/$FP-n96.jsonl" --json "$R/copy_probe.json"
cp "$HEAD/head.json" "$R/head.json"
python lab/results_page.py lab/results/gemma3-270m --out lab/EXPERIMENTS.md --auto
