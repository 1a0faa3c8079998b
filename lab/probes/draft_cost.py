"""Where one draft cycle's time goes, against a plain decode step, on one bundle (issue 36's drafting-cost target).

Times, in alternating rounds so that drift hits every row alike: a plain decode step; a verify pass; the K-step
drafter's whole draft (Bundle.draft_k) and its parts (the mtp_draft_k call alone, the embedder call, the context
space); each of drafter_ctx's signatures alone (mtp_draft_k over all C cache slots, mtp_draft_k_<W> over the first
W); the contract drafter's K steps (Bundle.draft_steps). Medians in ms, and each as a share of a decode step.

  python lab/probes/draft_cost.py BUNDLE [--rounds 30] [--threads 2] [--against OTHER_BUNDLE] [--json OUT]

--against also times OTHER_BUNDLE's mtp_draft_k call (all C slots, the same cache contents and inputs) in the same
rounds, each bundle's right after a verify pass: two exports of one head side by side.
"""
import argparse
import json
import sys
import time

import numpy as np

from mtplite.errors import UserError, run_main
from mtplite.paths import write_text_atomic


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--against")
    ap.add_argument("--json")
    a = ap.parse_args()
    from mtplite.data.benchmark import default_prompts, load_prompts
    from mtplite.export.contract import DRAFT_K, draft_k_signature
    from mtplite.runtime.litert import Bundle, encode, load_tokenizer

    b = Bundle(a.bundle, threads=a.threads, context=True)
    if not b.use_context:
        raise UserError(f"{a.bundle}: no drafter_ctx.tflite (a head without the context draft space)")
    tok = load_tokenizer(a.bundle)
    ids = encode(tok, b.man, load_prompts(default_prompts())[0]["prompt"])[: b.C // 2]
    b.reset()
    b.prefill(ids[:-1], 0)
    t, act = b.decode(ids[-1], len(ids) - 1)
    pos, K = len(ids), b.K
    b.context_space(pos)
    ins, outs = b.cx_in, b.cx_out
    dr = b.models["drafter_ctx"]
    parts = {
        "decode": lambda: b.decode(t, pos),
        "verify": lambda: b.verify([t] * (K + 1), pos),
        "draft_k": lambda: b.draft_k(t, act, pos),
        # the signature draft_k runs at this pos, then every signature of drafter_ctx on its own (the windows)
        "draft_k_graph_call": lambda: dr.run_by_name(draft_k_signature(b.cx_windows, pos), {**ins, **b.cx_kv}, outs),
        **{f"graph_call {s}": (lambda s=s: dr.run_by_name(s, {**ins, **b.cx_kv}, outs)) for s in b.sigs["drafter_ctx"]},
        "embedder_call": lambda: b.embed([t]),
        "context_space": lambda: (setattr(b, "cx_ids", None), b.context_space(pos)),  # rebuilt: its worst case
        "contract_drafter_k_steps": lambda: b.draft_steps(t, act, pos, K),
    }
    if a.against:
        o = Bundle(a.against, threads=a.threads, context=True)
        if not o.use_context or o.C != b.C:
            raise UserError(f"{a.against}: no drafter_ctx.tflite of cache length {b.C} to time against")
        b.draft_k(t, act, pos)  # writes this draft's inputs, copied below with the cache
        for n in b.kv_names:  # the same cache contents, copied once
            o.kv[n].write(b.kv[n].read(int(np.prod(b.sigs["backbone"]["decode"]["inputs"][n]["shape"])), np.float32))
        for n, buf in b.cx_in.items():
            dt = np.int32 if n in ("context_ids", "input_pos") else np.float32
            o.cx_in[n].write(buf.read(int(np.prod(b.sigs["drafter_ctx"][DRAFT_K]["inputs"][n]["shape"])), dt))
        od = o.models["drafter_ctx"]

        def after_verify(model, ins_, kv_, outs_):
            """The graph call alone, timed right after a verify pass (as in a draft cycle: its weights evicted)."""
            b.verify([t] * (K + 1), pos)
            t0 = time.perf_counter()
            model.run_by_name(DRAFT_K, {**ins_, **kv_}, outs_)
            return time.perf_counter() - t0

        parts[f"after verify: {DRAFT_K}"] = lambda: after_verify(dr, ins, b.cx_kv, outs)
        parts[f"after verify: against {DRAFT_K}"] = lambda: after_verify(od, o.cx_in, o.cx_kv, o.cx_out)
    times = {k: [] for k in parts}
    for fn in parts.values():
        fn()
    for _ in range(a.rounds):
        for k, fn in parts.items():
            t0 = time.perf_counter()
            own = fn()  # a part may time itself (a float: its own seconds)
            times[k].append(own if isinstance(own, float) else time.perf_counter() - t0)
    med = {k: 1e3 * float(np.median(v)) for k, v in times.items()}
    res = {"bundle": a.bundle, "against": a.against, "K": K, "threads": a.threads, "rounds": a.rounds, "pos": pos,
           "cache_len": b.C, "draft_k_signature": draft_k_signature(b.cx_windows, pos),
           "context_ids": len(b.cx_ids or []), "median_ms": med,
           "share_of_decode": {k: v / med["decode"] for k, v in med.items()}}
    for k, v in med.items():
        print(f"{k:26s} {v:7.2f} ms  {v / med['decode']:.3f} decode steps", file=sys.stderr)
    print(json.dumps(res, indent=1))
    if a.json:
        write_text_atomic(a.json, json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.exit(run_main(main, "draft_cost.py"))
