"""What a head's shape costs in the K-step drafter graph, before training one.

Builds untrained heads of each variant for a real backbone (weights as `init_from_backbone` sets them, plus 1e-3 noise
so that no weight block is all zero: XNNPACK refuses an int4 block of scale 0), converts each one's `mtp_draft_k`
graph alone, quantizes it, and times it against the backbone's int8 `decode` in alternating rounds, all in one
process (so the ratios are side by side). The cost of a graph does not depend on what its weights learned.

Variant keys: name, read (read layers), vocab (draft vocabulary size), copy (pointer heads), exact (copy_exact nats),
K, C (cache length), quant (head recipe), threads, ablate ("attention": the read layers' attention over the cache
returns its query).

  python lab/probes/head_cost.py OUT_DIR '[{"name": "default"}, {"name": "last2", "read": [16, 17]}]'
      [--backbone gemma3-270m] [--rounds 80] [--json OUT]
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from mtplite.errors import UserError, run_main
from mtplite.paths import write_text_atomic


def _no_attention(q, kc, vc, mask, scale):
    """The read layers' query passed on, the cache touched once (an ablation: what attending over it costs)."""
    return q * 0.5 + kc[:, :, :1, :].mean() + vc[..., :1].mean()


def build(dec, v, out, C, M):
    from mtplite.export import graphs as G
    from mtplite.export.contract import DRAFT_K
    from mtplite.export.export import _convert
    from mtplite.model import head as HM
    from mtplite.quantize.quantize import quantize_file

    path = out / f"{v['name']}.tflite"
    if path.exists():
        return path
    torch.manual_seed(0)
    hc = HM.head_config(dec.c, list(range(1000, 1000 + v.get("vocab", 4096))), K=v.get("K", 3),
                        read_layers=v.get("read"), copy_heads=v.get("copy", 2), context=M)
    hc.copy_exact = float(v.get("exact", 0.0))
    head = HM.MTPHead(hc)
    head.init_from_backbone(dec)
    with torch.no_grad():
        for p in head.parameters():
            p.add_(1e-3 * torch.randn_like(p))
    attend = HM.attend
    if v.get("ablate") == "attention":
        HM.attend = _no_attention
    try:
        _convert([(DRAFT_K, G.DraftKGraph(head.eval(), dec), G.drafter_ctx_sample(dec.c, hc, v.get("C", C), M))],
                 out / f"{v['name']}-float.tflite")
    finally:
        HM.attend = attend
    quantize_file(out / f"{v['name']}-float.tflite", path, v.get("quant", "int8"))
    return path


def load(path, sig, threads, C, rng):
    """A CompiledModel and its buffers, filled: random cache and activations, the query at position C * 0.6."""
    from ai_edge_litert.compiled_model import CompiledModel

    from mtplite.export.contract import read_tflite
    from mtplite.runtime.litert import _mask, _options

    m = CompiledModel.from_file(str(path), options=_options(threads, path.with_suffix(f".t{threads}.xnn")))
    io, _ = read_tflite(path)
    io = io[sig]
    ins = {n: m.create_input_buffer_by_name(sig, n) for n in io["inputs"]}
    outs = {n: m.create_output_buffer_by_name(sig, n) for n in io["outputs"]}
    pos = int(C * 0.6)
    for n, spec in io["inputs"].items():
        size = int(np.prod(spec["shape"]))
        if n == "input_pos":
            x = np.full(size, pos, np.int32)
        elif n == "context_ids":
            x = np.arange(1000, 1000 + size, dtype=np.int32)
        elif n == "mask":
            x = _mask([pos], C).reshape(-1)
        elif n == "context_mask":
            x = np.zeros(size, np.float32)
        else:
            x = rng.standard_normal(size).astype(np.float32)
        ins[n].write(x)
    return lambda: m.run_by_name(sig, ins, outs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("variants", help="JSON list of variants (see the module docstring)")
    ap.add_argument("--backbone", default="gemma3-270m")
    ap.add_argument("--cache-length", type=int, default=512)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=80)
    ap.add_argument("--json")
    a = ap.parse_args()
    from mtplite.export import graphs as G
    from mtplite.export.contract import DRAFT_K
    from mtplite.export.export import _convert
    from mtplite.model.load import load_backbone
    from mtplite.quantize.quantize import quantize_file

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        variants = json.loads(a.variants)
        if not (isinstance(variants, list) and variants and all(isinstance(v, dict) and "name" in v for v in variants)):
            raise ValueError
    except ValueError:
        raise UserError(f"variants {a.variants[:80]!r}: give a JSON list of objects with a name, e.g. "
                        "'[{\"name\": \"default\"}]'") from None
    dec = load_backbone(a.backbone).model.float().eval()
    C, rng = a.cache_length, np.random.default_rng(0)
    ref = out / "decode-int8.tflite"
    if not ref.exists():
        _convert([("decode", G.BackboneGraph(dec, True), G.backbone_sample(dec.c, 1, C))], out / "decode-float.tflite")
        quantize_file(out / "decode-float.tflite", ref, "int8")
    calls = {"decode": load(ref, "decode", 2, C, rng)}
    for v in variants:
        calls[v["name"]] = load(build(dec, v, out, C, a.context), DRAFT_K, v.get("threads", 2), v.get("C", C), rng)
    times = {k: [] for k in calls}
    for r in range(a.rounds + 10):
        for k, fn in calls.items():
            t0 = time.perf_counter()
            fn()
            if r >= 10:
                times[k].append(time.perf_counter() - t0)
    med = {k: 1e3 * float(np.median(t)) for k, t in times.items()}
    first = variants[0]["name"]
    res = {"backbone": a.backbone, "cache_length": C, "rounds": a.rounds, "decode_ms": med["decode"],
           "variants": [{**v, "draft_k_ms": med[v["name"]], "share_of_decode": med[v["name"]] / med["decode"],
                         "vs_first": med[v["name"]] / med[first]} for v in variants]}
    print(f"decode {med['decode']:.2f} ms", file=sys.stderr)
    for v in res["variants"]:
        print(f"{v['name']:22s} {v['draft_k_ms']:6.2f} ms  {v['share_of_decode']:.3f} decode steps  "
              f"{v['vs_first']:.3f} x {first}", file=sys.stderr)
    if a.json:
        write_text_atomic(a.json, json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.exit(run_main(main, "head_cost.py"))
