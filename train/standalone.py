"""The baseline MTP beats: a standalone drafter LM with its own embedding table, layers, KV cache and prefill.

Same depth and width as the MTP head (num_blocks layers of the backbone's width), initialised from the backbone
(embedding, final norm and its last layer(s)) and distilled on the same self-distilled data with the same draft-vocab
restricted loss. It drafts by plain greedy decoding on its own cache, so it also pays a prefill of the whole prompt.
"""
import copy
import time

import torch
import torch.nn.functional as F
from tqdm import tqdm

from mtplite.model.decoder import Decoder, causal_mask
from mtplite.train.distill import key_mask, pad_batch


def build_standalone(backbone, num_layers=1):
    c = copy.deepcopy(backbone.model.c)
    src = list(range(c.num_layers - num_layers, c.num_layers))
    c.rope_theta = [c.rope_theta[i] for i in src]
    c.sliding_window = [c.sliding_window[i] for i in src]
    c.num_layers = num_layers
    m = Decoder(c)
    sd = backbone.model.state_dict()
    own = {}
    for k in m.state_dict():
        if k.startswith("layers."):
            i = int(k.split(".")[1])
            own[k] = sd[k.replace(f"layers.{i}.", f"layers.{src[i]}.", 1)].float().clone()
        else:
            own[k] = sd[k].float().clone()
    m.load_state_dict(own)
    m.lm_head.weight = m.embed_tokens.weight  # tied, like the backbone: one table of V x H
    return m


def train_standalone(backbone, rows, draft_ids, *, num_layers=1, epochs=3, batch=8, lr=5e-4, budget_s=None, seed=0,
                     progress=True):
    torch.manual_seed(seed)
    m = build_standalone(backbone, num_layers).train()
    ids = torch.tensor(draft_ids, dtype=torch.long)
    vmap = torch.full((m.c.vocab_size,), -1, dtype=torch.long)
    vmap[ids] = torch.arange(len(ids))
    opt = torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=0.0)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]["tokens"]))
    batches = [order[i : i + batch] for i in range(0, len(order), batch)]
    t0 = time.time()
    bar = tqdm(total=epochs * len(batches), desc="train standalone", unit="batch", disable=not progress)
    for ep in range(epochs):
        perm = torch.randperm(len(batches), generator=torch.Generator().manual_seed(seed + ep),
                              device="cpu").tolist()
        for bi in perm:
            if budget_s and time.time() - t0 > budget_s:
                break
            rs = [rows[i] for i in batches[bi]]
            toks, ok = pad_batch([r["tokens"] for r in rs])
            B, L = toks.shape
            y = torch.full((B, L), -1, dtype=torch.long)
            for b, r in enumerate(rs):
                s = L - len(r["tokens"]) + r["prompt_len"] - 1
                y[b, s : L - 1] = toks[b, s + 1 :]
            pos = torch.arange(L, dtype=torch.int32)
            _, act, _ = m(m.embed(toks), pos, causal_mask(pos, L) + key_mask(ok, L), m.empty_cache(L, B),
                          return_logits=False)
            tgt = torch.where(y >= 0, vmap[y.clamp(min=0)], -1)
            sel = tgt >= 0
            if not sel.any():
                continue
            logits = act[sel] @ m.embed_tokens.weight[ids].t()  # loss over the draft vocabulary, as for the head
            loss = F.cross_entropy(logits, tgt[sel])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            bar.update(1)
            bar.set_postfix(loss=f"{float(loss):.3f}")
    bar.close()
    return m.eval().requires_grad_(False)


def save_standalone(model, out_dir, backbone_fingerprint):
    """standalone.safetensors (the tied LM head is the embedding, stored once) + standalone.json, atomically."""
    import json
    from pathlib import Path

    from safetensors.torch import save_file

    from mtplite.paths import atomic_path, write_text_atomic

    out = Path(out_dir)
    w = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    with atomic_path(out / "standalone.safetensors") as tmp:
        save_file(w, str(tmp))
    write_text_atomic(out / "standalone.json", json.dumps(
        {"format": "mtplite-standalone", "num_layers": model.c.num_layers, "backbone_fingerprint": backbone_fingerprint}))
