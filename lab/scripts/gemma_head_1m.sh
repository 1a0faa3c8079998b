#!/usr/bin/env bash
# The Gemma 3 270M head of lab/results/gemma3-270m/experiments/ctx-1m, as it was built across sessions 15-19 on the
# 2-core CPU box (each stage ran in its own session; the chain has not been rerun end to end in one go). Stages are
# budget-bound, so a rerun on another machine trains a similar head, not the same bytes. On this box: distillation
# ~83 min (bf16, batch 64), training 42 + 27 + 24 + 49 min, export + calibrate + bench ~9 min.
# The head and bundle stay in the cache dir (Gemma Terms); only numbers land in the repo.
#   lab/scripts/gemma_head_1m.sh
set -euo pipefail
E=$HOME/.cache/mtplite/experiments
COMMON=(--backbone gemma3-270m --copy-heads 2 --max-new 96 --dtype bfloat16 --data-share 0)
# 1. data: 2,600 corpus prompts + 2,600 echo prompts (framing the first pass's own text), then 2,000 program requests
#    and corpus prompts 2,600-7,999: 12,600 rows, ~1.21M generated tokens, one cache file per backbone fingerprint
python - <<'PY'
import torch
from mtplite.data import program_prompts, training_prompts
from mtplite.model.load import load_backbone
from mtplite.paths import cache_dir
from mtplite.train.distill import distill, distill_with_echo
from mtplite.train.train import distill_batch

bb = load_backbone("gemma3-270m")
bb.model.to(torch.bfloat16)
path = cache_dir() / "distill" / f"{bb.fingerprint}-n96.jsonl"
path.parent.mkdir(parents=True, exist_ok=True)
kw = dict(max_new=96, batch=distill_batch(bb), dtype=torch.bfloat16)
distill_with_echo(bb, training_prompts(seed=0, limit=2600), path, echo=2600, seed=0, **kw)
distill(bb, program_prompts(seed=0) + training_prompts(seed=0, limit=8000)[2600:], path, **kw)
PY
# 2. the head on the first 5,200 rows, then more steps, then with the context draft space (session 17)
mtplite train "${COMMON[@]}" --out "$E/echo/head" --prompt-limit 2600 --echo 2600 --budget-minutes 40
mtplite train "${COMMON[@]}" --out "$E/echo2/head" --prompt-limit 2600 --echo 2600 --init-head "$E/echo/head" \
  --budget-minutes 25
mtplite train "${COMMON[@]}" --out "$E/ctx/head" --prompt-limit 2600 --echo 2600 --init-head "$E/echo2/head" \
  --context 128 --budget-minutes 22
# 3. fine-tuned on every cached row (1.09M training tokens; the starting head's held-out templates stay held out)
mtplite train "${COMMON[@]}" --out "$E/ctx-1m/head" --prompt-limit 2600 --all-cached --init-head "$E/ctx/head" \
  --context 128 --epochs 1 --budget-minutes 45
# 4. int8 export, calibrate, bench, numbers into lab/results/gemma3-270m/experiments/ctx-1m and lab/EXPERIMENTS.md
lab/scripts/gemma_experiment.sh ctx-1m "$E/ctx-1m/head" -
