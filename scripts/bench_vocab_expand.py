"""Micro-benchmark: how the drafter turns N draft logits into the contract's full-vocabulary row, in LiteRT.

The MTP_DRAFTER contract wants logits over the whole vocabulary (262,144 for Gemma 3); the head computes only
N draft logits. Two ways to build the row, both exact (same bits out):
  gather  — append one NEG_INF column, then index it with a V-long map (GATHER_ND over V ids; the old export)
  scatter — write the N logits into a NEG_INF row at their ids (STABLEHLO_SCATTER; what model/head.py exports)
Each variant is converted with litert-torch and timed in ai_edge_litert, interleaved in rounds so that machine
noise hits both alike; the ratio is the claim.

  python scripts/bench_vocab_expand.py [--vocab 262144] [--draft 4096] [--json out.json]
"""
import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

NEG_INF = -1e30


class Expand(torch.nn.Module):
    def __init__(self, mode, vocab, draft, seed=0):
        super().__init__()
        self.mode, self.vocab, self.draft = mode, vocab, draft
        ids = torch.randperm(vocab, generator=torch.Generator().manual_seed(seed))[:draft]
        vmap = torch.full((vocab,), draft, dtype=torch.int32)
        vmap[ids] = torch.arange(draft, dtype=torch.int32)
        self.register_buffer("ids", ids)
        self.register_buffer("vmap", vmap)

    def forward(self, d):
        if self.mode == "gather":
            pad = torch.full(d.shape[:-1] + (1,), NEG_INF)
            return torch.cat([d, pad], -1)[..., self.vmap.long()]
        base = torch.full((1, self.vocab), NEG_INF)
        return base.scatter(1, self.ids[None, :], d.reshape(1, self.draft)).reshape(1, 1, self.vocab)


def op_names(path):
    from ai_edge_litert import schema_py_generated as S

    names = {v: k for k, v in S.BuiltinOperator.__dict__.items() if not k.startswith("_")}
    m = S.Model.GetRootAsModel(Path(path).read_bytes(), 0)
    sg = m.Subgraphs(0)
    out = []
    for i in range(sg.OperatorsLength()):
        oc = m.OperatorCodes(sg.Operators(i).OpcodeIndex())
        out.append(names.get(max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode()), "?"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=262144)
    ap.add_argument("--draft", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    import litert_torch
    from ai_edge_litert.compiled_model import CompiledModel

    x = torch.randn(1, 1, a.draft, generator=torch.Generator().manual_seed(1))
    runs, ops, same, ref = {}, {}, {}, None
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("gather", "scatter"):
            m = Expand(mode, a.vocab, a.draft).eval()
            want = m(x).numpy().reshape(-1)
            ref = want if ref is None else ref
            path = f"{tmp}/{mode}.tflite"
            litert_torch.convert(m, (x,)).export(path)
            ops[mode] = op_names(path)
            cm = CompiledModel.from_file(path)
            ins, outs = cm.create_input_buffers(0), cm.create_output_buffers(0)
            ins[0].write(x.numpy().reshape(-1))
            cm.run_by_index(0, ins, outs)
            got = outs[0].read(a.vocab, np.float32)
            same[mode] = bool(np.array_equal(got, want) and np.array_equal(got, ref))
            runs[mode] = (cm, ins, outs)
        times = {k: [] for k in runs}
        for _ in range(a.rounds):  # interleaved: noise lands on both variants alike
            for mode, (cm, ins, outs) in runs.items():
                for _ in range(10):
                    cm.run_by_index(0, ins, outs)
                t = time.perf_counter()
                for _ in range(a.iters):
                    cm.run_by_index(0, ins, outs)
                times[mode].append((time.perf_counter() - t) / a.iters * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    res = {
        "vocab": a.vocab, "draft": a.draft, "rounds": a.rounds, "iters": a.iters,
        "ms_median": med, "ms_all": times, "ops": ops, "bit_identical_to_torch": same,
        "gather_over_scatter": med["gather"] / med["scatter"],
    }
    for k in runs:
        print(f"{k:8s} {med[k]:.3f} ms  same bits: {same[k]}  ops: {' '.join(ops[k])}")
    print(f"gather / scatter = {res['gather_over_scatter']:.2f}x")
    if a.json:
        from mtplite.paths import write_text_atomic

        write_text_atomic(a.json, json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
