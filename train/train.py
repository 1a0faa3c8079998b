"""Train the MTP head by self-distillation under exactly the recurrence drafting runs (training-time test).

For every anchor position j of a distilled sequence s (s_j = the newest token, its KV not yet cached):
  step 1: [emb(s_j) ; act_{j-1}]  at rope position j, attending to backbone keys < j   -> target y_j
  step k: [emb(s_{j+k-1}) ; h_{k-1}] (h = the head's own projected activation)        -> target y_{j+k-1}
where y_i is the backbone's argmax after s_{<=i}. Step k only counts if s_{j+1..j+k-1} are what the backbone would
have emitted (so the fed tokens are the drafts that would have been accepted). All anchors of a batch run as one
pass per step: the head's fixed-position recurrence is a plain causal pass with a strictly-lower mask.

Distributed: under torchrun / accelerate launch (WORLD_SIZE > 1) each rank takes its share of every batch's rows and
DistributedDataParallel averages the gradients; the loss is normalised by the global token count, so n ranks take the
same optimizer steps as 1 process.
"""
import copy
import math
import os
import time
from collections import Counter

import torch
import torch.nn.functional as F
from tqdm import tqdm

from mtplite.model.decoder import NEG_INF, causal_mask
from mtplite.model.head import (FLAG, MTPHead, head_config, token_rows,
                                with_copy_exact)
from mtplite.train.distill import key_mask, pad_batch


def draft_vocab(rows, backbone, size):
    """Frequency-ranked over the backbone's own greedy outputs (the tokens a drafter must predict)."""
    V = backbone.model.c.vocab_size
    size = min(size, V)
    cnt = Counter()
    for r in rows:
        cnt.update(r["tokens"][r["prompt_len"]:])
    ranked = [t for t in backbone.eos_ids if t < V]
    ranked += [t for t, _ in cnt.most_common() if t not in ranked]
    if len(ranked) < size:  # then everything the prompts use, then the rest by id
        pc = Counter()
        for r in rows:
            pc.update(r["tokens"][: r["prompt_len"]])
        seen = set(ranked)
        ranked += [t for t, _ in pc.most_common() if t not in seen]
        seen = set(ranked)
        ranked += [t for t in range(V) if t not in seen][: size - len(ranked)]
    return ranked[:size]


@torch.no_grad()
def features(backbone, rows, layers, dtype=torch.float32, full_labels=False, v_only=(), space=None):
    """Teacher-forced backbone pass for one batch: activations, labels and the KV of `layers` (K left None for the
    layers in v_only: the copy read's layer 0 needs its V alone, and the cache of features keeps what it is given).

    Labels: by default the distilled continuation itself (it IS the backbone's greedy output), so the LM head is
    skipped, which is most of the cost on large vocabularies (4x on Gemma's 262k); anchors inside the prompt then
    have no label. full_labels=True takes the argmax at every position instead (prompt anchors count too); a sampled
    row (distill --temperature) gets the argmax at its generated positions.
    """
    dec = backbone.model
    toks, ok = pad_batch([r["tokens"] for r in rows])
    B, L = toks.shape
    pos = torch.arange(L, dtype=torch.int32)
    mask = causal_mask(pos, L, dtype) + key_mask(ok, L).to(dtype)
    _, act, kv = dec(dec.embed(toks).to(dtype), pos, mask, dec.empty_cache(L, B, dtype), return_logits=False)
    sampled = [bool(r.get("sampled")) for r in rows]
    if full_labels or any(sampled):
        top = torch.empty(B, L, dtype=torch.long)
        for i in range(0, L, 64):  # a [B, L, 262k] logits block would hold GBs at once
            top[:, i: i + 64] = dec.logits(act[:, i: i + 64]).argmax(-1)
    if full_labels:
        labels = top
    else:
        labels = torch.full((B, L), -1, dtype=torch.long)
        for b, r in enumerate(rows):
            start = L - len(r["tokens"]) + r["prompt_len"] - 1  # position whose next token is the first generated
            labels[b, start : L - 1] = top[b, start: L - 1] if sampled[b] else toks[b, start + 1 :]
    # padding's V rows zeroed: the copy read scores each cached row against the rows before it, and the first real
    # row's predecessor must read as the runtime's empty one (zero), not as a pad's row (logits moved by up to 8 on
    # tiny:llama at the anchors that read the first row)
    keep = ok[:, None, None, :].to(kv[0][1].dtype)
    f = {"tokens": toks, "ok": ok, "act": act.float(), "labels": labels, "emb": dec.embed(toks).float(),
         "kv": [(None if i in v_only else kv[i][0].float(), (kv[i][1] * keep).float()) for i in layers]}
    if space is not None:
        f.update(context_features(dec, toks, ok, *space))
    return f


def context_features(dec, toks, ok, vocab_map, space):
    """Each row's ids outside the draft space (vocab_map [V] -> index, `space` for none), for the context draft space
    (MTPHead.step's ctx): ctx_ids [B,M] (-1 pads), the first position each occurs at (ctx_first; drafting at
    position p sees the ids cached before p), their embedding rows and their layer-0 V rows. Every such id
    of the row, not only the M newest the runtime keeps: rows rarely hold more than M = 128 (Gemma's 32 benchmark
    prompts: 108 in all)."""
    B, L = toks.shape
    found = []
    for b in range(B):
        first = {}
        for j in range(L):
            t = int(toks[b, j])
            if ok[b, j] and t not in first and int(vocab_map[t]) >= space:
                first[t] = j
        found.append(first)
    M = max(1, max(len(x) for x in found))
    ids = torch.full((B, M), -1, dtype=torch.long)
    firsts = torch.full((B, M), L, dtype=torch.long)
    for b, first in enumerate(found):
        ids[b, : len(first)] = torch.tensor(list(first), dtype=torch.long)
        firsts[b, : len(first)] = torch.tensor(list(first.values()), dtype=torch.long)
    safe = ids.clamp(min=0)
    with torch.no_grad():
        emb_rows = dec.embed_tokens.weight[safe].float()
        rows = token_rows(dec, safe.reshape(-1)).reshape(B, M, -1)
    return {"ctx_ids": ids, "ctx_first": firsts, "ctx_emb": emb_rows, "ctx_rows": rows}


def context_of(head, f, pos):
    """MTPHead.step's ctx for anchors at `pos` [T] from context_features, or None."""
    if "ctx_ids" not in f:
        return None
    seen = (f["ctx_first"][:, None, :] < pos.long()[None, :, None]) & (f["ctx_ids"][:, None, :] >= 0)  # [B,T,M]
    mask = torch.where(seen, torch.tensor(0.0), torch.tensor(NEG_INF))
    return (f["ctx_emb"], f["ctx_rows"] if head.copy is not None else None, mask), seen


def pack(f, dtype):
    """A features dict stored in `dtype` (lossless when the backbone ran in it); None stays None."""
    if f is None or dtype == torch.float32:
        return f
    return {k: ([(_to(a, dtype), b.to(dtype)) for a, b in v] if k == "kv" else v.to(dtype) if v.is_floating_point() else v)
            for k, v in f.items()}


def nbytes(f):
    """Bytes a (packed) features dict holds."""
    if f is None:
        return 0
    ts = [t for k, v in f.items() for t in ([x for pair in v for x in pair] if k == "kv" else [v])]
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


def available_bytes():
    """The memory the kernel reports available now (Linux), else None."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return None


def _to(t, dtype):
    return None if t is None else t.to(dtype)


def unpack(f):
    if f is None:
        return f
    return {k: ([(_to(a, torch.float32), b.float()) for a, b in v] if k == "kv" else v.float() if v.is_floating_point() else v)
            for k, v in f.items()}


class Rollout(torch.nn.Module):
    """The K-step training rollout as one module call, so DistributedDataParallel sees one forward per step."""

    def __init__(self, head, K):
        super().__init__()
        self.head, self.K = head, K

    def forward(self, f):
        return rollout_loss(self.head, f, self.K)


def rollout_loss(head, f, K):
    """Sum of the loss over valid (anchor, step) pairs, their count, and per-anchor accepted-run lengths.

    The loss is CE on the backbone's greedy token (soft targets, also the backbone's sampling distribution for
    sampled drafting, and feature regression were tried and did not pay: lab/notes/PERF.md)."""
    toks, ok, act, y, emb = f["tokens"], f["ok"], f["act"], f["labels"], f["emb"]
    top = float(act[..., -1].abs().max()) if head.slot else 0.0
    if top >= FLAG / 2:
        from mtplite.errors import UserError

        raise UserError(f"this backbone's activation reaches {top:.0f} in its last dim, "
                        f"where the head carries its draft step (>= {FLAG / 2:.0f} reads as a later step); train with "
                        "--copy-heads 0")
    B, L = toks.shape
    pos = torch.arange(1, L, dtype=torch.int32)
    km = key_mask(ok, L)
    h = act[:, :-1]
    valid = ok[:, 1:] & ok[:, :-1]
    run = torch.ones(B, L - 1, dtype=torch.bool)  # anchor still "accepted" through previous steps
    total, count = sum(p.sum() * 0.0 for p in head.parameters()), 0
    accepted = torch.zeros(B, L - 1)
    ctx, seen = context_of(head, f, pos) or (None, None)
    prep = head.prepare(pos, km, f["kv"], ctx)
    for k in range(1, K + 1):
        idx = torch.arange(1, L) + (k - 1)
        inb = idx < L
        idx = idx.clamp(max=L - 1)
        if k > 1:  # the fed token must equal the backbone's greedy choice, else drafting would have stopped
            valid = valid & inb & (toks[:, idx] == y[:, idx - 1])
        x2 = torch.cat([emb[:, idx], h], -1)
        d, h = head.step(x2, prep)
        yk = y[:, idx]
        tgt = head.vocab_map[yk.clamp(min=0)].long()
        tgt = torch.where(tgt >= head.space, d.shape[-1], tgt)  # outside the draft space: no draft can be right
        if ctx is not None:  # a label outside the draft space is draftable where the context space holds it
            hit = (yk[..., None] == f["ctx_ids"][:, None, :]) & seen
            tgt = torch.where(hit.any(-1), head.space + hit.float().argmax(-1), tgt)
        m = valid & (yk >= 0) & (tgt < d.shape[-1])
        if m.any():
            total = total + F.cross_entropy(d[m], tgt[m], reduction="sum")
            count += int(m.sum())
        run = run & valid & (yk >= 0) & (d.argmax(-1) == tgt)
        accepted += run.float()
    base = ok[:, 1:] & ok[:, :-1] & (y[:, 1:] >= 0)
    return total, count, accepted[base]


def held_out_rows(cache_path, by_task=True, held=None):
    """The held-out rows of a distillation cache (corpus and echo rows), their templates named from the corpus so the
    split is the one training made (pass **split_of(head_meta) for a saved head's)."""
    from mtplite.data import is_echo, training_prompts
    from mtplite.data.splits import split_rows, template_of
    from mtplite.train.distill import load_rows

    corpus = {p["id"]: p for p in training_prompts()}
    rows = [{**r, "template": corpus[r["id"]]["template"] if r["id"] in corpus else template_of(r["id"])}
            for r in load_rows(cache_path).values() if r["id"] in corpus or (held is not None and is_echo(r["id"]))]
    return split_rows(rows, by_task=by_task, held=held)[1]


def pick_device(name="auto"):
    """The device to train on: CUDA when present (cuda:LOCAL_RANK under torchrun), else CPU.

    Callers run distillation and training inside `with device:`, so every tensor the code creates lands there
    without a device argument at each call site; the same code stays traceable on CPU for export.
    """
    from mtplite.errors import UserError

    name = (name or "auto").strip()
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UserError(f"--device {name}: this torch ({torch.__version__}, CUDA {torch.version.cuda}) sees no CUDA "
                            "device; use --device cpu or install a CUDA build of torch")
        dev = torch.device(name if ":" in name else f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}")
        torch.cuda.set_device(dev)
        return dev
    if name != "cpu":
        raise UserError(f"--device {name}: choose auto, cpu or cuda[:N]")
    return torch.device("cpu")


# vocabularies above this (Gemma 262k, SmolLM2 49k) make the LM head most of a distillation step: bf16 and batch 64 pay
LARGE_VOCAB = 32_000


def distill_batch(backbone):
    """Greedy rows per distillation batch: 64 where the LM head dominates (it runs ~2x the rows/s of batch 16 and
    128 measured no faster; lab/notes/PERF.md), 16 otherwise."""
    return 64 if backbone.model.c.vocab_size > LARGE_VOCAB else 16


def bf16_speedup(device):
    """How many times faster a bf16 matmul runs than a float32 one on `device`, measured (CPU) in ~0.1 s.

    bf16 is only fast where the hardware has it: CPUs with AVX512-BF16 / AMX ran Gemma distillation 1.7-3x faster in
    bf16, but an AVX2-only CPU emulates it (a [64,576]x[576,49152] matmul: 11 s in bf16 vs 72 ms in float32, measured
    on an AVX2 EPYC), so choosing by vocabulary size alone made SmolLM2 distillation ~5x slower there."""
    import time

    if device.type == "cuda":
        return 2.0 if torch.cuda.is_bf16_supported() else 0.0
    times = {}
    for dt in (torch.float32, torch.bfloat16):
        a, w = torch.randn(64, 256, device=device).to(dt), torch.randn(256, 1024, device=device).to(dt)
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            a @ w
            best = min(best, time.perf_counter() - t)
        times[dt] = best
    return times[torch.float32] / max(times[torch.bfloat16], 1e-9)


def pick_dtype(name, backbone, device, log=print):
    """--dtype auto|float32|bfloat16 -> the dtype to distil and train in. auto: bf16 for real backbones (vocabulary
    over 32k, where the LM head dominates) on hardware where bf16 is measured faster, else float32."""
    from mtplite.errors import UserError

    if name not in ("auto", "float32", "bfloat16"):
        raise UserError(f"--dtype {name}: choose auto, float32 or bfloat16")
    if name == "float32" or (name == "auto" and backbone.model.c.vocab_size <= LARGE_VOCAB):
        return torch.float32
    x = bf16_speedup(device)
    if name == "bfloat16":
        if x < 1:
            log(f"warning: bf16 runs {1 / max(x, 1e-3):.0f}x slower than float32 on this {device.type} (no native "
                "bf16 kernels); --dtype auto would pick float32")
        return torch.bfloat16
    log(f"dtype auto: bf16 measured {x:.2f}x float32's speed here -> {'bfloat16' if x >= 1.2 else 'float32'}")
    return torch.bfloat16 if x >= 1.2 else torch.float32


def train_head(backbone, rows, *, K=3, draft_vocab_size=4096, read_layers=None, epochs=4, batch=8,
               lr=1e-3, budget_s=None, seed=0, progress=True, log=print, val_rows=None, dtype=torch.float32,
               init_head=None, copy_heads=0, context=0, copy_exact=None, cache_bytes=None):
    """copy_exact: None keeps the starting head's (0 for a new head); a number sets it; "auto" picks it on val_rows
    after training (tune_copy_exact), a head without a copy read keeping 0. cache_bytes: the most the backbone
    features kept for later epochs may hold (default: half the memory available at the start); batches past it are
    recomputed each epoch, the same features, so the same training."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    ddp = world > 1
    if ddp and not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    torch.manual_seed(seed)
    if init_head is not None:  # fine-tune (e.g. onto a quantized backbone): keeps its config and draft vocabulary
        head = copy.deepcopy(init_head).train()
        head.to(next(backbone.model.parameters()).device)
        head.c.context = context or head.c.context  # a head trained without the context space can learn it
    else:
        dv = draft_vocab(rows, backbone, draft_vocab_size)
        head = MTPHead(head_config(backbone.model.c, dv, K=K, read_layers=read_layers, copy_heads=copy_heads,
                                   context=context))
        head.init_from_backbone(backbone.model)
    c = head.c
    model = Rollout(head, K)
    if ddp:
        dev = next(head.parameters()).device
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev] if dev.type == "cuda" else None)
    opt = torch.optim.AdamW([p for p in head.parameters() if p.requires_grad], lr=lr, weight_decay=0.01)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]["tokens"]))
    batches = [order[i : i + batch] for i in range(0, len(order), batch)]
    steps_total = epochs * len(batches)
    t0 = time.time()
    # the last held-out evaluation (with the copy_exact sweep) runs after the last batch: its measured cost comes out
    # of the budget, or a 35-min budget ran 53 min (Gemma, 1,093 held-out rows: 4.4 min to evaluate, 14 to sweep)
    sweep = sorted({float(v) for v in EXACT_VALUES} | {float(c.copy_exact)}) \
        if copy_exact == "auto" and c.copy_heads and val_rows and rank == 0 else None
    if budget_s and val_rows and rank == 0 and not ddp:
        budget_s = max(budget_s - final_eval_s(head, backbone, val_rows, K, sweep, dtype), 0.1 * budget_s)

    def progress_at(s):
        """Share of training done: by steps, or by time when a budget will end it first (so the cosine still anneals
        to ~0 by the end; without a budget the schedule depends on steps only and stays deterministic). Not under
        DDP: each rank's clock differs, and ranks stepping with different learning rates would drift apart."""
        p = s / max(1, steps_total)
        if budget_s and not ddp:
            p = max(p, (time.time() - t0) / budget_s)
        return min(1.0, p)

    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * progress_at(s))))
    cache, cached, full = {}, 0, False
    if cache_bytes is None:
        avail = available_bytes()
        cache_bytes = avail // 2 if avail is not None else 8 << 30
    best = (-1.0, None)
    swept = None  # the sweep's τ per value, when it ran on the weights training ends with
    history = []
    steps = 0
    bar = tqdm(total=steps_total, desc="train head", unit="batch", disable=not progress or rank != 0)
    stop = False
    for ep in range(epochs):
        ep_steps = 0
        g = torch.Generator().manual_seed(seed * 1000 + ep)
        perm = torch.randperm(len(batches), generator=g, device="cpu").tolist()
        for bi in perm:
            over = torch.tensor(float(bool(budget_s) and time.time() - t0 > budget_s))
            if ddp:  # every rank must stop at the same step, or the others wait forever in all_reduce
                torch.distributed.all_reduce(over, op=torch.distributed.ReduceOp.MAX)
            if over.item():
                stop = True
                break
            if bi in cache:
                f = unpack(cache[bi])
            else:
                # under DDP every rank takes its share of the rows of the same batch: with the loss normalised by
                # the global count, the summed gradient equals the one-process gradient of the whole batch
                mine = batches[bi][rank::world]
                f = features(backbone, [rows[i] for i in mine], head.kv_layers, dtype, v_only=head.v_only_layers,
                             space=space_of(head)) if mine else None
                # kept for the next epochs, in the backbone's dtype (1M tokens: 16 GB in float32), as far as memory
                # allows: a 1.8M-token corpus would have outgrown a 24 GB machine late in its first epoch
                if epochs > 1 and not full:
                    packed = pack(f, dtype)
                    size = nbytes(packed)
                    if cached + size <= cache_bytes:
                        cache[bi], cached = packed, cached + size
                    else:
                        full = True
                        log(f"feature cache full at {cached / 2**30:.1f} GB ({len(cache)} of {len(batches)} batches): "
                            "the rest are recomputed each epoch")
            if f is None:
                total, count = sum(p.sum() * 0.0 for p in head.parameters()), 0
            else:
                total, count = model(f)[:2]
            n = torch.tensor(float(count))
            if ddp:  # DDP averages gradients over ranks: scale so the result is sum / global count
                torch.distributed.all_reduce(n)
            (total * world / n.clamp(min=1)).backward()
            torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            sched.step()
            bar.update(1)
            steps += 1
            ep_steps += 1
            bar.set_postfix(loss=f"{float(total.detach()) / max(count, 1):.3f}")
        # an epoch the budget ended before its first step changed nothing: evaluating it again only cost time (on
        # SmolLM2 160 s) and wrote a duplicate history entry
        if val_rows and rank == 0 and (ep_steps or not history):
            final = stop or ep == epochs - 1
            if final and sweep:  # the sweep's backbone pass is this evaluation's too
                taus = evaluate_each([with_copy_exact(head, v) for v in sweep], backbone, val_rows, K, dtype=dtype)
                tau = taus[sweep.index(float(c.copy_exact))]
            else:
                tau = evaluate(head, backbone, val_rows, K, dtype=dtype)
            history.append({"epoch": ep, "val_accept_length": tau, "elapsed_s": time.time() - t0})
            log(f"epoch {ep}: held-out accept_length {tau:.3f}")
            if tau > best[0]:
                best = (tau, {k: v.clone() for k, v in head.state_dict().items()})
                swept = taus if final and sweep else None
        if stop:
            break
    bar.close()
    if best[1] is not None:  # early stopping on the held-out split
        head.load_state_dict(best[1])
    if ddp:
        torch.distributed.barrier()
    head.eval()
    info = {"history": history, "train_s": time.time() - t0, "best_val_accept_length": best[0], "steps": steps}
    if copy_exact == "auto":
        if sweep:
            value, info["copy_exact_sweep"] = (pick_copy_exact(sweep, swept, len(val_rows)) if swept else
                                               tune_copy_exact(head, backbone, val_rows, K, sweep, dtype=dtype))
            log(f"copy_exact {value:g} (held-out τ by bonus: {info['copy_exact_sweep']['tau']})")
            head = with_copy_exact(head, value)
    elif copy_exact is not None:
        head = with_copy_exact(head, copy_exact)
    return head, info


def space_of(head, context=None):
    """features()'s `space` argument: the head's draft space where it drafts with a context space, else None."""
    return (head.vocab_map, head.space) if (head.c.context if context is None else context) else None


@torch.no_grad()
def accepted_runs(head, backbone, rows, K, batch=8, dtype=torch.float32, context=None):
    """Teacher-forced drafts accepted in a row at every anchor of `rows` (one backbone pass per row). context: with
    or without the context draft space (default: as the head trained)."""
    return runs_each([head], backbone, rows, K, batch, dtype, context)[0]


@torch.no_grad()
def runs_each(heads, backbone, rows, K, batch=8, dtype=torch.float32, context=None):
    """accepted_runs of several heads that read the same backbone features (one head's variants, e.g. copy_exact
    values): the backbone pass, most of an evaluation's cost, runs once per batch for all of them."""
    h0, runs = heads[0], [[] for _ in heads]
    for i in range(0, len(rows), batch):
        f = features(backbone, rows[i : i + batch], h0.kv_layers, dtype, v_only=h0.v_only_layers,
                     space=space_of(h0, context))
        for r, h in zip(runs, heads):
            r.append(rollout_loss(h, f, K)[2])
    return [torch.cat(r) if r else torch.zeros(0) for r in runs]


def evaluate(head, backbone, rows, K, batch=8, dtype=torch.float32, context=None):
    """Teacher-forced estimate of accept_length: 1 + drafts accepted in a row, over every anchor."""
    return evaluate_each([head], backbone, rows, K, batch, dtype, context)[0]


def evaluate_each(heads, backbone, rows, K, batch=8, dtype=torch.float32, context=None):
    """evaluate() of each head of runs_each (one backbone pass per batch for all)."""
    return [float(1 + a.mean()) if len(a) else 0.0 for a in runs_each(heads, backbone, rows, K, batch, dtype, context)]


# the weaker the head, the larger the bonus that drafts best (a 1M-token Gemma head gains 0.015 τ, a 38k-token SmolLM2
# head 0.35; lab/notes/PERF.md), so it is chosen per head on held-out rows
EXACT_VALUES = (0.0, 2.0, 4.0, 8.0, 16.0)


def tune_copy_exact(head, backbone, rows, K, values=EXACT_VALUES, tie=0.002, dtype=torch.float32):
    """The copy_exact (model/head.py CopyRead.forward) that drafts best on `rows`, teacher-forced (a head's own
    held-out rows, never the benchmark), and the sweep as a record. Ties within `tie` go to the smaller bonus."""
    values = sorted({float(v) for v in values})
    taus = evaluate_each([with_copy_exact(head, v) for v in values], backbone, rows, K, dtype=dtype)
    return pick_copy_exact(values, taus, len(rows), tie)


def pick_copy_exact(values, taus, n_rows, tie=0.002):
    top = max(taus)
    best = min(v for v, t in zip(values, taus) if t >= top - tie)
    return best, {"held_out_rows": n_rows, "tau": {f"{v:g}": round(t, 4) for v, t in zip(values, taus)},
                  "chosen": best}


def final_eval_s(head, backbone, rows, K, sweep=None, dtype=torch.float32, sample=16):
    """Seconds the last held-out evaluation will take (with the copy_exact sweep's variants if any), timed on
    `sample` rows spread over `rows` and scaled by tokens."""
    pick = rows[:: max(1, len(rows) // sample)][:sample]
    heads = [with_copy_exact(head, v) for v in sweep] if sweep else [head]
    t = time.time()
    evaluate_each(heads, backbone, pick, K, dtype=dtype)
    size = lambda rs: sum(len(r["tokens"]) for r in rs)  # noqa: E731
    return (time.time() - t) * size(rows) / max(1, size(pick))
