#!/usr/bin/env bash
# The full Gemma 3 270M results run behind lab/EXPERIMENTS.md, after `mtplite quickstart --standalone` trained a head:
# the head exported float / int8 / int4-b32, the same head fine-tuned against the int8 backbone
# (`train --target-quant int8 --init-head`), one `bench` over all of them side by side (plain / MTP / lookup /
# hybrid / standalone / official engine on int8, plain + MTP on the others), one quant-report, the fake-quant match
# and the copy probe. Artifacts stay in the cache dir (Gemma Terms); only numbers land in the repo.
set -euo pipefail
RUN=${RUN:?a quickstart dir with head/ and bundle-int8-h4/, e.g. ~/.cache/mtplite/quickstart/gemma3-270m}
W=${W:-$HOME/.cache/mtplite/results-run}
QAT_MIN=${QAT_MIN:-25}
mkdir -p "$W"
ln -sfn "$RUN/head" "$W/head"
INT8="$RUN/bundle-int8-h4"  # quickstart's default recipe: int8, the head int4-b32
[ -f "$W/float/android/manifest.json" ] || mtplite export --backbone gemma3-270m --head "$RUN/head" --out "$W/float"
[ -f "$W/int4/android/manifest.json" ] || mtplite quantize "$W/float" --recipe int4-b32 --out "$W/int4"
[ -f "$W/qat-head/head.json" ] || mtplite train --backbone gemma3-270m --out "$W/qat-head" --target-quant int8 \
  --init-head "$RUN/head" --budget-minutes "$QAT_MIN" --data-share 0.6 --max-new 96 --batch 16 --epochs 3 --lr 3e-4
[ -f "$W/qat-int8/android/manifest.json" ] || mtplite export --backbone gemma3-270m --head "$W/qat-head" \
  --out "$W/qat-int8" --quant int8
mtplite calibrate "$INT8"  # K and the head's confidence gate for this CPU (held-out training templates)
mtplite bench "$INT8" --also float="$W/float" --also int4="$W/int4" --also qat_int8="$W/qat-int8" \
  --json "$W/bench.json" --plot "$W/bench.png"
mtplite quant-report "$W/float" "$INT8" "$W/qat-int8" "$W/int4" --json "$W/quant_report.json"
python lab/scripts/fakequant_match.py --backbone gemma3-270m --bundle "$INT8" --json "$W/fakequant_int8.json"
python lab/scripts/fakequant_match.py --backbone gemma3-270m --bundle "$W/int4" --json "$W/fakequant_int4.json"
python lab/scripts/copy_probe.py --backbone gemma3-270m --head "$RUN/head" \
  --data "$HOME/.cache/mtplite/distill/$(python -c 'import json,sys;print(json.load(open(sys.argv[1]))["backbone_fingerprint"])' "$RUN/head/head.json")-n96.jsonl" \
  --json "$W/copy_probe.json"
# exactness per precision: LiteRT --exact on the quantized bundles, torch float32 / bf16 with and without exact mode
mtplite bench "$INT8" --exact --modes plain,mtp --max-new-tokens 48 --no-engine --json "$W/bench_exact_int8.json"
mtplite bench "$W/int4" --exact --modes plain,mtp --max-new-tokens 48 --no-engine --json "$W/bench_exact_int4.json"
python lab/scripts/torch_mismatch.py --backbone gemma3-270m --head "$RUN/head" --json "$W/torch_mismatch.json"
