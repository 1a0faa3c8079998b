"""How much of the benchmark's greedy text can a draft vocabulary of N ids draft at all? The share of the benchmark
prompts' greedy tokens (and of the copyable ones, where prompt lookup's first draft is right) inside the first N ids
of the frequency ranking training uses (train.draft_vocab over a distillation cache), per task, for several N; and
how many of the benchmark's tokens occur anywhere in the cache. A label outside the draft space caps every draft
that reaches it, whatever the head learns.

  python lab/probes/vocab_coverage.py --backbone gemma3-270m --data DISTILL.jsonl [--sizes 4096,8192,16384,32768]
      [--max-new 64] [--json out.json]
"""
import argparse
import json
import sys
import time
from pathlib import Path

from mtplite.errors import UserError, run_main
from mtplite.model.load import load_backbone
from mtplite.paths import write_text_atomic
from mtplite.runtime.lookup import lookup
from mtplite.train.distill import benchmark_rows, load_rows
from mtplite.train.train import draft_vocab


def coverage(rows, ids):
    """(share of generated tokens in ids, share of the copyable ones in ids) over rows."""
    gen = cop = gen_in = cop_in = 0
    for r in rows:
        t = r["tokens"]
        for j in range(r["prompt_len"], len(t)):
            lk = lookup(t[:j], 1)
            gen += 1
            gen_in += t[j] in ids
            if lk is not None and lk[0] == t[j]:
                cop += 1
                cop_in += t[j] in ids
    return {"generated": round(gen_in / max(gen, 1), 4), "copyable": round(cop_in / max(cop, 1), 4),
            "tokens": gen, "copyable_tokens": cop}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbone", required=True)
    ap.add_argument("--data", required=True, help="the distillation cache JSONL a head trains from")
    ap.add_argument("--sizes", default="4096,8192,16384,32768")
    ap.add_argument("--max-new", type=int, default=64, help="greedy tokens per benchmark prompt (the bench's 64)")
    ap.add_argument("--json")
    a = ap.parse_args()
    if not Path(a.data).is_file():
        raise UserError(f"--data {a.data}: no such distillation cache (a .jsonl under <cache>/distill)")
    try:
        sizes = sorted({int(x) for x in a.sizes.split(",")})
    except ValueError:
        sizes = []
    if not sizes or sizes[0] < 1 or a.max_new < 1:
        raise UserError(f"--sizes {a.sizes} / --max-new {a.max_new}: give positive sizes (e.g. 4096,8192) and tokens")
    t0 = time.time()
    bb = load_backbone(a.backbone)
    rows = list(load_rows(a.data).values())
    if not rows:
        raise UserError(f"--data {a.data}: the cache holds no rows")
    rank = draft_vocab(rows, bb, max(sizes))
    seen = {t for r in rows for t in r["tokens"]}
    bench = benchmark_rows(bb, a.max_new)
    tasks = sorted({r["task"] for r in bench})
    gen = [t for r in bench for t in r["tokens"][r["prompt_len"]:]]
    res = {"backbone": a.backbone, "data": a.data, "cache_rows": len(rows), "distinct_tokens_in_cache": len(seen),
           "distinct_tokens_in_continuations": len({t for r in rows for t in r["tokens"][r["prompt_len"]:]}),
           "benchmark_tokens_seen_in_cache": round(sum(t in seen for t in gen) / max(len(gen), 1), 4),
           "by_size": {n: {t: coverage([r for r in bench if t in ("all", r["task"])], set(rank[:n]))
                           for t in tasks + ["all"]} for n in sizes}}
    res["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(res, indent=1))
    if a.json:
        write_text_atomic(a.json, json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.exit(run_main(main, "vocab_coverage.py"))
