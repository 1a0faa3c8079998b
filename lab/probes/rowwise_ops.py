"""Which op makes a T-row graph's row 0 differ from the 1-row graph's output (decode vs verify numerics)?

For each op of the backbone (a Linear, the attention matmuls, a norm, a whole tiny decoder) this converts a 1-row and
a 4-row signature into one .tflite, quantizes it with each recipe, runs both on the same row 0 (the other rows random)
and prints how many of row 0's outputs differ, bitwise. Run: python lab/probes/rowwise_ops.py [--json OUT]
"""
import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from mtplite.export.export import _convert
from mtplite.quantize.quantize import quantize_file


class Lin(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.l = nn.Linear(i, o, bias=False)

    def forward(self, x):
        return {"y": self.l(x)}


class Attn(nn.Module):
    """q @ K^T, softmax, @ V against a fixed float cache (the attention core, no weights)."""

    def forward(self, x, k, v):
        s = torch.matmul(x, k.transpose(-1, -2))
        return {"y": torch.matmul(torch.softmax(s, -1), v)}


class LinStack(nn.Module):
    def __init__(self, h, n):
        super().__init__()
        self.ls = nn.ModuleList([nn.Linear(h, h, bias=False) for _ in range(n)])

    def forward(self, x):
        for l in self.ls:
            x = torch.nn.functional.gelu(l(x), approximate="tanh")
        return {"y": x}


def run(path, sig, inputs):
    from ai_edge_litert.compiled_model import CompiledModel

    m = CompiledModel.from_file(str(path))
    ins = {n: m.create_input_buffer_by_name(sig, n) for n in inputs}
    for n, a in inputs.items():
        ins[n].write(np.ascontiguousarray(a).reshape(-1))
    out = m.create_output_buffer_by_name(sig, "y")
    m.run_by_name(sig, ins, {"y": out})
    return out


def probe(name, mod, make, shape_out, recipes, tmp):
    torch.manual_seed(0)
    s1, s4 = make(1), make(4)
    path = tmp / f"{name}.tflite"
    _convert([("one", mod, {k: torch.from_numpy(v) for k, v in s1.items()}),
              ("four", mod, {k: torch.from_numpy(v) for k, v in s4.items()})], path)
    res = {}
    for r in recipes:
        q = tmp / f"{name}-{r}.tflite"
        try:
            quantize_file(path, q, r)
        except Exception as e:  # e.g. a graph with no weights: nothing to quantize
            res[r] = f"not quantized ({str(e)[:60]})"
            continue
        a = run(q, "one", s1).read(int(np.prod(shape_out(1))), np.float32).reshape(shape_out(1))
        b = run(q, "four", s4).read(int(np.prod(shape_out(4))), np.float32).reshape(shape_out(4))
        r0a, r0b = a[..., :1, :] if a.ndim == 4 else a[:, :1], b[..., :1, :] if b.ndim == 4 else b[:, :1]
        diff = int((r0a.view(np.int32) != r0b.view(np.int32)).sum())
        res[r] = {"differ": diff, "of": int(r0a.size), "max_abs": float(np.abs(r0a - r0b).max())}
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    H, O = 256, 512
    row0 = rng.standard_normal((1, 1, H)).astype(np.float32)

    def lin_in(T):
        x = rng.standard_normal((1, T, H)).astype(np.float32) * 3.0  # other rows larger: a per-tensor scale shows
        x[:, :1] = row0
        return {"x": x}

    C, D = 64, 32
    kc, vc = rng.standard_normal((1, 1, C, D)).astype(np.float32), rng.standard_normal((1, 1, C, D)).astype(np.float32)
    q0 = rng.standard_normal((1, 1, 1, D)).astype(np.float32)

    def attn_in(T):
        x = rng.standard_normal((1, 1, T, D)).astype(np.float32)
        x[:, :, :1] = q0
        return {"x": x, "k": kc, "v": vc}

    recipes = ["float", "int8", "int4-b32"]
    out = {}
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        out["linear"] = probe("linear", Lin(H, O), lin_in, lambda T: (1, T, O), recipes, tmp)
        out["linear_stack"] = probe("stack", LinStack(H, 4), lin_in, lambda T: (1, T, H), recipes, tmp)
        out["attention"] = probe("attn", Attn(), attn_in, lambda T: (1, 1, T, D), ["float"], tmp)
    for k, v in out.items():
        print(k, json.dumps(v))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(main())
