"""Self-distillation data: the frozen backbone's own greedy continuations of the shipped prompt corpus.

Batched greedy with left padding: RoPE and sliding windows only see position differences, so shifting a row right by
its padding changes nothing but rounding, and padded keys are masked out per row. Continuations are appended to a
JSONL cache keyed by backbone fingerprint, so an interrupted run resumes where it stopped.
"""
import contextlib
import json
import os
from pathlib import Path

import torch
from tqdm import tqdm

from mtplite.errors import UserError
from mtplite.model.decoder import NEG_INF, causal_mask, fast_decode
from mtplite.model.load import format_prompt


def pad_batch(seqs, pad_id=0):
    """Left-pad token lists -> tokens [B,L] and key_ok [B,L] (False on padding)."""
    L = max(len(s) for s in seqs)
    toks = torch.full((len(seqs), L), pad_id, dtype=torch.long)
    ok = torch.zeros(len(seqs), L, dtype=torch.bool)
    for b, s in enumerate(seqs):
        toks[b, L - len(s):] = torch.tensor(s)
        ok[b, L - len(s):] = True
    return toks, ok


def key_mask(ok, C):
    """[B,1,1,C] additive mask hiding padded keys (positions past ok's length are real future slots)."""
    full = torch.ones(ok.shape[0], C, dtype=torch.bool)
    full[:, : ok.shape[1]] = ok
    return torch.where(full, 0.0, NEG_INF)[:, None, None, :]


@torch.no_grad()
def greedy_batch(dec, seqs, max_new, eos_ids, dtype=torch.float32, samplers=None):
    """Greedy continuations of a left-padded batch, or sampled ones with `samplers` (one model/sampling.py Sampler per
    row: the token at cache position t drawn with its u_t, so a row is what `generate` samples at that seed). Its KV
    cache is consumed step by step and never rolled back, so callers may run it inside fast_decode(dec) (distill
    does, once around all its batches)."""
    toks, ok = pad_batch(seqs)
    B, P = toks.shape
    C = P + max_new
    kv = dec.empty_cache(C, batch=B, dtype=dtype)
    km = key_mask(ok, C).to(dtype)
    pos = torch.arange(P, dtype=torch.int32)
    outs = [[] for _ in range(B)]

    def pick(lg, s):
        if samplers is None:
            return lg.argmax(-1).tolist()  # one host copy per step (per-element reads sync a GPU B times)
        rows = lg.float().cpu().numpy()
        return [sp.pick(rows[b], len(seqs[b]) + s) for b, sp in enumerate(samplers)]

    # logits of the last prompt position only: the full [B, P, vocab] block was a third of distillation time
    _, act, kv = dec(dec.embed(toks).to(dtype), pos, causal_mask(pos, C, dtype) + km, kv, return_logits=False)
    nxt = pick(dec.logits(act[:, -1]), 0)
    done = [False] * B
    for s in range(max_new):
        for b, t in enumerate(nxt):
            if not done[b]:
                outs[b].append(t)
                done[b] = t in eos_ids
        if all(done) or s == max_new - 1:
            break
        p = torch.tensor([P + s], dtype=torch.int32)
        lg, _, kv = dec(dec.embed(torch.tensor(nxt)[:, None]).to(dtype), p, causal_mask(p, C, dtype) + km, kv)
        nxt = pick(lg[:, -1], s + 1)
    return outs


def by_length_in_windows(todo, batch, length):
    """Sorted by length within windows of 16 batches: little padding per batch, and a run cut short by its budget has
    still covered the prompts in their (shuffled) order instead of only the shortest."""
    win = batch * 16
    return [p for i in range(0, len(todo), win) for p in sorted(todo[i: i + win], key=length)]


def load_rows(path):
    """{id: row} of a distillation cache; a torn last line from an interrupted run is skipped."""
    done = {}
    if Path(path).exists():
        for line in Path(path).read_text().splitlines():
            try:
                r = json.loads(line)
                done[r["id"]] = r
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    return done


def distill(backbone, prompts, out_path, max_new=64, batch=8, dtype=torch.float32, budget_s=None, progress=True):
    """Append {id, task, prompt_len, tokens} rows for prompts not yet in out_path; return all rows.
    out_path None: nothing cached (greedy rows of evaluation prompts that must never land in a training cache)."""
    import time

    out_path = out_path and Path(out_path)
    done = load_rows(out_path) if out_path else {}
    todo = [p for p in prompts if p["id"] not in done]
    dec = backbone.model
    t0 = time.time()
    seq = {p["id"]: format_prompt(backbone, p["prompt"]) for p in todo}  # tokenized once, for sorting and batches
    todo = by_length_in_windows(todo, batch, lambda p: len(seq[p["id"]]))
    bar = tqdm(total=len(todo), desc="self-distill", unit="prompt", disable=not progress)
    # one fast_decode for the whole run (packing Gemma's LM head takes ~0.4-1 s, a batch ~90 s), none when all is cached
    sink = open(out_path, "a") if out_path else contextlib.nullcontext()
    with sink as f, (fast_decode(dec, dtype) if todo else contextlib.nullcontext()):
        for i in range(0, len(todo), batch):
            if budget_s is not None and time.time() - t0 >= budget_s:  # 0: cached rows only
                break
            chunk = todo[i : i + batch]
            seqs = [seq[p["id"]] for p in chunk]
            conts = greedy_batch(dec, seqs, max_new, set(backbone.eos_ids), dtype)
            for p, s, c in zip(chunk, seqs, conts):
                r = {"id": p["id"], "task": p["task"], "prompt_len": len(s), "tokens": s + c}
                if f is not None:
                    f.write(json.dumps(r) + "\n")
                done[p["id"]] = r
            if f is not None:
                f.flush()
                os.fsync(f.fileno())
            bar.update(len(chunk))
    bar.close()
    # rows cached before `template` was recorded get it from the prompt list (validation holds out whole templates)
    return [{**done[p["id"]], **({"template": p["template"]} if "template" in p else {})}
            for p in prompts if p["id"] in done]


def corpus_items(backbone, prompts=None):
    """Every training prompt (the topic corpus and the program requests; or `prompts`, a user's own) tokenized as the
    backbone is deployed, in a fixed shuffled order, so a run cut short has covered every task and later runs
    continue where it stopped."""
    import random

    from mtplite.data import program_prompts, training_prompts

    prompts = program_prompts() + training_prompts() if prompts is None else prompts
    items = [{"id": p["id"], "task": p["task"], "template": p.get("template"), "ids": format_prompt(backbone, p["prompt"])}
             for p in prompts]
    random.Random(0).shuffle(items)
    return items


def sampled_id(prompt_id, sampler):
    """A sampled row's id: its prompt's, tagged with the settings and base seed, so the greedy row and sampled rows of
    one prompt (or of two seeds) live side by side in a corpus."""
    return f"{prompt_id}~T{sampler.temperature:g}k{sampler.top_k}p{sampler.top_p:g}s{sampler.seed}"


def row_seed(row_id):
    """The sampler seed of one sampled row, from its id (recorded in the shard too)."""
    import hashlib

    return int(hashlib.md5(row_id.encode()).hexdigest()[:15], 16)


def distill_corpus(dec, items, folder, meta, max_new, eos_ids, batch=64, dtype=torch.float32, budget_s=None,
                   shard_rows=2048, progress=True, sampler=None):
    """Greedy continuations of pre-tokenized prompts ({id, task, template, ids}) added to a corpus folder
    (mtplite.data.corpus) in shards of `shard_rows`; prompts the folder already holds are skipped, so a run that
    stops resumes where its last shard ended. Returns the number of rows added.
    sampler (a model/sampling.py Sampler, temperature > 0): sampled continuations instead, row ids from sampled_id,
    each row drawn with its own seed (row_seed), which the shard records."""
    import time

    from mtplite.data.corpus import load_corpus, write_shard
    from mtplite.model.sampling import Sampler

    if sampler is not None and sampler.greedy:
        sampler = None
    if sampler is not None:
        items = [{**p, "id": sampled_id(p["id"], sampler)} for p in items]
    have = {r["id"] for r in load_corpus([folder])[0]} if Path(folder).is_dir() else set()
    todo = [p for p in items if p["id"] not in have]
    todo = by_length_in_windows(todo, batch, lambda p: len(p["ids"]))
    how = {"decoding": "greedy"} if sampler is None else {
        "decoding": "sample", "temperature": sampler.temperature, "top_k": sampler.top_k, "top_p": sampler.top_p,
        "seed": sampler.seed}
    meta = {**meta, "settings": {**meta.get("settings", {}), "max_new": max_new, "eos_ids": sorted(eos_ids), **how}}
    bar = tqdm(total=len(todo), desc="distill", unit="prompt", disable=not progress)
    t0, pending, added = time.time(), [], 0

    def flush():
        seeds = {"seeds": [r["seed"] for r in pending]} if sampler is not None else {}
        write_shard(folder, pending, {**meta, **seeds})

    with fast_decode(dec, dtype):
        for i in range(0, len(todo), batch):
            if budget_s is not None and time.time() - t0 >= budget_s:
                break
            chunk = todo[i: i + batch]
            seeds = [row_seed(p["id"]) for p in chunk] if sampler is not None else None
            samplers = None if seeds is None else [
                Sampler(sampler.temperature, sampler.top_k, sampler.top_p, sd) for sd in seeds]
            conts = greedy_batch(dec, [p["ids"] for p in chunk], max_new, set(eos_ids), dtype, samplers)
            pending += [{"id": p["id"], "task": p["task"], "template": p.get("template"), "prompt_len": len(p["ids"]),
                         "tokens": list(p["ids"]) + c, **({"seed": seeds[j]} if seeds else {})}
                        for j, (p, c) in enumerate(zip(chunk, conts))]
            bar.update(len(chunk))
            if len(pending) >= shard_rows:
                flush()
                added, pending = added + len(pending), []
    if pending:
        flush()
        added += len(pending)
    bar.close()
    return added


def with_cached(rows, path):
    """rows, then every other row cached in path (prompts of earlier runs: other --prompts, --echo or --programs
    counts), in cache order. Benchmark prompts never reach a cache, so none can join."""
    have = {r["id"] for r in rows}
    return rows + [r for i, r in load_rows(path).items() if i not in have]


def benchmark_rows(backbone, max_new=64):
    """The shipped benchmark prompts' own greedy rows (never cached: evaluation only, never training data)."""
    from mtplite.data.benchmark import default_prompts, load_prompts

    if max_new < 1:
        raise UserError(f"--max-new {max_new}: greedy tokens per benchmark prompt, at least 1")
    return distill(backbone, load_prompts(default_prompts()), None, max_new=max_new, batch=16, progress=False)


def check_echo(n, flag="--echo"):
    """The echo prompt count train and quickstart take."""
    if n < 0:
        raise UserError(f"{flag} {n}: a number of prompts, 0 or more")


def distill_with_echo(backbone, prompts, out_path, echo=0, seed=0, budget_s=None, **kw):
    """distill(prompts), then, with echo > 0, a second pass over `echo` prompts framing the first pass's continuations
    (mtplite.data.echo_prompts: the backbone's own text in styles the corpus's templates lack), into the same cache.
    One budget for both passes, shared by prompt count (the first pass's leftover goes to the second); 0 distills
    nothing new."""
    import time

    from mtplite.data import echo_prompts, echo_texts

    t0 = time.time()
    n = len(prompts) + echo

    def left(share):
        return None if budget_s is None else max(0.0, budget_s * share - (time.time() - t0))

    rows = distill(backbone, prompts, out_path, budget_s=left(len(prompts) / n) if prompts else budget_s, **kw)
    if echo:
        texts = echo_texts(backbone.tokenizer.decode(r["tokens"][r["prompt_len"]:], skip_special_tokens=True)
                           for r in sorted(rows, key=lambda r: r["id"]) if r["task"] != "code")
        rows += distill(backbone, echo_prompts(texts, echo, seed=seed), out_path, budget_s=left(1.0), **kw)
    return rows


def check_corpus(backbone, rows, metas, n_rows=4, n_tokens=8, agree=0.9):
    """The corpus must come from this backbone: same fingerprint, and the backbone, run teacher-forced over a few
    rows, predicts their first greedy tokens again. A corpus distilled on other hardware (CUDA float32) may differ at a
    near-tie, hence a share (`agree`) rather than every token."""
    fp = metas[0]["backbone_fingerprint"] if metas else None
    if fp != backbone.fingerprint:
        raise UserError(f"{metas[0]['path']}: corpus distilled from backbone {fp}, the local {backbone.spec} is "
                        f"{backbone.fingerprint}; distil a corpus for it (mtplite distill --backbone {backbone.spec})")
    pick = [r for r in rows if len(r["tokens"]) - r["prompt_len"] >= 2][:: max(1, len(rows) // n_rows)][:n_rows]
    dec, hit, n = backbone.model, 0, 0
    dtype = next(dec.parameters()).dtype
    with torch.no_grad():
        for r in pick:
            seq = r["tokens"][: r["prompt_len"] + n_tokens]
            pos = torch.arange(len(seq), dtype=torch.int32)
            lg, _, _ = dec(dec.embed(torch.tensor([seq])).to(dtype), pos, causal_mask(pos, len(seq), dtype),
                           dec.empty_cache(len(seq), dtype=dtype))
            pred = lg[0, r["prompt_len"] - 1: -1].argmax(-1).tolist()
            want = seq[r["prompt_len"]:]
            hit += sum(a == b for a, b in zip(pred, want))
            n += len(want)
    if n and hit < agree * n:
        raise UserError(f"{metas[0]['path']}: the local {backbone.spec} ({backbone.fingerprint}) re-predicts only "
                        f"{hit}/{n} of the corpus's first greedy tokens although the fingerprints ({fp}) match; its "
                        f"numerics ({metas[0]['numerics']}) differ too much from this machine's: distil it here")
    return {"checked_tokens": n, "agreed": hit}
