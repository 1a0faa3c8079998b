"""The exported graphs: thin wrappers that give the torch modules the LiteRT-LM tensor names.

The names are the interface between Python, the bundle and Kotlin; they are defined here once:
  embedder   decode_embedder / prefill_embedder_<N>: token_ids [1,T] i32 -> embeddings [1,T,H] (scale inside)
  backbone   prefill_<N>: embeddings, input_pos, mask, kv_cache_* -> kv_cache_*
             decode / verify (T = K+1): ... -> logits [1,T,V], activations [1,T,H], kv_cache_*
  drafter    mtp_drafter: activations [1,1,2H], input_pos [1], mask [1,1,1,C], kv_cache_* (read layers only)
             -> logits [1,1,V], projected_activations [1,1,H]
  drafter_ctx  mtp_drafter_ctx (our runtime only; the .litertlm keeps the contract's drafter): the same inputs plus
             context_emb [1,M,H], context_mask [1,1,M] (additive), context_rows [1,M,KVH*D] (with the copy read)
             -> draft_logits [1,1,S+M] (the draft space, then the M context ids), projected_activations [1,1,H]
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
        logits, proj = self.head(activations, input_pos, mask, reads)
        return {"logits": logits, "projected_activations": proj}


class DrafterCtxGraph(nn.Module):
    """The drafter with the context draft space (MTPHead.step's ctx): logits over the draft space and the M context
    ids the runtime passes, not scattered to the full vocabulary (the runtime maps the argmax back)."""

    def __init__(self, head):
        super().__init__()
        self.head = head

    def forward(self, activations, input_pos, mask, context_emb, context_mask, context_rows=None, **kv):
        reads = [(kv.get(k_name(i)), kv[v_name(i)]) for i in self.head.kv_layers]
        d, proj = self.head.step(activations, input_pos, mask, reads, (context_emb, context_rows, context_mask))
        return {"draft_logits": d, "projected_activations": proj}


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
    s.update({"context_emb": torch.zeros(1, M, c.hidden_size), "context_mask": torch.zeros(1, 1, M)})
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
