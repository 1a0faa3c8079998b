"""Greedy and draft/verify decoding, written once over four step functions so that the torch reference, the LiteRT
runtime and (by golden traces) the Kotlin core run the very same loop.

  prefill(ids, start)          write KV for positions start..start+len(ids)-1
  decode(token, pos)           -> (next_token, activation)         KV for `pos` written
  verify(tokens, pos)          -> (argmax list, activations [T,H])  KV for pos..pos+T-1 written
  draft(token, act, pos, k)    -> k drafted ids (`pos` = position of `token`, whose KV is not written yet),
                                  or None to take a plain decode step instead

Loop (LiteRT-LM's): the first step after prefill is a plain decode; then each cycle drafts K tokens at a fixed
position, verifies [last, d1..dK] in one pass, accepts the longest matching prefix plus one bonus token. Rejected KV
is not rolled back: it is masked out and overwritten next cycle. Unlike the engine we never emit past the budget and
stop exactly at EOS / a stop condition, even inside an accepted block.
"""
import time

import numpy as np
import torch

from mtplite.model.decoder import causal_mask
from mtplite.model.sampling import Sampler


def run(prompt_ids, steps, *, max_new_tokens, eos_ids=(), K=0, cache_len, should_stop=None, on_token=None):
    """K = 0 means plain greedy decoding. Returns tokens (EOS excluded), stop reason, the stop token where an EOS
    ended the turn (a multi-turn transcript must keep it: LiteRT-LM #3439 loses it), per-cycle trace and stats.
    The budget counts emitted tokens only: accepted drafts past it are dropped, never charged (LiteRT-LM #2816)."""
    prefill, decode, verify, draft = steps
    P = len(prompt_ids)
    if P < 1:
        raise ValueError("empty prompt")
    if P > cache_len - 1:
        raise ValueError(f"prompt is {P} tokens but the cache holds {cache_len}")
    out, trace = [], []
    stats = {"cycles": 0, "plain_steps": 0, "drafted": 0, "accepted": 0, "per_depth": [0] * max(K, 1), "draft_s": 0.0, "verify_s": 0.0}
    reason, stop_token = None, None
    t0 = time.perf_counter()

    def emit(tok):
        nonlocal reason, stop_token
        if tok in eos_ids:
            reason, stop_token = "eos", int(tok)
            return False
        out.append(tok)
        if on_token:
            on_token(tok)
        if len(out) >= max_new_tokens:
            reason = "max_new_tokens"
        elif should_stop and should_stop(out):
            reason = "stop"
        return reason is None

    if max_new_tokens <= 0:
        return {"tokens": [], "stop_reason": "max_new_tokens", "trace": [], **stats, "ttft_s": 0.0}
    if P > 1:
        prefill(prompt_ids[:-1], 0)
    tok, act = decode(prompt_ids[-1], P - 1)
    ttft = time.perf_counter() - t0
    pos = P  # position of `tok`, whose KV is not in the cache yet
    alive = emit(tok)
    while alive:
        if pos >= cache_len:
            reason = "cache_full"
            break
        if K == 0 or pos + K >= cache_len:  # plain step (also near the cache end, where verify would not fit)
            stats["plain_steps"] += 1
            tok, act = decode(tok, pos)
            pos += 1
            alive = emit(tok)
            continue
        t1 = time.perf_counter()
        drafts = draft(tok, act, pos, K)
        t2 = time.perf_counter()
        stats["draft_s"] += t2 - t1  # declined drafts cost time too (a gated head ran a step before it declined)
        if drafts is None:  # the drafter declined (no lookup match, an unsure head): a plain step is cheaper
            stats["plain_steps"] += 1
            tok, act = decode(tok, pos)
            pos += 1
            alive = emit(tok)
            continue
        ys, acts = verify([tok] + list(drafts), pos)
        stats["verify_s"] += time.perf_counter() - t2
        n = 0
        while n < K and drafts[n] == ys[n]:
            stats["per_depth"][n] += 1
            n += 1
        block = list(drafts[:n]) + [ys[n]]
        stats["cycles"] += 1
        stats["drafted"] += K
        stats["accepted"] += n
        emitted = []
        for t in block:
            alive = emit(t)
            emitted.append(t)
            if not alive:
                break
        trace.append({"pos": pos, "drafted": list(map(int, drafts)), "verify": list(map(int, ys)), "accepted": n,
                      "emitted": list(map(int, emitted))})
        tok, act, pos = ys[n], acts[n], pos + n + 1
    elapsed = time.perf_counter() - t0
    return {"tokens": out, "stop_reason": reason, "stop_token": stop_token, "trace": trace, **stats, "ttft_s": ttft,
            "total_s": elapsed}


def summary(res, K):
    cyc = res["cycles"]
    return {
        "accept_length": (res["accepted"] + cyc) / cyc if cyc else None,
        "drafted": res["drafted"],
        "accepted": res["accepted"],
        "cycles": cyc,
        "acceptance_per_depth": [d / cyc for d in res["per_depth"][:K]] if cyc else [],
    }


@torch.no_grad()
def rows_agree(dec, K, cache_len, dtype, seed=0):
    """Is a 1-row pass row 0 of a K+1-row pass, bit for bit, in `dtype` here? (export/exactness.py asks the same of
    the exported graphs.)"""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, dec.c.vocab_size, (1, 8 + K + 1), generator=g)
    kv = dec(dec.embed(ids[:, :8]), torch.arange(8, dtype=torch.int32), causal_mask(torch.arange(8), cache_len, dtype),
             dec.empty_cache(cache_len, dtype=dtype), return_logits=False)[2]
    rows = []
    for T in (1, K + 1):
        pos = torch.arange(8, 8 + T, dtype=torch.int32)
        lg, act, _ = dec(dec.embed(ids[:, 8 : 8 + T]), pos, causal_mask(pos, cache_len, dtype), kv)
        rows.append((lg[0, 0], act[0, 0]))
    return all(torch.equal(a, b) for a, b in zip(*rows))


# ---- torch reference step functions ----------------------------------------------------------------------------

def torch_steps(backbone, head=None, cache_len=512, dtype=torch.float32, exact=None, context=0, sampler=None):
    """Step functions over the torch Decoder (+ MTPHead), batch 1, one KV cache, in the model's `dtype`.

    exact: plain steps run as row 0 of a K+1-row verify pass (padded with copies of the token), so plain and
    speculative tokens come from the same kernels and shapes. None (the default): in float32 only where a probe finds
    that a 1-row and a K+1-row pass round differently on this CPU; in bf16 always (the probe's few rows agreed on
    tiny:llama while a generation later differed). The padding rows write KV past `pos`, which stays masked until the
    next steps overwrite it.

    sampler: model/sampling.py's Sampler (None: greedy); the token for cache position t is picked with its u_t, in
    decode, in every verify row, and in the head's drafts (coupled drafting).

    context: the head also drafts the `context` most recent ids of the cached text outside its draft space
    (MTPHead.step's ctx: embedding rows, and layer 0's V rows read from the cache at their latest position)."""
    dec = backbone.model
    kv = dec.empty_cache(cache_len, dtype=dtype)
    state = {"kv": kv}
    K = head.c.K if head is not None else 0
    if exact is None:  # probed once per decoder, K and dtype
        memo = dec.__dict__.setdefault("_rows_agree", {})
        if (K, cache_len, dtype) not in memo:
            memo[(K, cache_len, dtype)] = not K or (dtype == torch.float32 and rows_agree(dec, K, cache_len, dtype))
        exact = not memo[(K, cache_len, dtype)]
    pick = (sampler or Sampler()).pick
    hist = [0] * cache_len  # the token at each cached position (the context draft space reads it)

    @torch.no_grad()
    def forward(ids, pos0, logits=True):
        hist[pos0 : pos0 + len(ids)] = ids[: cache_len - pos0]
        pos = torch.arange(pos0, pos0 + len(ids), dtype=torch.int32)
        lg, act, state["kv"] = dec(dec.embed(torch.tensor([ids])), pos, causal_mask(pos, cache_len, dtype), state["kv"],
                                   return_logits=logits)
        return lg, act[0]

    def prefill(ids, start):
        forward(ids, start, logits=False)

    def decode(tok, pos):
        if exact and K and pos + K < cache_len:
            lg, act = forward([tok] * (K + 1), pos)
            return pick(lg[0, 0].numpy(), pos + 1), act[0]
        lg, act = forward([tok], pos)
        return pick(lg[0, -1].numpy(), pos + 1), act[-1]

    def verify(toks, pos):
        lg, act = forward(toks, pos)
        return [pick(row, pos + 1 + j) for j, row in enumerate(lg[0].numpy())], act

    @torch.no_grad()
    def draft(tok, act, pos, k):
        reads = [state["kv"][i] for i in head.kv_layers]
        p = torch.tensor([pos], dtype=torch.int32)
        mask = causal_mask(p, cache_len, dtype)
        h, out = act, []
        ctx, ids = context_space(pos) if context else (None, [])
        space = np.concatenate([head.draft_ids_t.numpy(), np.asarray(ids, np.int64)])
        prep = head.prepare(p, mask, reads, ctx)
        for j in range(k):
            x2 = torch.cat([dec.embed(torch.tensor([[tok]]))[0, 0], h])[None, None]
            d, h = head.step(x2.to(dtype), prep)
            tok = pick(d[0, 0].float().numpy(), pos + 1 + j, space)  # coupled: the u the backbone's sample will use
            h = h[0, 0]
            out.append(tok)
        return out

    def context_space(pos):
        from mtplite.model.head import context_ids, context_rows

        found = context_ids(hist[:pos], head.vocab_map, head.space, context)
        if not found:
            return None, []
        ids = [t for t, _ in found]
        emb = dec.embed_tokens.weight[torch.tensor(ids)].to(dtype)[None]
        rows = context_rows(state["kv"][0][1], [j for _, j in found]).to(dtype)[None] if head.copy is not None else None
        return (emb, rows, torch.zeros(1, 1, len(ids), dtype=dtype)), ids

    return prefill, decode, verify, draft
