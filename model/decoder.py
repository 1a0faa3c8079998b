"""The frozen backbone as one export-friendly decoder (Gemma 3, Qwen 2/3, Llama families).

Why our own module instead of litert-torch's HF export path: one module is then the torch reference, the training
data source and the exported graph, so "the graph matches the reference" is true by construction and tested; and
every family we support gets the same LiteRT-LM contract (float additive masks, `activations`, the KV layout below)
without patching litert-torch's per-family export code (0.10's verify mask is built as bool and masks nothing).
Weights are copied from the Hugging Face model that transformers loads (checkpoint dir or GGUF).

KV layout (the LiteRT-LM default): K `[B, KVH, C, D]` (sequence axis 2), V `[B, KVH, D, C]` (sequence axis 3);
`kv_shapes` and `v_rows` below are its one definition, used by training, export, both runtimes' readers and the tests.
Family quirks live in `DecoderConfig` flags, read from the HF config in `config_from_hf`.
"""
import math
from contextlib import contextmanager
from dataclasses import dataclass, field, asdict

import torch
import torch.nn.functional as F
from torch import nn

NEG_INF = -1e9  # additive mask value; finite so that a fully masked row never produces NaN


def softcap(x, cap):
    """Gemma's final logit softcap (cap 0: none); also applied to the draft vocabulary's teacher logits in training."""
    return torch.tanh(x / cap) * cap if cap else x


@dataclass
class DecoderConfig:
    family: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: list = field(default_factory=list)  # per layer
    sliding_window: list = field(default_factory=list)  # per layer, 0 = global
    rms_eps: float = 1e-6
    norm_offset: bool = False  # Gemma RMSNorm scales by (1 + w)
    embed_scale: float = 1.0  # Gemma multiplies embeddings by sqrt(H)
    qk_norm: bool = False  # Gemma 3 / Qwen 3
    qkv_bias: bool = False  # Qwen 2
    sandwich_norm: bool = False  # Gemma: extra norms after attention and MLP
    act: str = "silu"
    attn_scale: float = 0.0
    final_softcap: float = 0.0

    def to_dict(self):
        return asdict(self)


def _get(cfg, *names, default=None):
    for n in names:
        v = getattr(cfg, n, None)
        if v is not None:
            return v
    return default


def _rope_theta(cfg, layer_type):
    params = getattr(cfg, "rope_parameters", None) or {}
    if layer_type in params and isinstance(params[layer_type], dict):
        params = params[layer_type]
    rope_type = params.get("rope_type", "default")
    if rope_type not in ("default", None):
        raise ValueError(f"rope scaling '{rope_type}' is not supported yet (only plain RoPE)")
    theta = params.get("rope_theta") or _get(cfg, "rope_theta", default=10000.0)
    if layer_type == "sliding_attention" and _get(cfg, "rope_local_base_freq") and "sliding_attention" not in (
        getattr(cfg, "rope_parameters", None) or {}
    ):
        theta = cfg.rope_local_base_freq
    return float(theta)


def config_from_hf(cfg) -> DecoderConfig:
    mt = cfg.model_type
    family = {"gemma3_text": "gemma3", "gemma3": "gemma3", "qwen3": "qwen3", "qwen2": "qwen2", "llama": "llama"}.get(mt)
    if family is None:
        raise ValueError(f"backbone family '{mt}' is not supported (supported: gemma3, qwen2, qwen3, llama)")
    if family == "gemma3" and hasattr(cfg, "text_config") and cfg.text_config is not None:
        cfg = cfg.text_config
    n = cfg.num_hidden_layers
    head_dim = _get(cfg, "head_dim", default=cfg.hidden_size // cfg.num_attention_heads)
    layer_types = getattr(cfg, "layer_types", None) or ["full_attention"] * n
    window = _get(cfg, "sliding_window", default=0) or 0
    if family in ("qwen2", "qwen3") and not getattr(cfg, "use_sliding_window", False):
        layer_types = ["full_attention"] * n
    c = DecoderConfig(
        family=family,
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_layers=n,
        num_heads=cfg.num_attention_heads,
        num_kv_heads=_get(cfg, "num_key_value_heads", default=cfg.num_attention_heads),
        head_dim=head_dim,
        rope_theta=[_rope_theta(cfg, t) for t in layer_types],
        sliding_window=[window if t == "sliding_attention" else 0 for t in layer_types],
        rms_eps=_get(cfg, "rms_norm_eps", default=1e-6),
    )
    if family == "gemma3":
        c.norm_offset, c.embed_scale, c.qk_norm, c.sandwich_norm = True, math.sqrt(cfg.hidden_size), True, True
        c.act = "gelu_tanh"
        c.attn_scale = cfg.query_pre_attn_scalar ** -0.5
        c.final_softcap = float(getattr(cfg, "final_logit_softcapping", None) or 0.0)
    else:
        c.attn_scale = head_dim ** -0.5
        c.qk_norm = family == "qwen3"
        c.qkv_bias = family == "qwen2" or bool(getattr(cfg, "attention_bias", False))
    return c


class RMSNorm(nn.Module):
    def __init__(self, dim, eps, offset, rows=True):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim) if offset else torch.ones(dim))
        self.eps, self.offset, self.rows = eps, offset, rows

    def forward(self, x):
        # Normalized as rows [N, dim]: XNNPACK then rounds a row the same whatever the number of rows, so the exported
        # decode (1 row) and verify (K+1 rows) agree bit for bit (lab/probes/decode_vs_verify.py; with the
        # [1, T, dim] form, one Gemma layer in three flipped a bit after a fully-connected op). rows=False keeps the
        # input's shape (see HeadBlock's attn_norm).
        xf = x.float().reshape(-1, x.shape[-1]) if self.rows else x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        w = self.weight.float() + 1.0 if self.offset else self.weight.float()
        return (xf * w).to(x.dtype).reshape(x.shape)


def rope_tables(pos, d, theta, dtype):
    """(cos, sin) [T, D] of a half-split rotary embedding at positions pos [T]: what rotate() applies."""
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = pos.float()[:, None] * inv[None, :]  # [T, D/2]
    cos, sin = torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)
    return torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)


def rotate(x, cos, sin):
    d = x.shape[-1]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def rope(x, pos, theta):
    """x [B, heads, T, D]; pos [T] int. Half-split rotary embedding (HF convention)."""
    return rotate(x, *rope_tables(pos, x.shape[-1], theta, x.dtype))


def window_mask(q_pos, cache_len, window, dtype):
    """Additive mask hiding keys more than `window` positions behind each query (sliding-attention layers)."""
    k_pos = torch.arange(cache_len, dtype=torch.int32)
    far = (q_pos[:, None].to(torch.int32) - k_pos[None, :]) >= window
    return torch.where(far, torch.tensor(NEG_INF, dtype=dtype), torch.tensor(0.0, dtype=dtype))


def kv_shapes(c, cache_len, batch=1):
    """One layer's (K shape, V shape): V is stored transposed so that decode's P @ V reads it without a transpose."""
    return (batch, c.num_kv_heads, cache_len, c.head_dim), (batch, c.num_kv_heads, c.head_dim, cache_len)


def v_rows(v, positions=None):
    """A V cache [B,KVH,D,C] as rows [B,n,KVH*D] (heads concatenated) at `positions` (all C when None): the copy read
    and the context draft space read layer 0's rows this way. Torch tensor or numpy array."""
    x = v if positions is None else v[..., positions]
    B, KVH, D, n = x.shape
    return x.swapaxes(1, 3).swapaxes(2, 3).reshape(B, n, KVH * D)  # [B,n,KVH,D], copied contiguous as reshape does


def write_cache(kc, vc, k_new, v_new, pos):
    """Out-of-place cache write (in-place writes are dropped by litert-torch conversion).

    A one-hot matmul instead of index_copy/scatter: it lowers to plain BATCH_MATMUL + MUL/ADD on every backend.
    Rows go to pos[0], pos[0]+1, ... (a contiguous slice, like dynamic_update_slice): LiteRT-LM zero-fills the
    input_pos of a partly used prefill chunk, so trusting every entry would write the padding over position 0.
    Rows past the cache end match no slot and are dropped.
    kc [B,KVH,C,D], vc [B,KVH,D,C], k_new/v_new [B,KVH,T,D], pos [T].
    """
    C, T = kc.shape[2], k_new.shape[2]
    dst = pos[:1].to(torch.int32) + torch.arange(T, dtype=torch.int32)
    onehot = (torch.arange(C, dtype=torch.int32)[None, :] == dst[:, None]).to(kc.dtype)  # [T,C]
    keep = 1.0 - onehot.sum(0)  # [C]
    kc = kc * keep[:, None] + torch.matmul(onehot.t(), k_new)
    vc = vc * keep[None, :] + torch.matmul(v_new.transpose(-1, -2), onehot)
    return kc, vc


def write_cache_inplace(kc, vc, k_new, v_new, pos):
    """write_cache's eager twin for inference that consumes its cache linearly (distillation): the same values in
    the same slots, written into the given buffers. The one-hot rebuild reads and writes every layer's whole cache
    each step, 35% of a batch-64 Gemma decode step on a 2-core CPU."""
    p0 = int(pos[0])
    T = max(0, min(k_new.shape[2], kc.shape[2] - p0))
    kc[:, :, p0 : p0 + T] = k_new[:, :, :T]
    vc[:, :, :, p0 : p0 + T] = v_new[:, :, :T].transpose(-1, -2)
    return kc, vc


class PackedLinear(nn.Module):
    """nn.Linear with its weight pre-packed once by oneDNN (CPU float32 inference). MKL repacks the weight on every
    call; for Gemma's [262144, 640] LM head at 64 rows that repacking was 40% of the matmul (measured 480 -> 274 ms,
    same float32 math up to summation order)."""

    def __init__(self, lin):
        super().__init__()
        from torch.utils.mkldnn import MkldnnLinear

        self.inner = MkldnnLinear(lin, torch.float)

    def forward(self, x):
        return self.inner(x.reshape(-1, x.shape[-1]).contiguous()).reshape(*x.shape[:-1], -1)


@contextmanager
def fast_decode(dec, dtype=torch.float32):
    """Within the block, `dec` writes its KV cache in place and (float32 on CPU, where oneDNN is built in) runs a
    pre-packed LM head. Eager no-grad inference only: never around export, training, or a caller that keeps an older
    cache to roll back to."""
    lm_head = dec.lm_head
    pack = (dtype == torch.float32 and lm_head.weight.device.type == "cpu" and torch.backends.mkldnn.is_available())
    for b in dec.layers:
        b.inplace_cache = True
    try:
        if pack:
            dec.lm_head = PackedLinear(lm_head)
        yield dec
    finally:
        dec.lm_head = lm_head
        for b in dec.layers:
            b.inplace_cache = False


def attend(q, kc, vc, mask, scale):
    """q [B,H,T,D] against one KV layer (K [B,KVH,C,D], V [B,KVH,D,C]); mask [B|1,1,T,C] additive."""
    B, H, T, D = q.shape
    kvh = kc.shape[1]
    g = H // kvh
    qg = q.reshape(B, kvh, g * T, D)
    s = torch.matmul(qg, kc.transpose(-1, -2)).float() * scale  # [B,KVH,gT,C]
    s = s.reshape(B, kvh, g, T, -1) + mask.float()[:, :, None]
    p = torch.softmax(s, -1).to(q.dtype).reshape(B, kvh, g * T, -1)
    o = torch.matmul(p, vc.transpose(-1, -2))  # [B,KVH,gT,D]
    return o.reshape(B, H, T, D)


class Block(nn.Module):
    def __init__(self, c: DecoderConfig, i: int):
        super().__init__()
        H, nh, kvh, d = c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim
        self.c, self.i = c, i
        self.inplace_cache = False  # see fast_decode()
        self.q_proj = nn.Linear(H, nh * d, bias=c.qkv_bias)
        self.k_proj = nn.Linear(H, kvh * d, bias=c.qkv_bias)
        self.v_proj = nn.Linear(H, kvh * d, bias=c.qkv_bias)
        self.o_proj = nn.Linear(nh * d, H, bias=False)
        self.gate_proj = nn.Linear(H, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(H, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, H, bias=False)
        norm = lambda n: RMSNorm(n, c.rms_eps, c.norm_offset)
        self.input_layernorm, self.post_attention_layernorm = norm(H), norm(H)
        if c.sandwich_norm:
            self.pre_feedforward_layernorm, self.post_feedforward_layernorm = norm(H), norm(H)
        if c.qk_norm:
            self.q_norm, self.k_norm = norm(d), norm(d)

    def qkv(self, x, pos):
        c = self.c
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, c.num_heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, c.num_kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, c.num_kv_heads, c.head_dim).transpose(1, 2)
        if c.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        theta = c.rope_theta[self.i]
        return rope(q, pos, theta), rope(k, pos, theta), v

    def mlp(self, x):
        g = self.gate_proj(x)
        g = F.gelu(g, approximate="tanh") if self.c.act == "gelu_tanh" else F.silu(g)
        return self.down_proj(g * self.up_proj(x))

    def forward(self, h, pos, mask, kc, vc):
        c = self.c
        x = self.input_layernorm(h)
        q, k, v = self.qkv(x, pos)
        kc, vc = (write_cache_inplace if self.inplace_cache else write_cache)(kc, vc, k, v, pos)
        if c.sliding_window[self.i]:
            mask = mask + window_mask(pos, kc.shape[2], c.sliding_window[self.i], mask.dtype)
        o = attend(q, kc, vc, mask, c.attn_scale)
        o = self.o_proj(o.transpose(1, 2).reshape(h.shape[0], h.shape[1], -1))
        if c.sandwich_norm:
            h = h + self.post_attention_layernorm(o)
            h = h + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(h)))
        else:
            h = h + o
            h = h + self.mlp(self.post_attention_layernorm(h))
        return h, kc, vc


class Decoder(nn.Module):
    """forward(embeddings, input_pos, mask, kv) -> (logits, activations, kv). Embedding lookup is separate
    (`embed`), as in the LiteRT-LM contract, and includes the family's embedding scale."""

    def __init__(self, c: DecoderConfig):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([Block(c, i) for i in range(c.num_layers)])
        self.norm = RMSNorm(c.hidden_size, c.rms_eps, c.norm_offset)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)

    def embed(self, tokens):
        e = self.embed_tokens(tokens)
        return e * torch.tensor(self.c.embed_scale, dtype=e.dtype) if self.c.embed_scale != 1.0 else e

    def logits(self, act):
        return softcap(self.lm_head(act).float(), self.c.final_softcap)

    def forward(self, emb, pos, mask, kv, return_logits=True):
        h = emb
        new_kv = []
        for layer, (kc, vc) in zip(self.layers, kv):
            h, kc, vc = layer(h, pos, mask, kc, vc)
            new_kv.append((kc, vc))
        act = self.norm(h)
        return (self.logits(act) if return_logits else None), act, new_kv

    def empty_cache(self, cache_len, batch=1, dtype=torch.float32):
        ks, vs = kv_shapes(self.c, cache_len, batch)
        return [(torch.zeros(ks, dtype=dtype), torch.zeros(vs, dtype=dtype)) for _ in range(self.c.num_layers)]


def causal_mask(pos, cache_len, dtype=torch.float32):
    """[1,1,T,C] additive mask: query at pos[t] sees keys 0..pos[t] (LiteRT-LM's FillAttentionMask)."""
    k_pos = torch.arange(cache_len, dtype=torch.int32)
    ok = k_pos[None, :] <= pos[:, None].to(torch.int32)
    return torch.where(ok, torch.tensor(0.0, dtype=dtype), torch.tensor(NEG_INF, dtype=dtype))[None, None]


def from_hf(hf_model) -> Decoder:
    """Copy an HF causal LM's weights into a Decoder (frozen, eval mode)."""
    c = config_from_hf(hf_model.config)
    dec = Decoder(c)
    sd = hf_model.state_dict()
    src = {}
    for k, v in sd.items():
        k2 = k
        for prefix in ("model.language_model.", "model."):
            if k2.startswith(prefix):
                k2 = k2[len(prefix) :]
                break
        k2 = k2.replace("self_attn.", "").replace("mlp.", "")
        src[k2] = v
    if "lm_head.weight" not in src:
        src["lm_head.weight"] = src["embed_tokens.weight"]
    missing = [k for k in dec.state_dict() if k not in src]
    if missing:
        raise ValueError(f"checkpoint lacks weights the {c.family} backbone needs: {missing[:5]}")
    dec.load_state_dict({k: src[k].float() for k in dec.state_dict()}, strict=True)
    dec.eval().requires_grad_(False)
    return dec
