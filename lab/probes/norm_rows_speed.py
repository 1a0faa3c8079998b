"""Plain decode speed before and after the row-wise RMSNorm (the change that made decode verify's row 0 bit for bit),
measured side by side in one run: the backbone's decode + verify signatures exported with each form, quantized with
the same recipe, decode steps timed in alternating blocks. Also re-runs the decode-vs-verify probe on both.

  python lab/probes/norm_rows_speed.py [--backbone gemma3-270m] [--recipe int8] [--steps 300] [--json OUT]
"""
import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from mtplite.export import graphs as G
from mtplite.export.contract import read_tflite
from mtplite.export.exactness import probe
from mtplite.export.export import _convert
from mtplite.model import decoder
from mtplite.model.load import load_backbone
from mtplite.quantize.quantize import quantize_file


def old_forward(self, x):  # the form before: normalized over [1, T, dim]
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
    w = self.weight.float() + 1.0 if self.offset else self.weight.float()
    return (xf * w).to(x.dtype)


def load(path, threads, tmp):
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.cpu_options import CpuOptions
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.options import Options

    opts = Options(HardwareAccelerator.CPU, cpu_options=CpuOptions(num_threads=threads,
                                                                   xnnpack_weight_cache_path=str(tmp / f"{path.stem}.xnn")))
    return CompiledModel.from_file(str(path), options=opts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backbone", default="gemma3-270m")
    ap.add_argument("--recipe", default="int8")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache", type=int, default=512)
    ap.add_argument("--json")
    a = ap.parse_args()
    bb = load_backbone(a.backbone)
    dec, c, C = bb.model.float().eval(), bb.model.c, a.cache
    new_forward = decoder.RMSNorm.forward
    res = {"backbone": a.backbone, "recipe": a.recipe, "threads": a.threads, "cache_length": C, "forms": {}}
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        models = {}
        for form, fwd in (("old", old_forward), ("rows", new_forward)):
            decoder.RMSNorm.forward = fwd
            try:
                g = G.BackboneGraph(dec)
                _convert([("decode", g, G.backbone_sample(c, 1, C)), ("verify", g, G.backbone_sample(c, 4, C))],
                         tmp / f"{form}.tflite")
            finally:
                decoder.RMSNorm.forward = new_forward
            quantize_file(tmp / f"{form}.tflite", tmp / f"{form}-q.tflite", a.recipe)
            sigs = read_tflite(tmp / f"{form}-q.tflite")[0]
            m = load(tmp / f"{form}-q.tflite", a.threads, tmp)
            verdict, detail = probe(m, sigs)
            res["forms"][form] = {"probe": verdict, "detail": detail}
            ins = {n: m.create_input_buffer_by_name("decode", n) for n in sigs["decode"]["inputs"]}
            outs = {n: m.create_output_buffer_by_name("decode", n) for n in sigs["decode"]["outputs"]}
            for n in sigs["decode"]["outputs"]:  # KV in and out through the same buffers, as the runtime binds them
                if n.startswith("kv_cache_"):
                    outs[n] = ins[n]
            ins["embeddings"].write(np.random.default_rng(0).standard_normal(c.hidden_size).astype(np.float32))
            models[form] = (m, ins, outs)
        times = {f: [] for f in models}
        block = 20
        for i in range(a.steps // block):
            for f, (m, ins, outs) in (list(models.items()) if i % 2 == 0 else list(models.items())[::-1]):
                for s in range(block):
                    pos = (i * block + s) % (C - 1)
                    ins["input_pos"].write(np.array([pos], np.int32))
                    mask = np.full(C, decoder.NEG_INF, np.float32)
                    mask[: pos + 1] = 0
                    ins["mask"].write(mask)
                    t0 = time.perf_counter()
                    m.run_by_name("decode", ins, outs)
                    times[f].append(time.perf_counter() - t0)
    for f, ts in times.items():
        ts = np.array(ts[block:])  # the first block warms caches
        res["forms"][f].update(decode_ms_median=1e3 * float(np.median(ts)), decode_ms_mean=1e3 * float(ts.mean()),
                               steps=int(len(ts)))
    res["rows_over_old_median"] = res["forms"]["rows"]["decode_ms_median"] / res["forms"]["old"]["decode_ms_median"]
    for f, r in res["forms"].items():
        print(f"{f:5s} decode {r['decode_ms_median']:.2f} ms median ({r['decode_ms_mean']:.2f} mean, {r['steps']} steps); "
              f"probe: {r['probe']} ({r['detail']})")
    print(f"row-wise norm / old: {res['rows_over_old_median']:.3f}x decode time")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
