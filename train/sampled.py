"""Teacher-forced acceptance of coupled drafts on sampled rows (distill --temperature): how far a head's drafts would
run under speculative sampling, without exporting a bundle.

A sampled row is one of the backbone's own sampled trajectories at a recorded seed, so its token at cache position t
is the backbone's sample with u_t = uniform(seed, t). A coupled draft for position t is the head's own sample with
the same u_t (model/sampling.py, over the head's draft space), and it is accepted exactly when it equals the row's
token; an accepted draft is the token the next step is fed, as it is here. So this is the acceptance the runtime gets
at the row's sampler settings, up to float rounding near a sampler boundary.
"""
import torch

from mtplite.model.sampling import uniform
from mtplite.train.distill import key_mask
from mtplite.train.train import context_of, features, space_of


def inverse_cdf(lg, ids, u, temperature, top_k, top_p):
    """model/sampling.py's sampler over rows of logits at once: lg [N,C] (columns whose id is < 0 are not drawable),
    ids [N,C] their token ids, u [N] -> the drawn ids [N]. Ties between equal logits go by column, not id (a
    measure-zero difference on trained logits)."""
    lg = lg.double().masked_fill(ids < 0, float("-inf"))
    v, order = lg.sort(-1, descending=True)
    if 0 < top_k < v.shape[-1]:
        v, order = v[:, :top_k], order[:, :top_k]
    p = torch.exp((v - v[:, :1]) / temperature)
    c = p.cumsum(-1)
    if top_p < 1.0:  # the shortest prefix with mass >= top_p
        keep = torch.searchsorted(c, top_p * c[:, -1:]) + 1
        p = torch.where(torch.arange(p.shape[-1])[None] < keep, p, 0.0)
        c = p.cumsum(-1)
    i = torch.searchsorted(c, (u[:, None].double() * c[:, -1:]), right=True).clamp(max=p.shape[-1] - 1)
    return ids.gather(-1, order.gather(-1, i)).squeeze(-1)


@torch.no_grad()
def coupled_runs(head, f, K, rows):
    """Per anchor of a features() batch of sampled rows: how many coupled drafts in a row equal the row's tokens."""
    toks, ok, act, emb = f["tokens"], f["ok"], f["act"], f["emb"]
    B, L = toks.shape
    pos = torch.arange(1, L, dtype=torch.int32)
    ctx, seen = context_of(head, f, pos) or (None, None)
    prep = head.prepare(pos, key_mask(ok, L), f["kv"], ctx)
    ids = head.draft_ids_t[None, None].expand(B, L - 1, -1)
    if ctx is not None:
        cids = torch.where(seen, f["ctx_ids"][:, None, :], -1)
        ids = torch.cat([ids, cids], -1)
    pad = [L - len(r["tokens"]) for r in rows]
    # u for the token at cache position t of each row (t counted without the left padding)
    us = torch.tensor([[uniform(r["seed"], j - pad[b]) for j in range(L)] for b, r in enumerate(rows)],
                      dtype=torch.float64)
    gen = torch.tensor([[j - pad[b] >= r["prompt_len"] for j in range(L)] for b, r in enumerate(rows)])
    h = act[:, :-1]
    runs = {"coupled": torch.ones(B, L - 1, dtype=torch.bool), "argmax": torch.ones(B, L - 1, dtype=torch.bool)}
    accepted = {k: torch.zeros(B, L - 1) for k in runs}
    T, top_k, top_p = rows[0]["sampler"]
    for k in range(1, K + 1):
        idx = (torch.arange(1, L) + (k - 1)).clamp(max=L - 1)
        inb = torch.arange(1, L) + k < L  # the drafted token's position idx + 1 is in the row
        d, h = head.step(torch.cat([emb[:, idx], h], -1), prep)
        nxt = (idx + 1).clamp(max=L - 1)
        flat, fids = d.reshape(B * (L - 1), -1), ids.reshape(B * (L - 1), -1)
        drafts = {"coupled": inverse_cdf(flat, fids, us[:, nxt].reshape(-1), T, top_k, top_p),
                  "argmax": fids.gather(-1, flat.masked_fill(fids < 0, float("-inf")).argmax(-1, keepdim=True))[:, 0]}
        for name, dr in drafts.items():
            runs[name] = runs[name] & inb[None] & gen[:, nxt] & (dr.reshape(B, L - 1) == toks[:, nxt])
            accepted[name] += runs[name].float()
    anchors = ok[:, 1:] & ok[:, :-1] & gen[:, 1:]  # anchors whose first draft is a generated token
    return {k: a[anchors] for k, a in accepted.items()}


def coupled_accept_length(head, backbone, rows, K, batch=8, dtype=torch.float32):
    """{sampler settings: {"coupled": τ, "argmax": τ, "anchors": n}} over sampled `rows`: 1 + drafts accepted in a
    row per anchor, the head drafting coupled samples or its argmax."""
    out = {}
    for s in sorted({r["sampler"] for r in rows}):
        rs, runs = [r for r in rows if r["sampler"] == s], {"coupled": [], "argmax": []}
        for i in range(0, len(rs), batch):
            f = features(backbone, rs[i: i + batch], head.kv_layers, dtype, v_only=head.v_only_layers,
                         space=space_of(head))
            for k, a in coupled_runs(head, f, K, rs[i: i + batch]).items():
                runs[k].append(a)
        n = sum(len(a) for a in runs["coupled"])
        out["T {:g} top-k {} top-p {:g}".format(*s)] = {
            **{k: round(float(1 + torch.cat(v).mean()), 4) if n else 0.0 for k, v in runs.items()}, "anchors": n}
    return out
