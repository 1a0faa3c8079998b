"""The exported graphs: thin wrappers that give the torch modules the LiteRT-LM tensor names.

The names are the interface between Python, the bundle and Kotlin; they are defined here once:
  embedder   decode_embedder / prefill_embedder_<N>: token_ids [1,T] i32 -> embeddings [1,T,H] (scale inside)
  backbone   prefill_<N>: embeddings, input_pos, mask, kv_cache_* -> kv_cache_*
             decode / verify (T = K+1): ... -> logits [1,T,V], activations [1,T,H], kv_cache_*
  drafter    mtp_drafter: activations [1,1,2H], input_pos [1] (the newest cached token's position, as LiteRT-LM
             passes it), mask [1,1,1,C], kv_cache_* (read layers only)
             -> logits [1,1,V], projected_activations [1,1,H]
  drafter_ctx  mtp_draft_k (our runtime and the Kotlin core; the .litertlm keeps the contract's drafter): all K
             draft steps in one call, over the draft space and the context draft space. The same inputs plus
             context_emb [1,M,H] (unscaled embedding rows), context_mask [1,1,M] (additive), context_ids [1,M] i32,
             context_rows [1,M,KVH*D] (with the copy read)
             -> draft_ids [1,K] i32, draft_probs [1,K] (each draft's softmax probability over the space, for the
                confidence gate), projected_activations [1,1,H] (the last step's)
             mtp_draft_k_<W>: the same over the cache's first W slots (contract.draft_k_windows), same I/O
"""
import torch
from torch import nn

from mtplite.model.decoder import kv_shapes


def k_name(i):
    return f"kv_cache_k_{i}"


def v_name(i):
    return f"kv_cache_v_{i}"


class EmbedderGraph(nn.Module):
    def __init__(self, dec):
        super().__init__()
        self.dec = dec

    def forward(self, token_ids):
        return {"embeddings": self.dec.embed(token_ids)}


class BackboneGraph(nn.Module):
    def __init__(self, dec, with_logits=True):
        super().__init__()
        self.dec, self.with_logits = dec, with_logits

    def forward(self, embeddings, input_pos, mask, **kv):
        n = self.dec.c.num_layers
        cache = [(kv[k_name(i)], kv[v_name(i)]) for i in range(n)]
        logits, act, new = self.dec(embeddings, input_pos, mask, cache, return_logits=self.with_logits)
        out = {"logits": logits, "activations": act} if self.with_logits else {}
        for i, (k, v) in enumerate(new):
            out[k_name(i)], out[v_name(i)] = k, v
        return out


class DrafterGraph(nn.Module):
    def __init__(self, head):
        super().__init__()
        self.head = head

    def forward(self, activations, input_pos, mask, **kv):
        reads = [(kv.get(k_name(i)), kv[v_name(i)]) for i in self.head.kv_layers]
        # LiteRT-LM passes the position of the newest *cached* token (its mask shows 0..input_pos); the head counts
        # from the token it drafts after, one further on. Fed the head's own position, the engine's drafts hid the
        # newest cached token and roped the query one step back (its success rate equalled ours run that way).
        logits, proj = self.head(activations, input_pos + 1, mask, reads)
        return {"logits": logits, "projected_activations": proj}


class DraftKGraph(nn.Module):
    """The head's K draft steps unrolled in one graph, with the context draft space (MTPHead.step's ctx): argmax, the
    draft-space index -> token id map and the next step's embedding row all stay inside, so one call replaces K
    drafter calls, K embedder calls and K full-vocabulary logit reads (lab/notes/PERF.md). Drafts are the head's argmax,
    also when the runtime samples: verify samples every row with plain sampling's u_t, so any drafts keep the output
    exact, and a head trained on greedy labels drafts its argmax more often right than its coupled sample."""

    def __init__(self, head, dec, window=None):
        super().__init__()
        self.head, self.window = head, window
        ids = head.draft_ids_t
        with torch.no_grad():  # the draft space's embedding rows as the embedder scales them (the next step's input)
            self.register_buffer("space_emb", dec.embed(ids[None])[0].float().clone())
        self.register_buffer("space_ids", ids.to(torch.int32))
        self.scale = float(dec.c.embed_scale)

    def forward(self, activations, input_pos, mask, context_emb, context_mask, context_ids, context_rows=None, **kv):
        reads = [(kv.get(k_name(i)), kv[v_name(i)]) for i in self.head.kv_layers]
        if self.window:  # the first `window` slots only (the cache is linear: slot = position): draft_k_windows
            W = self.window
            reads = [(None if k is None else k[:, :, :W], v[..., :W]) for k, v in reads]
            mask = mask[..., :W]
        ctx = (context_emb, context_rows, context_mask)
        S, H, K = len(self.space_ids), self.head.c.hidden_size, self.head.c.K
        x2, toks, probs = activations, [], []
        prep = self.head.prepare(input_pos, mask, reads, ctx)  # once, not once per step
        for j in range(K):
            d, h = self.head.step(x2, prep)  # d [1,1,S+M]: the draft space, then the context ids
            d = d[0, 0]
            top = d.max()
            i = torch.argmax(d).reshape(1)
            # one row from each table and a select, not the two tables concatenated: that concat copied the
            # [S,H] float32 space rows (10 MB on Gemma) every call, cold after verify (lab/notes/PERF.md)
            own, cx = i < S, (i - S).clamp(min=0)
            si = i.clamp(max=S - 1)
            toks.append(torch.where(own, self.space_ids[si], context_ids[0][cx]))
            probs.append((1.0 / torch.exp(d - top).sum()).reshape(1))
            if j < K - 1:
                row = torch.where(own.reshape(1, 1), self.space_emb[si], context_emb[0][cx] * self.scale)
                x2 = torch.cat([row.reshape(1, 1, H), h], -1)
        return {"draft_ids": torch.cat(toks)[None].to(torch.int32), "draft_probs": torch.cat(probs)[None],
                "projected_activations": h}


def kv_samples(c, C, layers=None):
    kv = {}
    for i in layers if layers is not None else range(c.num_layers):
        ks, vs = kv_shapes(c, C)
        kv[k_name(i)], kv[v_name(i)] = torch.zeros(ks), torch.zeros(vs)
    return kv


def backbone_sample(c, T, C):
    return {"embeddings": torch.zeros(1, T, c.hidden_size), "input_pos": torch.arange(T, dtype=torch.int32),
            "mask": torch.zeros(1, 1, T, C), **kv_samples(c, C)}


def drafter_sample(c, hc, C):
    kv = kv_samples(c, C, hc.read_layers)
    if hc.copy_heads:  # the copy read takes layer 0's V only
        kv.setdefault(v_name(0), torch.zeros(kv_shapes(c, C)[1]))
    return {"activations": torch.zeros(1, 1, 2 * c.hidden_size), "input_pos": torch.zeros(1, dtype=torch.int32),
            "mask": torch.zeros(1, 1, 1, C), **kv}


def drafter_ctx_sample(c, hc, C, M):
    s = drafter_sample(c, hc, C)
    s.update({"context_emb": torch.zeros(1, M, c.hidden_size), "context_mask": torch.zeros(1, 1, M),
              "context_ids": torch.zeros(1, M, dtype=torch.int32)})
    if hc.copy_heads:
        s["context_rows"] = torch.zeros(1, M, c.num_kv_heads * c.head_dim)
    return s


class StandaloneGraph(nn.Module):
    """The standalone drafter baseline: token ids in (its own embedding), its own KV cache."""

    def __init__(self, dec, with_logits=True):
        super().__init__()
        self.dec, self.with_logits = dec, with_logits

    def forward(self, token_ids, input_pos, mask, **kv):
        cache = [(kv[k_name(i)], kv[v_name(i)]) for i in range(self.dec.c.num_layers)]
        logits, _, new = self.dec(self.dec.embed(token_ids), input_pos, mask, cache, return_logits=self.with_logits)
        out = {"logits": logits} if self.with_logits else {}
        for i, (k, v) in enumerate(new):
            out[k_name(i)], out[v_name(i)] = k, v
        return out


def standalone_sample(c, T, C):
    return {"token_ids": torch.zeros(1, T, dtype=torch.int32), "input_pos": torch.arange(T, dtype=torch.int32),
            "mask": torch.zeros(1, 1, T, C), **kv_samples(c, C)}
