#!/usr/bin/env bash
# The quantization rows of BENCHMARKS.md on Gemma 3 270M: one float-trained head exported float / int8 / int4-b32,
# the same head fine-tuned against the int8 backbone (`train --target-quant int8`), then one quant-report run over
# all of them and the fake-quant match measurement. Artifacts stay in the cache dir (Gemma Terms).
set -euo pipefail
HEAD=${HEAD:?a trained Gemma head dir, e.g. ~/.cache/mtplite/quickstart/gemma3-270m/head}
INT8=${INT8:?the int8 bundle exported from HEAD}
W=${W:-$HOME/.cache/mtplite/quant-runs}
QAT_MIN=${QAT_MIN:-20}
mkdir -p "$W"
[ -f "$W/float/android/manifest.json" ] || mtplite export --backbone gemma3-270m --head "$HEAD" --out "$W/float"
[ -f "$W/int4/android/manifest.json" ] || mtplite quantize "$W/float" --recipe int4-b32 --out "$W/int4"
[ -f "$W/qat-head/head.json" ] || mtplite train --backbone gemma3-270m --out "$W/qat-head" --target-quant int8 \
  --init-head "$HEAD" --bf16 --budget-minutes "$QAT_MIN" --max-new 96 --batch 16 --epochs 3 --lr 3e-4
[ -f "$W/qat-int8/android/manifest.json" ] || mtplite export --backbone gemma3-270m --head "$W/qat-head" \
  --out "$W/qat-int8" --quant int8
mtplite quant-report "$W/float" "$INT8" "$W/qat-int8" "$W/int4" --json "$W/quant_report.json"
python scripts/fakequant_match.py --backbone gemma3-270m --bundle "$INT8" --json "$W/fakequant_int8.json"
python scripts/fakequant_match.py --backbone gemma3-270m --bundle "$W/int4" --json "$W/fakequant_int4.json"
