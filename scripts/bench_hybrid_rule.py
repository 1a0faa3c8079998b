"""Hybrid's shortest lookup match (HYBRID_MIN_NGRAM) by speed, side by side in one run: for every prompt, lookup
alone, then hybrid and hybrid+gate with lookup taking matches of >= 1 token and of >= 2 tokens (shorter ones go to the
head). The copy probe ranks the drafters by first-draft accuracy; this ranks the rules by tokens per second, which
also pays for the head's drafting time.

  python scripts/bench_hybrid_rule.py BUNDLE [--prompts tasks.jsonl] [--json out.json]
"""
import argparse
import json
import platform
import sys
from collections import defaultdict

import mtplite.runtime.lookup as lookup_mod
from mtplite.errors import run_main
from mtplite.paths import write_text_atomic
from mtplite.runtime.bench import aggregate, default_prompts, load_prompts, run_mode
from mtplite.runtime.cli import encode
from mtplite.runtime.litert import Bundle, load_tokenizer

RUNS = [("lookup", "lookup", 1), ("hybrid", "hybrid>=1", 1), ("hybrid", "hybrid>=2", 2),
        ("hybrid+gate", "hybrid+gate>=1", 1), ("hybrid+gate", "hybrid+gate>=2", 2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--prompts", default=None)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    b = Bundle(a.bundle, threads=a.threads, mtp=True)
    tok = load_tokenizer(a.bundle)
    eos = set(b.man["eos_ids"])
    prompts = load_prompts(a.prompts or default_prompts())
    per = defaultdict(list)
    for p in prompts:
        ids = encode(tok, b.man, p["prompt"])
        if len(ids) + 1 >= b.C:
            continue
        for mode, name, n in RUNS:
            lookup_mod.HYBRID_MIN_NGRAM = n  # read by lookup_steps at each generation
            per[name].append(run_mode(b, ids, b.K, mode, a.max_new_tokens, eos))
    out = {name: aggregate(rs) for name, rs in per.items()}  # accepted_by_source included
    base = out["lookup"]["decode_tokens_per_s"]
    for name, r in out.items():
        r["vs_lookup"] = r["decode_tokens_per_s"] / base
        by = ", ".join(f"{k} {v['accepted'] / max(v['cycles'], 1):.2f} acc/cycle x {v['cycles']}"
                       for k, v in r["accepted_by_source"].items())
        print(f"{name:16s} {r['decode_tokens_per_s']:6.1f} tok/s  {r['vs_lookup']:.3f}x lookup  "
              f"tokens/pass {r['tokens_per_pass']:.2f}  draft {r['draft_ms_per_cycle']:.1f} ms/cycle  ({by})")
    if a.json:
        write_text_atomic(a.json, json.dumps({"bundle": a.bundle, "K": b.K, "min_prob": b.calibrated_min_prob(),
                                              "prompts": len(per["lookup"]), "threads": a.threads,
                                              "machine": platform.processor() or platform.machine(),
                                              "results": out}, indent=1))


if __name__ == "__main__":
    sys.exit(run_main(main, "bench_hybrid_rule.py"))
