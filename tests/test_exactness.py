"""decode is verify's row 0, bit for bit, in the exported graphs (float, int8, int4): speculative output is plain
output at decode's speed. Where it is not, the load-time probe sees it and the runtime takes the exact path."""
import numpy as np
import pytest
import torch
from torch import nn

from conftest import PROMPTS, trained
from test_export_runtime import C, bundle
from test_quantize import qbundle


def _rows(path, H, N, rng):
    """Row-0 outputs of a 1-row and a 4-row signature over N random rows (the other 3 rows random too)."""
    from ai_edge_litert.interpreter import Interpreter

    X = (rng.standard_normal((N, 4, 256)) * rng.uniform(0.01, 10, (N, 1, 1))).astype(np.float32)
    it = Interpreter(model_path=str(path), num_threads=2)
    one, four = it.get_signature_runner("one"), it.get_signature_runner("four")
    a = np.concatenate([one(a=X[i][None, :, None])["y"].reshape(1, -1) for i in range(N)])
    b = np.concatenate([four(a=np.ascontiguousarray(X[i : i + 4].transpose(1, 0, 2))[None])["y"].reshape(4, -1)
                        for i in range(0, N, 4)])
    return int((a.view(np.int32) != b.view(np.int32)).any(1).sum())


class _OprojNorm(nn.Module):
    """Gemma 3 270M's attention output projection (4 heads x 256 -> 640) followed by a norm: where the 1-row and the
    4-row graphs parted before the norm normalized rows."""

    def __init__(self, norm):
        super().__init__()
        self.o, self.norm = nn.Linear(1024, 640, bias=False), norm

    def forward(self, a):
        return {"y": self.norm(self.o(a.transpose(1, 2).reshape(1, a.shape[2], 1024)))}


def test_rmsnorm_rows_round_alike_after_a_projection(tmp_path):
    from mtplite.export.export import _convert
    from mtplite.model.decoder import RMSNorm

    torch.manual_seed(0)
    old = lambda y: y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)  # the form before: [1, T, H] rows
    diffs = {}
    for name, norm in (("ours", RMSNorm(640, 1e-6, True)), ("old", old)):
        m = _OprojNorm(norm)
        p = tmp_path / f"{name}.tflite"
        _convert([("one", m, {"a": torch.zeros(1, 4, 1, 256)}), ("four", m, {"a": torch.zeros(1, 4, 4, 256)})], p)
        diffs[name] = _rows(p, 640, 200, np.random.default_rng(0))
    assert diffs["ours"] == 0
    assert diffs["old"] > 0  # the check has teeth: the old form does differ on these kernels


@pytest.mark.parametrize("recipe", ["float", "int8", "int4-b32"])
def test_decode_is_verify_row0_in_every_bit(recipe, tmp_path_factory):
    from mtplite.export.exactness import BIT_IDENTICAL
    from mtplite.runtime.litert import Bundle
    from mtplite.model import generate as G
    import json

    d = bundle("tiny:gemma3") if recipe == "float" else qbundle(recipe, tmp_path_factory)
    man = json.loads((d / "android" / "manifest.json").read_text())
    assert man["exactness"] == BIT_IDENTICAL, man.get("exactness_detail")  # export's / quantize's probe
    b = Bundle(d, threads=1)
    assert b.exactness == BIT_IDENTICAL and not b.exact  # the runtime's probe: decode runs as decode
    bb, *_ = trained("tiny:gemma3")
    for p in PROMPTS[:8]:
        ids = bb.encode(p)
        runs = [G.run(ids, b.steps(), max_new_tokens=24, eos_ids=set(bb.eos_ids), K=K, cache_len=C) for K in (0, 3)]
        assert runs[0]["tokens"] == runs[1]["tokens"], (recipe, p)


def test_probe_sees_a_verify_that_rounds_differently(tmp_path, capfd):
    """A backbone whose verify signature computes with slightly other weights: export's probe and the runtime's
    both say so, and the runtime runs plain steps through verify (once said on stderr)."""
    import copy
    import json
    import shutil

    from mtplite.export import graphs as Gr
    from mtplite.export.contract import read_tflite
    from mtplite.export.exactness import EXACT_PATH_NEEDED, probe_file
    from mtplite.export.export import _convert
    from mtplite.runtime.litert import Bundle

    src = bundle("tiny:gemma3")
    bb, *_ = trained("tiny:gemma3")
    dec = bb.model.float().eval()
    other = copy.deepcopy(dec)
    with torch.no_grad():
        other.norm.weight.add_(1e-3)  # Gemma norms scale by 1 + w
    man = json.loads((src / "android" / "manifest.json").read_text())
    d = tmp_path / "b"
    shutil.copytree(src, d)
    K = man["K"]
    sigs = [(f"prefill_{n}", Gr.BackboneGraph(dec, False), Gr.backbone_sample(dec.c, n, C)) for n in man["prefill_lengths"]]
    sigs += [("decode", Gr.BackboneGraph(dec), Gr.backbone_sample(dec.c, 1, C)),
             ("verify", Gr.BackboneGraph(other), Gr.backbone_sample(dec.c, K + 1, C))]
    _convert(sigs, d / "android" / "backbone.tflite")
    path = d / "android" / "backbone.tflite"
    verdict, detail = probe_file(path, read_tflite(path)[0])
    assert verdict == EXACT_PATH_NEEDED and "differ" in detail
    from mtplite.export.bundle import bundle_identity

    man.update(bundle_identity(d / "android"))
    (d / "android" / "manifest.json").write_text(json.dumps(man))
    capfd.readouterr()
    b = Bundle(d, threads=1)
    assert b.exactness == EXACT_PATH_NEEDED and b.exact
    assert "plain steps run through verify" in capfd.readouterr().err


def test_probe_refuses_a_signature_that_leaves_its_logits_unwritten():
    """The probe fills the outputs with NaN before each run: a verify whose logits stay unwritten is an error at load
    (as it happened in ai-edge-litert 2.3), never a verdict about rounding computed from stale buffers."""
    from mtplite.export.contract import read_tflite
    from mtplite.export.exactness import OutputNotWritten, _buffers, probe
    from ai_edge_litert.compiled_model import CompiledModel

    path = bundle("tiny:gemma3") / "android" / "backbone.tflite"
    sigs = read_tflite(path)[0]
    model = CompiledModel.from_file(str(path))

    class Drops:  # the real model; verify's run then loses its logits, as the broken loads did
        def __getattr__(self, n):
            return getattr(model, n)

        def run_by_name(self, sig, ins, outs):
            model.run_by_name(sig, ins, outs)
            if sig == "verify":
                outs["logits"].write(np.full(int(np.prod(sigs[sig]["outputs"]["logits"]["shape"])), np.nan, np.float32))

    assert probe(model, sigs)[0] == "bit_identical"
    with pytest.raises(OutputNotWritten, match="verify signature left its logits"):
        probe(Drops(), sigs, {s: _buffers(model, s, sigs) for s in ("decode", "verify")})
