"""Spec-vs-plain token mismatches of the torch reference per precision, and what the exact mode costs.

Plain greedy decodes one token per pass; MTP verifies K+1 tokens per pass. In float32 the two shapes give the same
argmax; in bfloat16 the batched rows round differently and near-tie argmaxes flip. Exact mode runs plain steps as
row 0 of a K+1-row pass (mtplite.model.generate.torch_steps(exact=True)), so both come from the same kernels.

  python lab/scripts/torch_mismatch.py --backbone gemma3-270m --head HEAD_DIR [--limit 16] [--max-new 48] [--json out]
"""
import argparse
import json
import sys
import time

import torch

from mtplite.errors import run_main
from mtplite.export.bundle import head_fingerprint
from mtplite.model import generate as G
from mtplite.model.head import load_head
from mtplite.model.load import load_backbone
from mtplite.paths import write_text_atomic
from mtplite.data.benchmark import default_prompts, load_prompts
from mtplite.model.load import format_prompt


def measure(bb, head, prompts, dtype, max_new, cache=512):
    bb.model.to(dtype)
    head.to(dtype)
    runs = {"plain": [], "mtp": [], "plain_exact": [], "mtp_exact": []}
    secs = dict.fromkeys(runs, 0.0)
    for p in prompts:
        ids = format_prompt(bb, p["prompt"])
        for name in runs:
            exact, K = name.endswith("_exact"), (0 if name.startswith("plain") else head.c.K)
            t = time.perf_counter()
            r = G.run(ids, G.torch_steps(bb, head, cache, dtype=dtype, exact=exact), max_new_tokens=max_new,
                      eos_ids=set(bb.eos_ids), K=K, cache_len=cache)
            secs[name] += time.perf_counter() - t
            runs[name].append(r["tokens"])
    n = len(prompts)
    return {"dtype": str(dtype).removeprefix("torch."), "prompts": n,
            "mtp_vs_plain_mismatches": sum(a != b for a, b in zip(runs["mtp"], runs["plain"])),
            "exact_mtp_vs_exact_plain_mismatches": sum(a != b for a, b in zip(runs["mtp_exact"], runs["plain_exact"])),
            "exact_plain_vs_plain_mismatches": sum(a != b for a, b in zip(runs["plain_exact"], runs["plain"])),
            "plain_exact_cost": secs["plain_exact"] / secs["plain"], "seconds": secs}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbone", default="gemma3-270m")
    ap.add_argument("--head", required=True)
    ap.add_argument("--prompts")
    ap.add_argument("--limit", type=int, default=16)
    ap.add_argument("--max-new", type=int, default=48)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.manual_seed(0)
    bb = load_backbone(a.backbone)
    head, _ = load_head(a.head, bb.fingerprint)
    fp = head_fingerprint(head)  # before measure() casts it to the dtypes under test
    prompts = load_prompts(a.prompts or default_prompts())
    prompts = prompts[:: max(1, len(prompts) // a.limit)][: a.limit]  # spread over the task types
    rows = []
    for d in a.dtypes.split(","):
        rows.append(measure(bb, head, prompts, getattr(torch, d), a.max_new))
        print(json.dumps(rows[-1]), flush=True)
    out = {"backbone": a.backbone, "head_fingerprint": fp,
           "max_new_tokens": a.max_new, "K": head.c.K, "rows": rows}
    if a.json:
        write_text_atomic(a.json, json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(run_main(main, "torch_mismatch.py"))
