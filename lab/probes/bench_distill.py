"""Self-distillation speed, side by side in one run: the export graph's own path (one-hot KV writes, MKL LM head)
vs `fast_decode` (in-place KV writes, oneDNN-packed LM head), at several batch sizes, modes interleaved per round
on the same prompts. Also checks both paths give the same greedy tokens at each batch size.

  python lab/probes/bench_distill.py [--backbone gemma3-270m] [--prompts 256] [--new 32] [--batches 64,128]
      [--rounds 2] [--json lab/results/micro/distill_speed_gemma.json]
"""
import argparse
import contextlib
import json
import platform
import sys
import time

import torch

from mtplite.data import training_prompts
from mtplite.errors import UserError, run_main
from mtplite.model.decoder import fast_decode
from mtplite.model.load import load_backbone
from mtplite.paths import write_text_atomic
from mtplite.train import distill as D


def run(bb, seqs, batch, new, fast):
    t0, outs = time.perf_counter(), []
    with fast_decode(bb.model) if fast else contextlib.nullcontext():  # entered once per run, as distill() does
        for i in range(0, len(seqs), batch):
            outs += D.greedy_batch(bb.model, seqs[i : i + batch], new, set(bb.eos_ids))
    return time.perf_counter() - t0, outs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbone", default="gemma3-270m")
    ap.add_argument("--prompts", type=int, default=256)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--batches", default="64,128")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    try:
        batches = [int(b) for b in a.batches.split(",")]
    except ValueError:
        raise UserError(f"--batches must be comma-separated integers, got '{a.batches}'")
    for name, v in (("--batches", min(batches)), ("--prompts", a.prompts), ("--new", a.new), ("--rounds", a.rounds)):
        if v < 1:
            raise UserError(f"{name} must be >= 1 (got {v})")
    torch.set_num_threads(a.threads)
    bb = load_backbone(a.backbone)
    # sorted like distill() sorts its windows, so padding is what a real run sees
    seqs = sorted((D.format_prompt(bb, p["prompt"]) for p in training_prompts(seed=7, limit=a.prompts)), key=len)
    times, ref, same = {}, {}, True
    for r in range(a.rounds):
        for batch in batches:
            for fast in (False, True):
                dt, outs = run(bb, seqs, batch, a.new, fast)
                key = f"{'fast' if fast else 'export-path'}/b{batch}"
                times.setdefault(key, []).append(dt)
                ref.setdefault(batch, outs)
                same &= outs == ref[batch]  # batch size itself may flip near-ties (padding, GEMM blocking)
                ntok = sum(map(len, outs))
                print(f"round {r} {key}: {dt:.1f} s, {ntok / dt:.1f} tokens/s", flush=True)
    ntok = sum(map(len, ref[batches[0]]))
    best = {k: min(v) for k, v in times.items()}
    base = best[f"export-path/b{batches[0]}"]
    out = {
        "backbone": a.backbone, "prompts": a.prompts, "new_tokens": a.new, "tokens": ntok, "threads": a.threads,
        "cpu": platform.processor() or platform.machine(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__, "seconds": times,
        "tokens_per_s": {k: ntok / v for k, v in best.items()},
        "speedup_vs_export_path_b%d" % batches[0]: {k: base / v for k, v in best.items()},
        "same_tokens_fast_vs_export_path": same,
    }
    print(json.dumps({k: out[k] for k in ("tokens_per_s", "speedup_vs_export_path_b%d" % batches[0],
                                         "same_tokens_fast_vs_export_path")}, indent=1))
    if a.json:
        write_text_atomic(a.json, json.dumps(out, indent=1) + "\n")
    if not same:
        print("warning: the paths gave different greedy tokens", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(run_main(main, "bench_distill.py"))
