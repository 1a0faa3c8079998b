"""Where do `decode` and row 0 of `verify` part ways? Prints, per recipe, the first layer whose output differs bitwise.

Exports the backbone's decode (T=1) and verify (T=K+1) computations with every layer's hidden state as an output,
quantizes the graph with each recipe, runs both on the same cache contents (random, fixed seed) with the same row-0
token and compares row 0 layer by layer.

  python lab/probes/decode_vs_verify.py [--backbone tiny:gemma3] [--recipes float,int8,int4-b32] [--json OUT]
"""
import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from mtplite.export import graphs as G
from mtplite.export.export import _convert
from mtplite.model.decoder import causal_mask, kv_shapes
from mtplite.model.load import load_backbone
from mtplite.quantize.quantize import quantize_file


class Layers(nn.Module):
    """The backbone with every layer's output (h_0 = the embeddings' first layer output ... h_L) and the logits."""

    def __init__(self, dec):
        super().__init__()
        self.dec = dec

    def forward(self, embeddings, input_pos, mask, **kv):
        h, out = embeddings, {}
        for i, layer in enumerate(self.dec.layers):
            h, _, _ = layer(h, input_pos, mask, kv[G.k_name(i)], kv[G.v_name(i)])
            out[f"h_{i}"] = h
        act = self.dec.norm(h)
        out["activations"], out["logits"] = act, self.dec.logits(act)
        return out


def run(path, sig, inputs, names, threads=1):
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.cpu_options import CpuOptions
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.options import Options

    m = CompiledModel.from_file(str(path), options=Options(HardwareAccelerator.CPU,
                                                           cpu_options=CpuOptions(num_threads=threads)))
    ins = {n: m.create_input_buffer_by_name(sig, n) for n in inputs}
    for n, a in inputs.items():
        ins[n].write(np.ascontiguousarray(a, dtype=a.dtype).reshape(-1))
    outs = {n: m.create_output_buffer_by_name(sig, n) for n in names}
    m.run_by_name(sig, ins, outs)
    return outs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backbone", default="tiny:gemma3")
    ap.add_argument("--recipes", default="float,int8,int4-b32")
    ap.add_argument("--K", type=int, default=3)
    ap.add_argument("--cache", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    bb = load_backbone(a.backbone)
    dec, c = bb.model.float().eval(), bb.model.c
    C, T, pos = a.cache, a.K + 1, a.cache // 2
    rng = np.random.default_rng(0)
    kv = {}
    for i in range(c.num_layers):
        ks, vs = kv_shapes(c, C)
        kv[G.k_name(i)] = rng.standard_normal(ks).astype(np.float32)
        kv[G.v_name(i)] = rng.standard_normal(vs).astype(np.float32)
    emb = dec.embed(torch.tensor([rng.integers(0, c.vocab_size, T)])).numpy()

    def inputs(t):
        p = torch.arange(pos, pos + t, dtype=torch.int32)
        return {"embeddings": emb[:, :t], "input_pos": p.numpy(), "mask": causal_mask(p, C).numpy(), **kv}

    graph = Layers(dec)
    names = [f"h_{i}" for i in range(c.num_layers)] + ["activations", "logits"]
    report = {"backbone": a.backbone, "K": a.K, "recipes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "layers.tflite"
        _convert([(s, graph, {k: torch.from_numpy(np.asarray(v)) for k, v in inputs(t).items()})
                  for s, t in (("decode", 1), ("verify", T))], src)
        for r in a.recipes.split(","):
            q = Path(tmp) / f"layers-{r}.tflite"
            quantize_file(src, q, r)
            o1, oT = run(q, "decode", inputs(1), names, a.threads), run(q, "verify", inputs(T), names, a.threads)
            rows = {}
            for n in names:
                w = c.vocab_size if n == "logits" else c.hidden_size
                x1 = o1[n].read(w, np.float32)
                xT = oT[n].read(T * w, np.float32)[:w]
                rows[n] = {"differ": int((x1.view(np.int32) != xT.view(np.int32)).sum()), "of": w,
                           "max_abs": float(np.abs(x1 - xT).max())}
            first = next((n for n in names if rows[n]["differ"]), None)
            report["recipes"][r] = {"first_differing": first, "outputs": rows}
            print(f"{r:9s} first differing output: {first or 'none (bit-identical)'}"
                  + (f" ({rows[first]['differ']}/{rows[first]['of']} values, max |d| {rows[first]['max_abs']:.2e};"
                     f" logits {rows['logits']['differ']}/{rows['logits']['of']})" if first else ""), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
