"""int8 / int4 bundles: really quantized, smaller by the expected factor, and speculative == plain on them."""
import subprocess
import sys

import pytest
import torch

from conftest import script, PROMPTS, trained
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
    # exact mode, the one we claim 0 mismatches for on quantized Gemma: plain steps through the verify graph
    ex = Bundle(q, threads=1, exact=True)
    for p in PROMPTS[:6]:
        ids = bb.encode(p)
        runs = [G.run(ids, ex.steps(), max_new_tokens=24, eos_ids=set(bb.eos_ids), K=K, cache_len=C) for K in (0, 3)]
        assert runs[0]["tokens"] == runs[1]["tokens"], (recipe, "exact", p)


def test_silent_noop_recipes_are_refused(tmp_path):
    from mtplite.errors import UserError
    from mtplite.quantize.quantize import parse_recipe

    for bad in ("wo-int4", "backbone=weight-only-int4", "head=int4-b128", "int3", "gpu=int8"):
        with pytest.raises(UserError):
            parse_recipe(bad)
    assert parse_recipe("backbone=int4-b32,head=int8") == {"backbone": "int4-b32", "embedder": "float", "drafter": "int8"}
    assert parse_recipe("int8-h4") == {"backbone": "int8", "embedder": "int8", "drafter": "int4-b32"}
    r = subprocess.run([sys.executable, "-m", "mtplite.cli", "quantize", str(bundle("tiny:gemma3")), "--recipe",
                        "wo-int4", "--out", str(tmp_path / "x")], capture_output=True, text=True)
    assert r.returncode == 2 and "silent no-op" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x").exists()


def test_fake_quant_grid():
    """int8: at most 255 levels per output channel; int4-b32: at most 16 per block; error bounded by half a step."""
    from mtplite.quantize.fakequant import fake_quant_weight

    w = torch.randn(8, 64, generator=torch.Generator().manual_seed(0))
    q8 = fake_quant_weight(w, "int8")
    for r in range(8):
        assert len(torch.unique(q8[r])) <= 255
        assert float((q8[r] - w[r]).abs().max()) <= float(w[r].abs().max()) / 127 / 2 + 1e-6
    q4 = fake_quant_weight(w, "int4-b32")
    for blk in q4.reshape(8, 2, 32).reshape(16, 32):
        assert len(torch.unique(blk)) <= 16
    assert float((q4 - w).abs().max()) > float((q8 - w).abs().max())  # coarser grid, larger error


def test_train_target_quant_and_report(tmp_path_factory):
    """`train --target-quant int8` fine-tunes a head against the fake-quantized backbone; the report puts it beside
    the float-trained head on the same int8 backbone; the float bundle agrees with itself exactly."""
    import json

    from mtplite.export.export import export
    from mtplite.model.head import load_head, save_head
    from mtplite.runtime.quant_report import quant_report

    bb, head, *_ = trained("tiny:gemma3")
    tmp = tmp_path_factory.mktemp("qat")
    from mtplite.data import training_prompts
    from mtplite.data.splits import split_rows

    # the starting head's held-out templates, which the fine-tune must keep though its 144 prompts add templates
    held = sorted({r["template"] for r in split_rows(training_prompts(limit=128))[1]})[:3]
    save_head(head, tmp / "float-head", {"backbone_fingerprint": bb.fingerprint, "val_templates": held})
    r = subprocess.run([sys.executable, "-m", "mtplite.cli", "train", "--backbone", "tiny:gemma3", "--out",
                        str(tmp / "qat-head"), "--target-quant", "int8", "--init-head", str(tmp / "float-head"),
                        "--prompt-limit", "144", "--max-new", "32", "--epochs", "2", "--batch", "16",
                        "--draft-vocab", "256"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    qhead, doc = load_head(tmp / "qat-head", bb.fingerprint)
    assert doc["target_quant"]["backbone"] == "int8" and doc["init_head"]
    assert doc["val_templates"] == held and doc["train_sequences"] + doc["val_sequences"] == 144
    assert qhead.c.draft_ids == head.c.draft_ids  # fine-tuned, not re-initialised
    from mtplite.quantize.quantize import parse_recipe, quantizer

    export(bb, qhead, doc, tmp / "qat-int8", cache_len=C, prefill_lengths=(16, 64),
           quantize=quantizer(parse_recipe("int8"), lambda s: None), progress=lambda s: None)
    rep = quant_report(bundle("tiny:gemma3"), [qbundle("int8", tmp_path_factory), tmp / "qat-int8"],
                       [{"id": str(i), "task": "t", "prompt": p} for i, p in enumerate(PROMPTS[:8])], max_new=24,
                       threads=1, progress=False)
    print(json.dumps([{k: v for k, v in row.items() if k in ("greedy_agreement_with_float", "accept_length",
                                                               "head_target_quant")} for row in rep["rows"]]))
    f, q8, qat = rep["rows"]
    assert f["greedy_agreement_with_float"]["all"] == 1.0 and f["outputs_equal_to_float"]["all"] == 1.0
    assert 0.5 < q8["greedy_agreement_with_float"]["all"] <= 1.0
    assert qat["head_target_quant"]["backbone"] == "int8" and q8["head_target_quant"] is None
    assert all(row["accept_length"]["all"] >= 1.0 for row in rep["rows"])


def test_bench_also_runs_extra_bundles_side_by_side(tmp_path_factory):
    from mtplite.runtime.bench import bench, markdown

    prompts = [{"id": str(i), "task": "a" if i % 2 else "b", "prompt": p} for i, p in enumerate(PROMPTS[:6])]
    res = bench(bundle("tiny:gemma3"), prompts, max_new=16, modes=("plain", "mtp"), threads=1, engine=False,
                progress=False, also=[("q8", qbundle("int8", tmp_path_factory))])
    assert res["modes"] == ["plain", "mtp", "plain@q8", "mtp@q8", "mtp+ctx@q8"]  # its K-step drafter too
    assert res["table"]["mtp@q8"]["all"]["prompts"] == 6 and res["table"]["mtp@q8"]["all"]["accept_length"] >= 1
    assert res["table"]["mtp+ctx@q8"]["all"]["accept_length"] >= 1
    assert {"mtp@q8/plain@q8", "mtp+ctx@q8/plain@q8", "plain@q8/plain"} <= set(res["ratios"])
    assert res["extra_bundles"]["q8"]["spec_vs_plain_mismatches"] == 0
    assert res["extra_bundles"]["q8"]["quantization"]["backbone"] == "int8"
    assert "mtp@q8" in markdown(res)
    import json

    render = script("results_page").render

    run = tmp_path_factory.mktemp("run")
    (run / "bench.json").write_text(json.dumps(res))
    page = render(run)  # the results page renders from the JSON alone (no head dir, extra bundles present)
    assert "mtp@q8/plain@q8" in page and "speculative output == plain greedy" in page
    quant_label = script("results_page").quant_label  # the mode table names a head quantized unlike its backbone

    assert "| plain @q8 | int8 |" in page
    assert quant_label({"backbone": "int8", "embedder": "int8", "drafter": "int4-b32"}) == "int8, head int4-b32"
    # the page names the versions the bench ran with (recorded in its JSON), not whatever renders it later
    res["versions"] = {**res["versions"], "transformers": "0.0-recorded"}
    (run / "bench.json").write_text(json.dumps(res))
    line = next(l for l in render(run).splitlines() if l.startswith("- Python"))
    assert "transformers 0.0-recorded" in line and "rendered" not in line
    del res["versions"]
    (run / "bench.json").write_text(json.dumps(res))
    line = next(l for l in render(run).splitlines() if l.startswith("- Python"))
    assert "transformers 0.0-recorded" not in line and "did not record its own" in line


def test_int4_quantizes_a_copy_read_head(tmp_path):
    """tiny:llama's head has the copy read, whose step-role table is a [3n, K] weight (K=3, not a multiple of the
    block): ai-edge-quantizer fails on it under int4-b32 (Gemma's export died there). Those ops get int8, all
    other weights int4, and speculative output stays plain output."""
    from mtplite.export.contract import read_tflite
    from mtplite.model import generate as G
    from mtplite.quantize.quantize import parse_recipe, quantize_bundle, unblockable_scopes
    from mtplite.runtime.litert import Bundle

    f = bundle("tiny:llama")
    assert unblockable_scopes(f / "android" / "drafter.tflite", 32)
    q = tmp_path / "q"
    quantize_bundle(f, q, parse_recipe("int4-b32"), progress=lambda s: None)
    _, wb = read_tflite(q / "android" / "drafter.tflite")
    assert wb.get("int4", 0) > 10 * wb.get("int8", 0) > 0
    bb, *_ = trained("tiny:llama")
    b = Bundle(q, threads=1)
    for p in PROMPTS[:4]:
        ids = bb.encode(p)
        runs = [G.run(ids, b.steps(), max_new_tokens=16, eos_ids=set(bb.eos_ids), K=k, cache_len=C) for k in (0, 3)]
        assert runs[0]["tokens"] == runs[1]["tokens"], p
