"""The deployed numerics in torch: fake-quantize a backbone the way the LiteRT recipes quantize its graphs.

Used by `mtplite train --target-quant` so the head learns from the hidden states, KV cache and greedy tokens of the
backbone the phone actually runs. What the recipes do (ai-edge-quantizer 0.10 dynamic-range recipes, run by
XNNPACK's dynamically-quantized kernels):
- weights: int8 symmetric per output channel, or int4 symmetric per block of 32/64 input values;
- activations entering each quantized matmul: int8 asymmetric per row (per token), computed at run time.
Measured (lab/scripts/fakequant_match.py, teacher-forced on the LiteRT graph's own greedy stream): weights-only fake
quantization matches the LiteRT tokens best (tiny:gemma3 int8: float 0.981, weights 0.990, weights+activations
0.986; int4-b32: 0.748 / 0.964 / 0.958), so `act` defaults to False; our per-row activation rounding is not
bit-exact with XNNPACK's and adds its own error.
"""
import torch
from torch import nn

BLOCK = {"int4-b32": 32, "int4-b64": 64}


def fake_quant_weight(w, recipe):
    """Round w [out, in] to the recipe's grid and back to float."""
    w32 = w.detach().float()
    if recipe == "int8":
        s = w32.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 127
        return (torch.round(w32 / s).clamp(-127, 127) * s).to(w.dtype)
    if recipe in BLOCK:
        b = BLOCK[recipe]
        o, i = w32.shape
        if i % b:
            return w.detach().clone()  # the quantizer leaves such tensors float too
        blocks = w32.reshape(o, i // b, b)
        s = blocks.abs().amax(dim=2, keepdim=True).clamp(min=1e-12) / 7
        return (torch.round(blocks / s).clamp(-8, 7) * s).reshape(o, i).to(w.dtype)
    if recipe in (None, "float"):
        return w.detach().clone()
    raise ValueError(f"no fake quantization for recipe {recipe!r}")


def _quant_rows(x):
    """Dynamic int8 per-row asymmetric quantization of an activation, as XNNPACK's qd8 kernels do."""
    x32 = x.float()
    lo = x32.amin(-1, keepdim=True).clamp(max=0)
    hi = x32.amax(-1, keepdim=True).clamp(min=0)
    s = (hi - lo).clamp(min=1e-12) / 255
    zp = torch.round(-128 - lo / s)
    q = torch.round(x32 / s + zp).clamp(-128, 127)
    return ((q - zp) * s).to(x.dtype)


def _act_hook(module, args):
    return (_quant_rows(args[0]),) + tuple(args[1:])


def fake_quantize_backbone_(dec, recipe_map, act=False):
    """In place on the in-memory copy (the deployed float weights on disk are never touched). Returns the handles of
    the activation hooks so a caller can remove them."""
    rb = recipe_map.get("backbone", "float")
    re_ = recipe_map.get("embedder", "float")
    hooks = []
    with torch.no_grad():
        if dec.lm_head.weight is dec.embed_tokens.weight and rb != re_:
            # tied table, but the two graphs hold separately quantized copies of it
            dec.lm_head.weight = nn.Parameter(dec.embed_tokens.weight.detach().clone(), requires_grad=False)
        linears = [m for m in dec.layers.modules() if isinstance(m, nn.Linear)] + [dec.lm_head]
        if rb != "float":
            for m in linears:
                m.weight.copy_(fake_quant_weight(m.weight, rb))
                if act:
                    hooks.append(m.register_forward_pre_hook(_act_hook))
        if re_ != "float" and dec.lm_head.weight is not dec.embed_tokens.weight:
            dec.embed_tokens.weight.copy_(fake_quant_weight(dec.embed_tokens.weight, re_))
    return hooks
