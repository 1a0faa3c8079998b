"""The head and prompt lookup on the same cycles of the same greedy stream (#9's "on the same greedy outputs").

A drafter's accept length counts only the cycles it drafts: lookup sits out the steps where the text has no match
(plain steps), the head drafts at every one, so the bench's two τ come from different cycles. Here lookup drives a
LiteRT generation and, at each of its cycles, the head (the drafter generate runs, ungated) drafts from the same
state too; both drafts are scored against the stream the run emitted. Then the reverse: the head drives, and lookup
is scored on the head's cycles where it has a match. The runs decode K tokens past --max-new-tokens so that a cycle
near the end is scored on a full stream; only cycles starting within --max-new-tokens count.

  python lab/scripts/same_cycles.py BUNDLE [--prompts tasks.jsonl] [--json out.json]
"""
import argparse
import json
import platform
import sys
from collections import defaultdict

from mtplite.errors import run_main
from mtplite.model import generate as G
from mtplite.paths import write_text_atomic
from mtplite.data.benchmark import default_prompts, load_prompts
from mtplite.runtime.litert import encode
from mtplite.runtime.litert import Bundle, load_tokenizer
from mtplite.runtime.lookup import accepted, lookup


def side_by_side(b, ids, K, driver, max_new, eos):
    """One generation drafted by `driver` ('lookup' | 'head'), the other drafter asked at every cycle too.
    Returns (stream, [(position, lookup draft, head draft)], the run's result)."""
    history, rec = list(ids), []
    prefill, decode, verify, draft = b.steps()

    def both(tok, act, pos, k):
        dl, dh = lookup(history, k), draft(tok, act, pos, k)
        rec.append((len(history), dl, dh))
        return dl if driver == "lookup" else dh

    res = G.run(ids, (prefill, decode, verify, both), max_new_tokens=max_new + K, eos_ids=eos, K=K, cache_len=b.C,
                on_token=history.append)
    return history, rec, res


def tally(stats, task, stream, rec, driver, end, K):
    for i, dl, dh in rec:
        if i >= end:
            continue
        if dl is None:  # lookup has no draft here: lookup's run takes a plain step, the head's is not compared
            if driver == "lookup":
                s = stats["lookup_no_match"][task]
                s["steps"] += 1
                s["head_accepted"] += accepted(dh, stream, i, K)
            continue
        s = stats[f"on_{driver}_cycles"][task]
        s["cycles"] += 1
        al, ah = accepted(dl, stream, i, K), accepted(dh, stream, i, K)
        s["lookup_accepted"] += al
        s["head_accepted"] += ah
        s["better_accepted"] += max(al, ah)  # an oracle taking the better draft per cycle: what a chooser could gain


def summarise(stats):
    out = {}
    for part in ("on_lookup_cycles", "on_head_cycles", "lookup_no_match"):
        by_task = stats.get(part) or {}
        n = "steps" if part == "lookup_no_match" else "cycles"
        rows = dict(by_task)
        rows["all"] = {k: sum(r.get(k, 0) for r in by_task.values())
                       for k in (n, "head_accepted") + (() if n == "steps" else ("lookup_accepted", "better_accepted"))}
        out[part] = {t: {**r, **{f"{who}_tau": 1 + r[f"{who}_accepted"] / r[n] for who in ("lookup", "head", "better")
                                 if f"{who}_accepted" in r and r[n]}} for t, r in sorted(rows.items())}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--prompts", default=None, help="JSONL with id/task/prompt (default: the benchmark prompts)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    b = Bundle(a.bundle, threads=a.threads, mtp=True, context=True)
    b.use_context = "drafter_ctx" in b.models  # the drafter `mtplite generate` runs by default
    tok = load_tokenizer(a.bundle)
    eos = set(b.man["eos_ids"])
    K = b.K
    stats = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    prompts = load_prompts(a.prompts or default_prompts())
    n = 0
    for p in prompts:
        ids = encode(tok, b.man, p["prompt"])
        if len(ids) + a.max_new_tokens + K + 1 >= b.C:
            continue
        n += 1
        for driver in ("lookup", "head"):
            stream, rec, _ = side_by_side(b, ids, K, driver, a.max_new_tokens, eos)
            tally(stats, p["task"], stream, rec, driver, len(ids) + a.max_new_tokens, K)
    res = summarise(stats)
    for part, rows in res.items():
        print(part)
        for t, r in rows.items():
            n_ = r.get("cycles", r.get("steps"))
            print(f"  {t:10s} {n_:5d}  " + "  ".join(f"{w} τ {r[f'{w}_tau']:.2f}" for w in ("lookup", "head", "better")
                                                     if f"{w}_tau" in r))
    if a.json:
        write_text_atomic(a.json, json.dumps({"bundle": a.bundle, "K": K, "prompts": n,
                                              "drafter": "drafter_ctx" if b.use_context else "drafter",
                                              "max_new_tokens": a.max_new_tokens, "threads": a.threads,
                                              "machine": platform.processor() or platform.machine(), **res}, indent=1))


if __name__ == "__main__":
    sys.exit(run_main(main, "same_cycles.py"))
