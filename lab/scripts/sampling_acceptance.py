"""Acceptance when sampling, three ways, on one bundle and the same prompts:

  coupled    the head samples its own distribution with the u_t the backbone's sample will use (what mtplite ships:
             token-exact, the output is plain sampling's)
  argmax     the head drafts its argmax; verification as above (token-exact too)
  rejection  standard speculative sampling: drafts sampled from the head with their own randomness, each accepted with
             probability min(1, p/q), a rejection resampled from the residual (distribution-exact, not token-exact)

  python lab/scripts/sampling_acceptance.py BUNDLE [--temperature 1.0 --top-k 64 --top-p 0.95] [--limit 16] [--json OUT]
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

from mtplite.data.benchmark import default_prompts, load_prompts
from mtplite.model import generate as G
from mtplite.model.sampling import Sampler, distribution
from mtplite.runtime.litert import Bundle, encode, load_tokenizer


def dist_over_vocab(lg, s, V, ids=None):
    """The sampler's distribution as a dict id -> probability."""
    idx, p = distribution(lg, s.temperature, s.top_k, s.top_p, ids)
    p = p / p.sum()
    return {int(ids[i]) if ids is not None else int(i): float(q) for i, q in zip(idx, p)}


def head_step_dists(b, tok, act, pos, k, s, rng):
    """k drafts sampled from the head's own distribution (independent randomness) and each step's distribution."""
    drafts, qs = [], []
    orig = b.sampler

    class Draw:  # b.draft picks through sampler.pick: sample with rng instead, and keep the distribution
        greedy = False

        def pick(self, lg, t, ids=None):
            q = dist_over_vocab(lg, s, b.V, ids)
            toks, ps = zip(*q.items())
            d = int(rng.choice(toks, p=np.array(ps) / sum(ps)))
            qs.append(q)
            drafts.append(d)
            return d

    b.sampler = Draw()
    try:
        b.draft(tok, act, pos, k)
    finally:
        b.sampler = orig
    return drafts, qs


def rejection_run(b, ids, s, K, max_new, eos, rng):
    """Standard speculative sampling over the bundle's graphs; returns (tokens, cycles, accepted)."""
    prefill, decode, verify, _ = b.steps(s)
    P = len(ids)
    prefill(ids[:-1], 0)
    tok, act = decode(ids[-1], P - 1)
    pos, out, cycles, accepted = P, [tok], 0, 0
    while len(out) < max_new and tok not in eos and pos + K < b.C:
        drafts, qs = head_step_dists(b, tok, act, pos, K, s, rng)
        _, acts = verify([tok] + drafts, pos)
        ps = [dist_over_vocab(row, s, b.V) for row in b.last_logits]
        n = 0
        while n < K:
            d, p, q = drafts[n], ps[n], qs[n]
            if rng.random() < min(1.0, p.get(d, 0.0) / q[d]):
                n += 1
                continue
            break
        if n < K:  # resample from the residual max(0, p - q)
            r = {t: max(0.0, v - qs[n].get(t, 0.0)) for t, v in ps[n].items()}
            z = sum(r.values())
            toks, w = zip(*(r.items() if z > 0 else ps[n].items()))
            y = int(rng.choice(toks, p=np.array(w) / sum(w)))
        else:
            toks, w = zip(*ps[K].items())
            y = int(rng.choice(toks, p=np.array(w) / sum(w)))
        cycles, accepted = cycles + 1, accepted + n
        out += drafts[:n] + [y]
        tok, act, pos = y, acts[n], pos + n + 1
    return out, cycles, accepted


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-k", type=int, default=64)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--limit", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--json")
    a = ap.parse_args()
    # the contract's drafter, one call per step: its full logits let the head sample (coupled, rejection); the K-step
    # drafter the runtime uses by default drafts its argmax inside the graph
    b = Bundle(a.bundle, threads=2)
    tok = load_tokenizer(a.bundle)
    eos = set(b.man["eos_ids"])
    prompts = load_prompts(default_prompts())[: a.limit]
    K = b.K
    stats = {m: {"cycles": 0, "accepted": 0} for m in ("coupled", "argmax", "rejection")}
    exact = 0
    runs = 0
    for seed in range(a.seeds):
        s = Sampler(a.temperature, a.top_k, a.top_p, seed)
        rng = np.random.default_rng(seed)
        for p in prompts:
            ids = encode(tok, b.man, p["prompt"])
            plain = G.run(ids, b.steps(s), max_new_tokens=a.max_new_tokens, eos_ids=eos, K=0, cache_len=b.C)["tokens"]
            for mode in ("coupled", "argmax"):
                steps = list(b.steps(s))
                if mode == "argmax":
                    def draft(t, act, pos, k, _d=steps[3]):
                        b.sampler = Sampler()
                        try:
                            return _d(t, act, pos, k)
                        finally:
                            b.sampler = s
                    steps[3] = draft
                r = G.run(ids, tuple(steps), max_new_tokens=a.max_new_tokens, eos_ids=eos, K=K, cache_len=b.C)
                stats[mode]["cycles"] += r["cycles"]
                stats[mode]["accepted"] += r["accepted"]
                exact += r["tokens"] == plain
                runs += 1
            _, cyc, acc = rejection_run(b, ids, s, K, a.max_new_tokens, eos, rng)
            stats["rejection"]["cycles"] += cyc
            stats["rejection"]["accepted"] += acc
            print(f"seed {seed} {p['id']}: " + ", ".join(
                f"{m} τ {(v['accepted'] + v['cycles']) / max(v['cycles'], 1):.3f}" for m, v in stats.items()), file=sys.stderr)
    res = {"bundle": a.bundle, "sampler": {"temperature": a.temperature, "top_k": a.top_k, "top_p": a.top_p},
           "seeds": a.seeds, "prompts": len(prompts), "max_new_tokens": a.max_new_tokens, "K": K,
           "token_exact_runs": f"{exact}/{runs}",
           "accept_length": {m: (v["accepted"] + v["cycles"]) / max(v["cycles"], 1) for m, v in stats.items()},
           "counts": stats}
    print(json.dumps(res, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
