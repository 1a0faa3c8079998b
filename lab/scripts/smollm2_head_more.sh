#!/usr/bin/env bash
# The SmolLM2-135M-Instruct head of lab/results/smollm2-135m-more, as it was built across sessions 16-20 on the 2-core
# CPU box (each stage ran in its own session; the chain has not been rerun end to end in one go). Stages are
# budget-bound, so a rerun on another machine trains a similar head, not the same bytes. On this box: the quickstart
# ~50 min (its distillation included), program requests 2.6 min and corpus prompts 2,304-6,303 21 min of distillation
# (bf16), training 24 + 21 + 24 min, export + calibrate + bench + same_cycles ~10 min.
#   lab/scripts/smollm2_head_more.sh
set -euo pipefail
E=$HOME/.cache/mtplite/experiments
RUN=$HOME/.cache/mtplite/quickstart/smollm2-135m
COMMON=(--backbone smollm2-135m --copy-heads 2 --max-new 96 --data-share 0)
# 1. the echo head (session 16): 4,608 rows (corpus + echo prompts) in a fresh cache, trained within the quickstart
BUDGET=50 lab/scripts/smollm2_results.sh --copy-heads 2 --standalone-minutes 6 --echo 8000
# 2. fine-tuned with the context draft space on the same rows (session 18; the cache held only those)
mtplite train "${COMMON[@]}" --out "$E/smollm2-ctxT/head" --all-cached --init-head "$RUN/head" --context 128 \
  --budget-minutes 24
# 3. more data and a fine-tune on every cached row after each: 600 program requests (session 18), then corpus
#    prompts up to 6,304 (session 20; the cache then held 8,696 rows, 554k generated tokens). The first head's
#    held-out templates stay held out; the last run is under one epoch in its 20 min.
distill() {  # distill(PYTHON_EXPR_FOR_PROMPTS): self-distil those prompts into the backbone's cache (bf16)
  python - "$1" <<'PY'
import sys
import torch
from mtplite.data import program_prompts, training_prompts
from mtplite.model.load import load_backbone
from mtplite.paths import cache_dir
from mtplite.train.distill import distill
from mtplite.train.train import distill_batch
bb = load_backbone("smollm2-135m")
bb.model.to(torch.bfloat16)
path = cache_dir() / "distill" / f"{bb.fingerprint}-n96.jsonl"
distill(bb, eval(sys.argv[1]), path, max_new=96, batch=distill_batch(bb), dtype=torch.bfloat16)
PY
}
distill "program_prompts(seed=0)[:600]"
mtplite train "${COMMON[@]}" --out "$E/smollm2-prog/head" --all-cached --init-head "$E/smollm2-ctxT/head" \
  --context 128 --budget-minutes 20
distill "training_prompts(seed=0, limit=6304)"
mtplite train "${COMMON[@]}" --out "$E/smollm2-more/head" --prompt-limit 6304 --all-cached --init-head "$E/smollm2-prog/head" \
  --context 128 --epochs 1 --budget-minutes 20
# 4. int8 export, then lab/scripts/measure_bundle.sh (calibrate, bench, same cycles, draft table); numbers into lab/results/smollm2-135m-more and lab/EXPERIMENTS.md
R=lab/results/smollm2-135m-more
mkdir -p "$R/head"
[ -f "$E/smollm2-more/bundle-int8/android/manifest.json" ] || mtplite export --backbone smollm2-135m \
  --head "$E/smollm2-more/head" --out "$E/smollm2-more/bundle-int8" --quant int8
lab/scripts/measure_bundle.sh "$E/smollm2-more/bundle-int8" "$R" plain,mtp,mtp+ctx,lookup,hybrid+ctx,mtp+ctx+gate,hybrid+ctx+gate
cp "$E/smollm2-more/head/head.json" "$R/head/head.json"
python lab/results_page.py lab/results/gemma3-270m --out lab/EXPERIMENTS.md --auto
