"""Hybrid's shortest lookup match by speed, side by side in one run: for every prompt, lookup alone, the head alone,
then hybrid with lookup taking matches of >= 1, 2 or 3 tokens (shorter ones go to the head), with the contract
drafter and with drafter_ctx where the bundle has it. The copy probe ranks the drafters by first-draft accuracy; this
ranks the rules by tokens per second, which also pays for the head's drafting time. `mtplite calibrate` makes the
same choice per device from measured step costs (settings.hybrid_min_ngram).

  python lab/probes/bench_hybrid_rule.py BUNDLE [--prompts tasks.jsonl] [--gate] [--ctx-only] [--json out.json]
"""
import argparse
import json
import platform
import sys
from collections import defaultdict

from mtplite.errors import run_main
from mtplite.paths import write_text_atomic
from mtplite.runtime.bench import aggregate, run_mode
from mtplite.data.benchmark import default_prompts, load_prompts
from mtplite.runtime.litert import encode
from mtplite.runtime.litert import Bundle, load_tokenizer


def runs(ctx, gate, contract=True):
    """(mode, name, min_ngram) per run: lookup, then per drafter the head alone and hybrid per shortest match."""
    g = "+gate" if gate else ""
    out = [("lookup", "lookup", None)]
    for base in (["mtp"] if contract else []) + (["mtp+ctx"] if ctx else []):
        hyb = base.replace("mtp", "hybrid")
        out += [(base + g, base + g, None)] + [(hyb + g, f"{hyb}{g}>={n}", n) for n in (1, 2, 3)]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--prompts", default=None)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gate", action="store_true", help="the head behind its calibrated gate (settings.min_prob), "
                                                        "alone and in hybrid, as generate and the app run it")
    ap.add_argument("--ctx-only", action="store_true", help="only the drafter generate runs (drafter_ctx)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    b = Bundle(a.bundle, threads=a.threads, mtp=True, context=True)
    ctx = "drafter_ctx" in b.models
    todo = runs(ctx, a.gate, contract=not (a.ctx_only and ctx))
    tok = load_tokenizer(a.bundle)
    eos = set(b.man["eos_ids"])
    prompts = load_prompts(a.prompts or default_prompts())
    per, per_task = defaultdict(list), defaultdict(lambda: defaultdict(list))
    for p in prompts:
        ids = encode(tok, b.man, p["prompt"])
        if len(ids) + 1 >= b.C:
            continue
        for mode, name, n in todo:
            per[name].append(run_mode(b, ids, b.K, mode, a.max_new_tokens, eos, min_ngram=n))
            per_task[name][p["task"]].append(per[name][-1])
    out = {name: aggregate(rs) for name, rs in per.items()}  # accepted_by_source included
    base = out["lookup"]["decode_tokens_per_s"]
    for name, r in out.items():
        r["vs_lookup"] = r["decode_tokens_per_s"] / base
        by = ", ".join(f"{k} {v['accepted'] / max(v['cycles'], 1):.2f} acc/cycle x {v['cycles']}"
                       for k, v in r["accepted_by_source"].items())
        print(f"{name:16s} {r['decode_tokens_per_s']:6.1f} tok/s  {r['vs_lookup']:.3f}x lookup  τ {r['accept_length']:.2f}  "
              f"tokens/pass {r['tokens_per_pass']:.2f}  draft {r['draft_ms_per_cycle']:.1f} ms/cycle  ({by})")
    if a.json:
        write_text_atomic(a.json, json.dumps({"bundle": a.bundle, "K": b.K, "min_prob": b.calibrated_min_prob(), "gated": a.gate,
                                              "prompts": len(per["lookup"]), "threads": a.threads,
                                              "machine": platform.processor() or platform.machine(),
                                              "results": out,
                                              "accept_length_by_task": {name: {t: aggregate(rs)["accept_length"]
                                                                               for t, rs in sorted(ts.items())}
                                                                        for name, ts in per_task.items()}}, indent=1))


if __name__ == "__main__":
    sys.exit(run_main(main, "bench_hybrid_rule.py"))
