"""How far does the held-out number flatter? Teacher-forced accept length (K drafts, as training's held-out split is
scored) per task on (a) held-out rows of the training corpus (whole templates never trained on) and (b) the
benchmark prompts' own greedy rows (no template shared with training), optionally (c) free-running in the torch
reference loop on the benchmark prompts. (a) - (b) is what the corpus's style gives away; (b) - (c) what the
recurrence costs.

  python lab/scripts/generalization_gap.py --backbone gemma3-270m --head HEAD_DIR --data DISTILL.jsonl [--free-running]
      [--rows 256] [--json out.json]
"""
import argparse
import json
import sys
import time
from pathlib import Path

import torch

from mtplite.errors import UserError, run_main
from mtplite.model import generate as G
from mtplite.model.head import load_head
from mtplite.model.load import load_backbone
from mtplite.paths import write_text_atomic
from mtplite.data.benchmark import default_prompts, load_prompts
from mtplite.train.distill import benchmark_rows
from mtplite.model.load import format_prompt
from mtplite.train.train import accepted_runs, held_out_rows
from mtplite.data.splits import split_of


def per_task(head, bb, rows, K):
    """Teacher-forced τ per task and over all rows (one backbone pass per row: "all" pools the tasks' runs)."""
    runs = {t: accepted_runs(head, bb, [r for r in rows if r["task"] == t], K) for t in sorted({r["task"] for r in rows})}
    runs["all"] = torch.cat(list(runs.values()))
    return {t: round(float(1 + a.mean()) if len(a) else 0.0, 3) for t, a in runs.items()}


@torch.no_grad()
def free_running(bb, head, prompts, K, max_new):
    """τ of the torch reference draft/verify loop, summed over prompts per task (tokens per verify, bonus included),
    with the context draft space where the head trained with it."""
    acc, cyc = {}, {}
    for p in prompts:
        res = G.run(format_prompt(bb, p["prompt"]), G.torch_steps(bb, head, 512, context=head.c.context), max_new_tokens=max_new,
                    eos_ids=set(bb.eos_ids), K=K, cache_len=512)
        s = G.summary(res, K)
        for t in (p["task"], "all"):
            acc[t] = acc.get(t, 0) + s["accepted"] + s["cycles"]
            cyc[t] = cyc.get(t, 0) + s["cycles"]
    return {t: round(acc[t] / max(cyc[t], 1), 3) for t in sorted(acc)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbone", required=True)
    ap.add_argument("--head", required=True)
    ap.add_argument("--data", required=True, help="the distillation cache JSONL the head was trained from")
    ap.add_argument("--rows", type=int, default=256, help="held-out rows to score")
    ap.add_argument("--max-new", type=int, default=64, help="greedy tokens per benchmark prompt (the bench's 64)")
    ap.add_argument("--free-running", action="store_true", help="also run the torch reference loop (slower)")
    ap.add_argument("--json")
    a = ap.parse_args()
    if not Path(a.data).is_file():
        raise UserError(f"--data {a.data}: no such distillation cache (a .jsonl under <cache>/distill)")
    if a.rows < 1 or a.max_new < 1:
        raise UserError("--rows and --max-new must be at least 1")
    t0 = time.time()
    bb = load_backbone(a.backbone)
    head, meta = load_head(a.head, bb.fingerprint)
    K = head.c.K
    held = held_out_rows(a.data, **split_of(meta))  # this head's own held-out templates
    held = held[:: max(1, len(held) // a.rows)][: a.rows]  # spread over the cache, not its first templates only
    if not held:
        raise UserError(f"--data {a.data}: no held-out rows of this corpus in it; pass the cache the head trained on")
    bench = load_prompts(default_prompts())  # the free-running loop takes the prompts themselves
    bench_rows = benchmark_rows(bb, a.max_new)
    res = {"backbone": a.backbone, "head": a.head, "K": K, "train_generated_tokens": meta.get("train_generated_tokens"),
           "held_out_rows": len(held), "benchmark_prompts": len(bench_rows), "max_new_tokens": a.max_new,
           "teacher_forced": {"held_out": per_task(head, bb, held, K), "benchmark": per_task(head, bb, bench_rows, K)}}
    if a.free_running:
        res["free_running_torch_float32"] = free_running(bb, head, bench, K, a.max_new)
    res["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(res, indent=1))
    if a.json:
        write_text_atomic(a.json, json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.exit(run_main(main, "generalization_gap.py"))
