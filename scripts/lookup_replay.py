"""Prompt lookup replayed on held-out self-distilled rows (templates never trained on): lookup's drafts depend only
on the text, so teacher forcing on the backbone's own greedy stream gives its exact τ. Compares lookup variants and
splits acceptance by the length of the n-gram lookup matched on (the evidence for hybrid's HYBRID_MIN_NGRAM).

  python scripts/lookup_replay.py --data ~/.cache/mtplite/distill/<fingerprint>-n96.jsonl [--rows 600] [--json out]
"""
import argparse
import json
import sys
from collections import Counter

from mtplite.errors import run_main
from mtplite.paths import write_text_atomic
from mtplite.runtime.lookup import accepted, lookup
from mtplite.train.train import held_out_rows


def cycled(history, k, max_ngram):
    """Variant: a continuation shorter than k is repeated whole (right for loops) instead of padding its last token."""
    d = lookup(history, k, max_ngram=max_ngram)
    if d is None:
        return None
    for n in range(min(max_ngram, len(history) - 1), 0, -1):
        if lookup(history, k, max_ngram=n, min_ngram=n) is not None:
            break
    tail = history[len(history) - n:]
    s = next(s for s in range(len(history) - n - 1, -1, -1) if history[s:s + n] == tail)
    cont = history[s + n:s + n + k]
    return (cont * k)[:k]


def replay(rows, draft, K=3):
    verifies = emitted = passes = toks = 0
    for r in rows:
        t, i = r["tokens"], r["prompt_len"] + 1  # the first generated token comes from prefill
        while i < len(t):
            d = draft(t[:i], K)
            a = accepted(d, t, i, K)
            e = 1 if d is None else min(a + 1, len(t) - i)
            verifies += d is not None
            emitted += e if d is not None else 0
            passes += 1
            toks += e
            i += e
    return {"tau": emitted / max(verifies, 1), "tokens_per_pass": toks / passes}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--rows", type=int, default=600)
    ap.add_argument("--json")
    a = ap.parse_args()
    held = held_out_rows(a.data)[: a.rows]
    variants = {"current": lambda h, k: lookup(h, k), "4-gram": lambda h, k: lookup(h, k, max_ngram=4),
                "cycled": lambda h, k: cycled(h, k, 3), "5-gram + cycled": lambda h, k: cycled(h, k, 5),
                "2+-token matches only": lambda h, k: lookup(h, k, min_ngram=2)}
    res = {"data": a.data, "held_out_rows": len(held), "variants": {n: replay(held, f) for n, f in variants.items()}}
    c, acc = Counter(), Counter()
    for r in held:
        t = r["tokens"]
        for i in range(r["prompt_len"] + 1, len(t)):
            m = next((m for m in (3, 2, 1) if lookup(t[:i], 1, min_ngram=m) is not None), 0)
            c[m] += 1
            acc[m] += accepted(lookup(t[:i], 3, min_ngram=m) if m else None, t, i, 3)
    res["by_match_length"] = {m: {"share": c[m] / sum(c.values()), "mean_accepted": acc[m] / c[m]} for m in sorted(c)}
    print(json.dumps(res, indent=1))
    if a.json:
        write_text_atomic(a.json, json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(run_main(main, "lookup_replay.py"))
