"""int8 / int4 bundles: really quantized, smaller by the expected factor, and speculative == plain on them."""
import subprocess
import sys

import pytest

from conftest import PROMPTS, trained
from test_export_runtime import C, bundle

_q = {}


def qbundle(recipe, tmp_path_factory):
    from mtplite.quantize.quantize import parse_recipe, quantize_bundle

    if recipe not in _q:
        dst = tmp_path_factory.getbasetemp() / f"q-{recipe}"
        quantize_bundle(bundle("tiny:gemma3"), dst, parse_recipe(recipe), progress=lambda s: None)
        _q[recipe] = dst
    return _q[recipe]


@pytest.mark.parametrize("recipe,dtype,factor", [("int8", "int8", 4), ("int4-b32", "int4", 8)])
def test_quantized_bundle_is_smaller_and_exact(recipe, dtype, factor, tmp_path_factory):
    from mtplite.export.contract import read_tflite
    from mtplite.model import generate as G
    from mtplite.runtime.litert import Bundle

    q = qbundle(recipe, tmp_path_factory)
    f = bundle("tiny:gemma3")
    for g in ("backbone", "drafter"):
        _, wb = read_tflite(q / "android" / f"{g}.tflite")
        _, wf = read_tflite(f / "android" / f"{g}.tflite")
        replaced = wf["float32"] - wb.get("float32", 0)  # float weight bytes the recipe quantized
        ratio = wb.get(dtype, 0) / replaced
        size = (q / "android" / f"{g}.tflite").stat().st_size / (f / "android" / f"{g}.tflite").stat().st_size
        print(f"{recipe} {g}: {dtype} weights = 1/{1 / ratio:.2f} of the float weights they replace "
              f"({replaced / wf['float32']:.0%} of all); file {size:.2f} of float")
        assert replaced > 0.9 * wf["float32"]  # nearly everything really quantized
        assert abs(ratio - 1 / factor) < 0.02 / factor * 10
    bb, head, *_ = trained("tiny:gemma3")
    b = Bundle(q, threads=1)
    for i, p in enumerate(PROMPTS[:10]):
        ids = bb.encode(p)
        mtp = G.run(ids, b.steps(), max_new_tokens=24, eos_ids=set(bb.eos_ids), K=3, cache_len=C)
        plain = G.run(ids, b.steps(), max_new_tokens=24, eos_ids=set(bb.eos_ids), K=0, cache_len=C)
        assert mtp["tokens"] == plain["tokens"], (recipe, p)


def test_silent_noop_recipes_are_refused(tmp_path):
    from mtplite.errors import UserError
    from mtplite.quantize.quantize import parse_recipe

    for bad in ("wo-int4", "backbone=weight-only-int4", "head=int4-b128", "int3", "gpu=int8"):
        with pytest.raises(UserError):
            parse_recipe(bad)
    assert parse_recipe("backbone=int4-b32,head=int8") == {"backbone": "int4-b32", "embedder": "float", "drafter": "int8"}
    r = subprocess.run([sys.executable, "-m", "mtplite.cli", "quantize", str(bundle("tiny:gemma3")), "--recipe",
                        "wo-int4", "--out", str(tmp_path / "x")], capture_output=True, text=True)
    assert r.returncode == 2 and "silent no-op" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x").exists()
