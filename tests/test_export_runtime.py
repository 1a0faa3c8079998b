import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import PROMPTS, script, trained
from mtplite.model import generate as G
from mtplite.model.decoder import causal_mask

C = 128
EXPORT_FAMILIES = ["tiny:gemma3", "tiny:qwen3", "tiny:llama"]
_bundles = {}


def bundle(spec):
    if spec not in _bundles:
        from mtplite.export.export import export

        bb, head, *_ = trained(spec)
        out = Path(os.environ["MTPLITE_CACHE"]) / f"bundle-{spec.replace(':', '-')}"
        export(bb, head, {}, out, cache_len=C, prefill_lengths=(16, 64), progress=lambda s: None)
        _bundles[spec] = out
    return _bundles[spec]


def loaded(spec, mtp=True):
    from mtplite.runtime.litert import Bundle

    return Bundle(bundle(spec), threads=1, mtp=mtp)


@pytest.mark.parametrize("spec", EXPORT_FAMILIES)
def test_graphs_match_torch(spec):
    bb, head, *_ = trained(spec)
    b = loaded(spec)
    dec = bb.model
    ids = bb.encode("Things Alex needs for a moving day plan:\n-") + [5, 9, 33, 71, 100, 3]
    kv = dec.empty_cache(C)
    b.steps()  # resets the shared KV buffers
    worst = 0.0
    for p, t in enumerate(ids):
        with torch.no_grad():
            pos = torch.tensor([p], dtype=torch.int32)
            lg, act, kv = dec(dec.embed(torch.tensor([[t]])), pos, causal_mask(pos, C), kv)
        outs, _ = b.run_backbone("decode", [t], p)
        got = b.logits_rows(outs, 1)[0]
        worst = max(worst, float(np.abs(got - lg[0, 0].numpy()).max()))
        assert int(got.argmax()) == int(lg[0, 0].argmax())
    print(f"{spec}: max |dlogit| decode vs torch = {worst:.2e}")
    assert worst < 1e-2
    # verify == step-by-step decode, row by row (the bool-mask trap would break this)
    P = len(ids) - 4
    b.reset()
    b.prefill(ids[:P], 0)
    ys, acts = b.verify(ids[P : P + 4], P)
    b.reset()
    b.prefill(ids[:P], 0)
    for r in range(4):
        y, a = b.decode(ids[P + r], P + r)
        assert y == ys[r]
        assert np.abs(a - acts[r]).max() < 1e-3
    # drafter graph == torch head on the same cache
    b.reset()
    b.prefill(ids[:P], 0)
    y, a = b.decode(ids[P], P)
    d_lite = b.draft(y, a, P + 1, 3)
    prefill, decode, verify, draft = G.torch_steps(bb, head, C)
    prefill(ids[:P], 0)
    y2, a2 = decode(ids[P], P)
    assert y2 == y
    assert draft(y2, a2, P + 1, 3) == d_lite


@pytest.mark.parametrize("spec", EXPORT_FAMILIES)
def test_runtime_equals_torch_and_plain(spec):
    bb, head, *_ = trained(spec)
    b = loaded(spec)
    for i, p in enumerate(PROMPTS[:12]):
        ids = bb.encode(p)
        n = [5, 13, 24, 40][i % 4]
        ref = G.run(ids, G.torch_steps(bb, head, C), max_new_tokens=n, eos_ids=set(bb.eos_ids), K=3, cache_len=C)
        lite = G.run(ids, b.steps(), max_new_tokens=n, eos_ids=set(bb.eos_ids), K=3, cache_len=C)
        plain = G.run(ids, b.steps(), max_new_tokens=n, eos_ids=set(bb.eos_ids), K=0, cache_len=C)
        assert lite["tokens"] == ref["tokens"] == plain["tokens"], p
        assert lite["trace"] == ref["trace"]  # same drafts, same verify results, cycle by cycle


@pytest.mark.parametrize("spec", ["tiny:gemma3", "tiny:qwen3"])
def test_context_space_on_litert_equals_torch_and_plain(spec):
    """drafter_ctx.tflite (the head also drafts the text's own ids outside its draft space, rows filled by the
    runtime from the embedder graph and the shared V cache) drafts what the torch reference drafts, cycle by cycle,
    and the output stays plain greedy's. Its size is the head's own (head.json), not an export flag."""
    from mtplite.runtime.litert import Bundle

    bb, head, *_ = trained(spec)
    b = Bundle(bundle(spec), threads=1, mtp=True, context=True)
    assert b.use_context and b.cx_M == head.c.context == 64
    used = 0
    for i, p in enumerate(PROMPTS[:8]):
        ids = bb.encode(p)
        n = [5, 13, 24, 40][i % 4]
        ref = G.run(ids, G.torch_steps(bb, head, C, context=b.cx_M), max_new_tokens=n, eos_ids=set(bb.eos_ids), K=3,
                    cache_len=C)
        lite = G.run(ids, b.steps(), max_new_tokens=n, eos_ids=set(bb.eos_ids), K=3, cache_len=C)
        used += bool(b.cx_ids)  # the last cycle drafted with a non-empty context space
        plain = G.run(ids, b.steps(), max_new_tokens=n, eos_ids=set(bb.eos_ids), K=0, cache_len=C)
        assert lite["tokens"] == ref["tokens"] == plain["tokens"], p
        assert lite["trace"] == ref["trace"], p
    assert used >= 4, used
    # the runtime keeps the space incrementally: what context_ids picks from the history, also across a rewrite of
    # positions it had taken in and a draft at an earlier position; the drafter's mask row is _mask's
    from mtplite.model.head import context_ids
    from mtplite.runtime.litert import _mask

    def picked(pos):
        return [t for t, _ in context_ids(b.hist[:pos], b.space_map, len(b.space_ids), b.cx_M)]

    ids = bb.encode(PROMPTS[0] + " " + PROMPTS[1])
    b.reset()
    b.prefill(ids, 0)
    for pos in (1, 7, 8, len(ids) - 3, len(ids), 5):
        assert b.context_space(pos) == picked(pos), pos
    b.prefill(ids[::-1][:10], 2)  # rewrites positions 2..11, which the space had taken in
    assert b.context_space(len(ids)) == picked(len(ids)) and picked(len(ids))
    for pos in (0, 1, C // 2, C - 1):
        np.testing.assert_array_equal(b.drafter_mask(pos), _mask([pos], C)[0])
    for t in ids[:3] * 2:  # the drafter's input rows, kept per id, are the embedder's
        np.testing.assert_array_equal(b.embed_row(t), b.embed([t])[0])


def test_k_step_drafter_with_copy_read_equals_torch(tmp_path):
    """mtp_draft_k on a head with both the copy read and the context draft space (as the real heads have; the tiny
    trained ones have one or the other): one call drafts, cycle by cycle, what K torch head steps draft, with a
    probability per draft, and the output stays plain greedy's."""
    from mtplite.export.export import export
    from mtplite.model.head import MTPHead, head_config
    from mtplite.model.load import load_backbone
    from mtplite.runtime.litert import Bundle

    bb = load_backbone("tiny:llama")
    torch.manual_seed(3)
    head = MTPHead(head_config(bb.model.c, list(range(200)), K=3, copy_heads=2, context=32))
    head.init_from_backbone(bb.model)
    with torch.no_grad():  # off its lookup-like start, so that drafts differ from step to step
        for prm in head.parameters():
            prm.add_(0.05 * torch.randn_like(prm))
    head.eval()
    export(bb, head, {}, tmp_path / "b", cache_len=C, prefill_lengths=(16, 64), progress=lambda s: None)
    b = Bundle(tmp_path / "b", threads=1, context=True)
    assert b.use_context and b.cx_rows
    b.record_probs = []
    varied, lite_all = 0, []
    for p in PROMPTS[:6]:
        ids = bb.encode(p + " " + p)
        ref = G.run(ids, G.torch_steps(bb, head, C, context=32), max_new_tokens=24, eos_ids=set(), K=3, cache_len=C)
        lite = G.run(ids, b.steps(), max_new_tokens=24, eos_ids=set(), K=3, cache_len=C)
        plain = G.run(ids, b.steps(), max_new_tokens=24, eos_ids=set(), K=0, cache_len=C)
        assert lite["tokens"] == ref["tokens"] == plain["tokens"], p
        assert lite["trace"] == ref["trace"], p
        varied += sum(len(set(c["drafted"])) > 1 for c in lite["trace"])
        lite_all += lite["trace"]
    assert varied > 0
    # drafts from both tables: the draft space (ids < 200) and the context space (the text's own ids outside it)
    assert {t < 200 for c in lite_all for t in c["drafted"]} == {True, False}
    assert b.record_probs and all(len(q) == 3 and all(0 < x <= 1 for x in q) for q in b.record_probs)
    # the windowed signatures (the cache's first W slots) draft what the full graph drafts wherever pos <= W
    from mtplite.export.contract import DRAFT_K, draft_k_signature, draft_k_windows
    from mtplite.runtime.litert import _mask

    assert sorted(b.sigs["drafter_ctx"]) == sorted([DRAFT_K] + [f"{DRAFT_K}_{w}" for w in draft_k_windows(C)])
    assert b.cx_windows == draft_k_windows(C) == [16, 32, 64]  # C = 128
    assert draft_k_signature(b.cx_windows, 20) == f"{DRAFT_K}_32"
    ids = bb.encode(PROMPTS[0] + " " + PROMPTS[1] + " " + PROMPTS[2])[:64]
    b.reset()
    b.prefill(ids[:-1], 0)
    t, act = b.decode(ids[-1], len(ids) - 1)
    dr, checked = b.models["drafter_ctx"], 0
    for pos in (3, 16, 17, 32, 33, 64, 65):
        b.context_space(pos)
        got = {}
        for sig in [DRAFT_K] + [f"{DRAFT_K}_{w}" for w in draft_k_windows(C) if pos <= w]:
            b.cx_in["input_pos"].write(np.array([pos], np.int32))
            b.cx_in["mask"].write(_mask([pos], C).reshape(-1))
            b.cx_in["activations"].write(np.concatenate([b.embed([t])[0], np.asarray(act, np.float32)]))
            dr.run_by_name(sig, {**b.cx_in, **b.cx_kv}, b.cx_out)
            got[sig] = [b.cx_out[n].read(k, dt) for n, k, dt in (("draft_ids", 3, np.int32), ("draft_probs", 3, np.float32),
                                                                   ("projected_activations", bb.model.c.hidden_size, np.float32))]
        for sig, (i, pr, a) in got.items():
            assert i.tolist() == got[DRAFT_K][0].tolist(), (pos, sig)
            np.testing.assert_allclose(pr, got[DRAFT_K][1], rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(a, got[DRAFT_K][2], rtol=1e-4, atol=1e-4)
            checked += sig != DRAFT_K
    assert checked == 3 + 3 + 2 + 2 + 1 + 1


@pytest.mark.parametrize("spec", ["tiny:gemma3", "tiny:qwen3"])
def test_k_step_drafter_reads_each_weight_once_per_step(spec):
    """Every draft step of mtp_draft_k (and of each window) runs each weight matrix in one fully-connected op: the
    converter once duplicated the head's input projection (one copy per consumer's shape), so that its weights were
    read twice per step (0.90x the graph's time without the copy; lab/notes/PERF.md, Session 37)."""
    from collections import Counter

    from ai_edge_litert import schema_py_generated as S

    m = S.Model.GetRootAsModel(bytearray((bundle(spec) / "android" / "drafter_ctx.tflite").read_bytes()), 0)
    fc = next(i for i in range(m.OperatorCodesLength()) if m.OperatorCodes(i).BuiltinCode() == S.BuiltinOperator.FULLY_CONNECTED)
    assert m.SignatureDefsLength() == 4  # C = 128: the full graph and windows 16, 32, 64
    for s in range(m.SignatureDefsLength()):
        sub = m.Subgraphs(m.SignatureDefs(s).SubgraphIndex())
        uses = Counter()
        for j in range(sub.OperatorsLength()):
            op = sub.Operators(j)
            w = sub.Tensors(op.Inputs(1)) if op.OpcodeIndex() == fc else None
            if w is not None and m.Buffers(w.Buffer()).DataLength() > 0:  # a constant weight matrix
                uses[w.Buffer()] += 1
        assert len(uses) >= 7 and max(uses.values()) == 3, (m.SignatureDefs(s).SignatureKey(), sorted(uses.values()))
        # no constant copied per call: the draft space's embedding rows were once concatenated with the context's
        # (10 MB of float32 on Gemma, every call) to gather the next step's input row
        for j in range(sub.OperatorsLength()):
            op = sub.Operators(j)
            if m.OperatorCodes(op.OpcodeIndex()).BuiltinCode() == S.BuiltinOperator.CONCATENATION:
                consts = [sub.Tensors(i).ShapeAsNumpy().tolist() for i in op.InputsAsNumpy()
                          if m.Buffers(sub.Tensors(i).Buffer()).DataLength() > 0]
                assert not consts, (m.SignatureDefs(s).SignatureKey(), consts)


def test_zero_copy_shared_kv():
    bb, head, *_ = trained("tiny:gemma3")
    b = loaded("tiny:gemma3")
    ids = bb.encode("Hello world, this is a test of the shared cache")
    b.prefill(ids[:-1], 0)
    y, a = b.decode(ids[-1], len(ids) - 1)
    before = b.draft(y, a, len(ids), 3)
    name = f"kv_cache_k_{head.c.read_layers[0]}"
    shape = b.sigs["backbone"]["decode"]["inputs"][name]["shape"]
    rng = np.random.default_rng(0)
    b.kv[name].write(rng.normal(0, 5, int(np.prod(shape))).astype(np.float32))
    after = b.draft(y, a, len(ids), 3)
    logits_changed = before != after
    if not logits_changed:  # argmax may survive; compare raw logits
        b.dr_in["activations"].write(np.concatenate([b.embed([y])[0], a]))
        b.models["drafter"].run_by_name("mtp_drafter", {**b.dr_in, **b.dr_kv}, b.dr_out)
        l1 = b.dr_out["logits"].read(b.V, np.float32)
        b.kv[name].write(np.zeros(int(np.prod(shape)), np.float32))
        b.models["drafter"].run_by_name("mtp_drafter", {**b.dr_in, **b.dr_kv}, b.dr_out)
        l2 = b.dr_out["logits"].read(b.V, np.float32)
        logits_changed = np.abs(l1 - l2).max() > 1e-3
    assert logits_changed


def test_budget_and_eos_on_litert():
    bb, head, *_ = trained("tiny:gemma3")
    b = loaded("tiny:gemma3")
    ids = bb.encode("The three primary colors are")
    full = G.run(ids, b.steps(), max_new_tokens=40, eos_ids=set(), K=3, cache_len=C)["tokens"]
    for n in range(1, 12):
        r = G.run(ids, b.steps(), max_new_tokens=n, eos_ids=set(), K=3, cache_len=C)
        assert r["tokens"] == full[:n]
    eos = {full[9]}
    r = G.run(ids, b.steps(), max_new_tokens=40, eos_ids=eos, K=3, cache_len=C)
    assert r["tokens"] == full[: full.index(full[9])] and r["stop_reason"] == "eos"
    # near the cache end the loop falls back to plain decode and stops cleanly at the cache
    long_ids = (ids * 40)[: C - 6]
    r = G.run(long_ids, b.steps(), max_new_tokens=40, eos_ids=set(), K=3, cache_len=C)
    p = G.run(long_ids, b.steps(), max_new_tokens=40, eos_ids=set(), K=0, cache_len=C)
    assert r["tokens"] == p["tokens"] and r["stop_reason"] == "cache_full" and len(r["tokens"]) == 7  # C - P + 1


CONVERSE = r"""
import json, sys, litert_lm
path, prompts, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
with litert_lm.ModelInfo(path) as mi:
    spec = mi.llm.has_speculative_decoding_support()
eng = litert_lm.Engine(path, backend=litert_lm.Backend.CPU(), max_num_tokens=128, cache_dir=sys.argv[4])
rows = []
for p in prompts:
    out = {}
    for on in (False, True):
        c = eng.create_conversation(max_output_tokens=n, enable_speculative_decoding=on)
        out["rendered"] = c.render_message_to_string(p)
        out[on] = "".join(x["text"] for x in c.send_message(p).to_json()["content"] if x["type"] == "text")
        c.close()
    rows.append([out[False], out[True], out["rendered"]])
print("RESULT " + json.dumps({"spec": spec, "rows": rows}))
"""


def converse(litertlm, prompts, n, tmp):
    """The official engine's Conversation API (as apps call it) on each prompt, MTP off and on."""
    r = subprocess.run([sys.executable, "-c", CONVERSE, str(litertlm), json.dumps(prompts), str(n), str(tmp)],
                       capture_output=True, text=True, timeout=600)
    line = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
    assert line, r.stderr[-2000:]
    return json.loads(line[0][7:])


@pytest.mark.parametrize("spec", ["tiny:gemma3", "tiny:qwen3", "tiny:llama"])  # tiny:llama's drafter has the copy read
def test_official_engine_conversation_runs_bundle(spec, tmp_path):
    """An app's path: Engine + create_conversation + send_message on the bundle, MTP off and on. A base model's user
    message reaches the model as its raw text (BOS + text, as mtplite's runtime feeds it), so MTP off is the torch
    reference's greedy text."""
    bb, head, *_ = trained(spec)
    out = bundle(spec)
    prompts = PROMPTS[:8]
    res = converse(out / "model.litertlm", prompts, 16, tmp_path)
    assert res["spec"] is True
    for p, (off, on, rendered) in zip(prompts, res["rows"]):
        assert rendered == p
        ref = G.run(bb.encode(p), G.torch_steps(bb, head, C), max_new_tokens=16, eos_ids=set(bb.eos_ids), K=3,
                    cache_len=C)
        assert off == bb.tokenizer.decode(ref["tokens"], skip_special_tokens=False), p
        # litert_lm 0.18.1 may emit up to K tokens past max_output_tokens with MTP on; the overlap must match
        assert on.startswith(off) or off.startswith(on), (p, off, on)


ENGINE_DRAFTS = r"""
import sys, json, litert_lm
path, prompts, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
litert_lm.set_min_log_severity(litert_lm.LogSeverity.INFO)
eng = litert_lm.Engine(path, backend=litert_lm.Backend.CPU(), max_num_tokens=128, cache_dir=sys.argv[4])
for p in prompts:
    c = eng.create_conversation(max_output_tokens=n, enable_speculative_decoding=True)
    c.send_message(p)
    c.close()
eng.close()
"""


@pytest.mark.parametrize("spec", ["tiny:gemma3", "tiny:llama"])
def test_official_engine_drafts_as_our_runtime_does(spec, tmp_path):
    """The engine feeds the contract's drafter as our runtime does: its drafter's success rate (accepted / drafted,
    logged when the drafter is destroyed) is our per-step mode's on the same prompts, to the sixth digit.
    LiteRT-LM gives the drafter the newest cached token's position; a graph that took it for the drafted-after token's
    accepted a quarter fewer in the engine than in our runtime, with the same text."""
    from mtplite.runtime.litert import Bundle, encode, load_tokenizer

    out = bundle(spec)
    prompts, n = PROMPTS[:6], 24
    r = subprocess.run([sys.executable, "-c", ENGINE_DRAFTS, str(out / "model.litertlm"), json.dumps(prompts), str(n),
                        str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rate = [float(x) for x in re.findall(r"Success rate: ([0-9.eE+-]+)", r.stderr)]  # accepted / drafted, 6 digits
    assert len(rate) == 1, r.stderr[-2000:]
    b, tok = Bundle(out, threads=1, mtp=True), load_tokenizer(out)
    ours = cycles = 0
    for p in prompts:
        res = G.run(encode(tok, b.man, p), b.steps(), max_new_tokens=n, eos_ids=set(b.man["eos_ids"]), K=b.K,
                    cache_len=b.C)
        ours += res["accepted"]
        cycles += res["cycles"]
    assert ours > 0 and abs(rate[0] - ours / (cycles * b.K)) < 1e-6, (rate, ours, cycles)


CHAT = ("{{ bos_token }}{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}")


def test_official_engine_conversation_applies_the_chat_template(tmp_path):
    """An instruction-tuned backbone's bundle carries its chat template into the .litertlm: the engine renders a user
    message exactly as mtplite's runtime encodes it, and answers with the runtime's text, MTP off and on."""
    from mtplite.export.bundle import pack_litertlm
    from mtplite.runtime.litert import Bundle, encode, load_tokenizer

    out = _copy(bundle("tiny:llama"), tmp_path / "chat")
    man_path = out / "android" / "manifest.json"
    man = {**json.loads(man_path.read_text()), "chat_template": CHAT, "bos_token": "<bos>"}
    man_path.write_text(json.dumps(man))
    pack_litertlm(out / "android", man, out / "model.litertlm")
    prompts = PROMPTS[:5]
    res = converse(out / "model.litertlm", prompts, 12, tmp_path)
    tok = load_tokenizer(out)
    b = Bundle(out, threads=1)
    for p, (off, on, rendered) in zip(prompts, res["rows"]):
        ids = encode(tok, man, p)
        # the runtime places BOS as the engine does: its start token, then the template with bos_token empty
        assert rendered == f"<user> {p}\n<assistant>" and ids[0] == man["bos_id"] == 1
        assert ids[1:] == list(tok(rendered, add_special_tokens=False)["input_ids"])
        r = G.run(ids, b.steps(), max_new_tokens=12, eos_ids=set(man["eos_ids"]), K=0, cache_len=b.C)
        assert off == tok.decode(r["tokens"], skip_special_tokens=False), p
        assert on.startswith(off) or off.startswith(on), (p, off, on)


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_inspect_accepts_and_refuses(tmp_path):
    from mtplite.errors import UserError
    from mtplite.export.cli import inspect_bundle
    from mtplite.export.export import _convert
    from mtplite.export.graphs import DrafterGraph, drafter_sample

    good = bundle("tiny:gemma3")
    assert inspect_bundle(good)["ok"]
    bb, head, *_ = trained("tiny:gemma3")
    # drafter exported for another cache length: the KV buffers cannot be shared
    bad = _copy(good, tmp_path / "cachelen")
    _convert([("mtp_drafter", DrafterGraph(head), drafter_sample(bb.model.c, head.c, 64))],
             bad / "android" / "drafter.tflite")
    with pytest.raises(UserError) as e:
        inspect_bundle(bad)
    assert "kv_cache_k_" in str(e.value) and "64" in str(e.value) and "128" in str(e.value)
    # truncated .litertlm
    bad = _copy(good, tmp_path / "trunc")
    f = bad / "model.litertlm"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(UserError) as e:
        inspect_bundle(bad)
    assert "truncated" in str(e.value)
    # truncated drafter .tflite
    bad = _copy(good, tmp_path / "trunc2")
    f = bad / "android" / "drafter.tflite"
    f.write_bytes(f.read_bytes()[:5000])
    with pytest.raises(UserError):
        inspect_bundle(bad)
    # a bundle without the MTP_DRAFTER section
    from mtplite.export.bundle import pack_litertlm

    bad = _copy(good, tmp_path / "nosection")
    pack_litertlm(bad / "android", json.loads((bad / "android" / "manifest.json").read_text()), bad / "model.litertlm",
                  drafter=False)
    with pytest.raises(UserError) as e:
        inspect_bundle(bad)
    assert "tf_lite_mtp_drafter" in str(e.value)
    # CLI: one line, exit 2
    r = subprocess.run([sys.executable, "-m", "mtplite.cli", "inspect", str(bad)], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "tf_lite_mtp_drafter" in r.stderr


def test_exact_mode_plain_through_verify_graph():
    """Exact mode: plain steps run row 0 of the verify graph; speculative output must equal it token for token."""
    from mtplite.runtime.litert import Bundle

    bb, head, *_ = trained("tiny:qwen3")
    b = Bundle(bundle("tiny:qwen3"), threads=1, exact=True)
    for p in PROMPTS[:8]:
        ids = bb.encode(p)
        plain = G.run(ids, b.steps(), max_new_tokens=30, eos_ids=set(bb.eos_ids), K=0, cache_len=C)
        mtp = G.run(ids, b.steps(), max_new_tokens=30, eos_ids=set(bb.eos_ids), K=3, cache_len=C)
        assert plain["tokens"] == mtp["tokens"]


def test_calibration_prompts_take_every_task_in_turn():
    """calibrate's default prompts: held-out templates only, every task of the held-out set among the first 12 and
    no template twice before each of its task's templates had a turn (the first 12 in corpus order held no rewrite)."""
    from collections import Counter

    from mtplite.data import training_prompts
    from mtplite.runtime.calibrate import calibration_prompts
    from mtplite.data.splits import split_rows

    val = split_rows(training_prompts())[1]
    held = {r["template"] for r in val}
    got = calibration_prompts(12, "by-task", sorted(held))
    assert len(got) == 12 and {r["template"] for r in got} <= held
    assert {r["task"] for r in got} == {r["task"] for r in val} and len({r["task"] for r in val}) == 6
    for task in {r["task"] for r in got}:
        n = Counter(r["template"] for r in got if r["task"] == task)
        templates = {r["template"] for r in val if r["task"] == task}
        assert max(n.values()) - min(n.values()) <= 1 and len(n) == min(sum(n.values()), len(templates))


def test_confidence_gate_declines_unsure_drafts_and_stays_exact(tmp_path):
    """The head declines a cycle whose first draft is below `min_prob`: a gate nobody passes leaves only plain steps,
    a middling one mixes plain steps and cycles; the output is plain greedy's either way. calibrate picks a gate and bench runs it."""
    from mtplite.runtime.bench import bench, markdown
    from mtplite.runtime.calibrate import GATES, NEAR_TIE, calibrate, near_tie_choice, predict_gate

    bb, head, *_ = trained("tiny:gemma3")
    b = loaded("tiny:gemma3")
    b.record_probs = []
    ids = [bb.encode(p) for p in PROMPTS[:6]]
    plain = [G.run(x, b.steps(), max_new_tokens=30, eos_ids=set(bb.eos_ids), K=0, cache_len=C)["tokens"] for x in ids]
    for x in ids:
        G.run(x, b.steps(), max_new_tokens=30, eos_ids=set(bb.eos_ids), K=3, cache_len=C)
    first = sorted(p[0] for p in b.record_probs)
    assert all(0 < q <= 1 for p in b.record_probs for q in p)
    b.record_probs = None
    for gate, check in ((1.01, lambda r: r["cycles"] == 0 and r["plain_steps"] > 0),
                        (first[len(first) // 2], lambda r: r["cycles"] > 0 and r["plain_steps"] > 1)):
        b.min_prob = gate
        runs = [G.run(x, b.steps(), max_new_tokens=30, eos_ids=set(bb.eos_ids), K=3, cache_len=C) for x in ids]
        assert [r["tokens"] for r in runs] == plain
        assert all(check(r) for r in runs[:1]) and any(check(r) for r in runs), gate
    b.min_prob = 0.0
    # the same with drafter_ctx (its probabilities come from draft-space logits): a gate nobody passes, then none
    from mtplite.runtime.litert import Bundle

    bc = Bundle(bundle("tiny:gemma3"), threads=1, context=True)
    for gate, check in ((1.01, lambda r: r["cycles"] == 0), (0.0, lambda r: r["cycles"] > 0)):
        bc.min_prob = gate
        runs = [G.run(x, bc.steps(), max_new_tokens=30, eos_ids=set(bb.eos_ids), K=3, cache_len=C) for x in ids]
        assert [r["tokens"] for r in runs] == plain and all(check(r) for r in runs), gate

    # calibrate's hybrid runs behind the gate, as the runtimes run it: a gate nobody passes leaves lookup alone
    from mtplite.runtime.calibrate import draft_counts

    look = draft_counts(bc, ids, 30, "lookup")
    assert draft_counts(bc, ids, 30, "hybrid", 1, gate=1.01) == {**look, "draft_s": pytest.approx(look["draft_s"], abs=0.5)}
    assert draft_counts(bc, ids, 30, "hybrid", 1)["plain"] < look["plain"]  # ungated, the head drafts where lookup cannot

    # the predictor: no gate = the ungated cycle cost; a gate nobody passes = plain decoding plus what deciding cost
    # (one step of the contract's drafter, the whole call of the K-step one); a kept cycle keeps all K drafts
    cycles = [([0.9, 0.8, 0.2], 2), ([0.3, 0.9, 0.9], 0), ([0.95, 0.9, 0.9], 3)]
    assert predict_gate(cycles, 1.0, 1.2, 0.3, 0.1, 0.0) == pytest.approx((3 + 1 + 4) / (3 * 1.5))
    assert predict_gate(cycles, 1.0, 1.2, 0.3, 0.1, 2.0) == pytest.approx(1 / 1.1)
    assert predict_gate(cycles, 1.0, 1.2, 0.3, 0.1, 0.5) == pytest.approx((3 + 1 + 4) / (1.5 + 1.1 + 1.5))
    assert predict_gate(cycles, 1.0, 1.2, 0.3, 0.3, 0.5) == pytest.approx((3 + 1 + 4) / (1.5 + 1.3 + 1.5))

    out = tmp_path / "b"
    shutil.copytree(bundle("tiny:gemma3"), out)
    s = calibrate(out, [{"prompt": p} for p in PROMPTS[:4]], threads=1)
    assert s["min_prob"] in GATES and set(s["predicted_speedup_per_gate"]) == {str(g) for g in GATES}
    assert s["drafter"] == "drafter_ctx"  # calibrated on the drafter generate runs by default
    # hybrid's shortest lookup match, measured per drafter, and the bench's hybrid modes run with it
    assert set(s["hybrid_min_ngram"]) == {"drafter", "drafter_ctx"} and set(s["hybrid_min_ngram"].values()) <= {1, 2, 3}
    for d, n in s["hybrid_min_ngram"].items():
        pred, per_pass = s["predicted_speedup_hybrid"][d], s["tokens_per_pass_hybrid"][d]
        assert pred[str(n)] >= max(pred.values()) * (1 - NEAR_TIE)
        assert per_pass[str(n)] == max(per_pass[m] for m, v in pred.items() if v >= max(pred.values()) * (1 - NEAR_TIE))
    # a near-tie in predicted speed goes to fewer backbone passes; a clear win does not
    assert near_tie_choice({"1": 1.758, "2": 1.740, "3": 1.70}, {"1": 2.5, "2": 2.7, "3": 2.8}) == 2
    assert near_tie_choice({"1": 1.80, "2": 1.74, "3": 1.70}, {"1": 2.5, "2": 2.7, "3": 2.8}) == 1
    assert near_tie_choice({"1": 1.75, "2": 1.75, "3": 1.75}, {"1": 2.5, "2": 2.5, "3": 2.5}) == 1
    # who drafts by default: the best predicted of head, hybrid and lookup; generate follows it, same text
    # (or "off" where even the best is predicted no faster than plain: a tiny model's may be, on a busy machine)
    pd = s["predicted_speedup_per_draft"]
    best = s["draft"] if s["draft"] != "off" else max(pd, key=pd.get)
    assert best in ("mtp", "hybrid", "lookup") and pd[best] == max(pd.values())
    assert s["draft"] != "off" or s["predicted_speedup"] <= 1.05
    texts, man_path = {}, out / "android" / "manifest.json"
    man = json.loads(man_path.read_text())
    man["settings"]["draft"] = best  # so that generate --draft auto drafts
    man_path.write_text(json.dumps(man))
    for draft in ("auto", "mtp", "hybrid", "lookup"):
        r = subprocess.run([sys.executable, "-m", "mtplite.cli", "generate", str(out), "--prompt", PROMPTS[0],
                            "--max-new-tokens", "20", "--json", "--draft", draft], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout.strip().splitlines()[-1])
        texts[draft] = doc["tokens"]
        assert doc["draft"] == (best if draft == "auto" else draft)
    assert len(set(map(tuple, texts.values()))) == 1
    # generate runs the head behind calibrate's gate (settings.min_prob) unless --no-gate: same text either way
    man["settings"]["min_prob"] = first[-2]  # a gate only the surest first draft passes
    man_path.write_text(json.dumps(man))
    cycles = []
    for flags in ([], ["--no-gate"]):
        r = subprocess.run([sys.executable, "-m", "mtplite.cli", "generate", str(out), "--prompt", PROMPTS[0],
                            "--max-new-tokens", "20", "--json", "--draft", "mtp"] + flags, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout.strip().splitlines()[-1])
        assert doc["tokens"] == texts["mtp"]
        cycles.append(doc["cycles"])
    assert cycles[0] < cycles[1], cycles
    man["settings"]["min_prob"] = first[len(first) // 2]
    man["settings"]["hybrid_min_ngram"] = {"drafter": 3, "drafter_ctx": 2}
    man_path.write_text(json.dumps(man))
    bh = Bundle(out, threads=1, context=True)
    assert bh.hybrid_min_ngram() == 2
    bh.use_context = False
    assert bh.hybrid_min_ngram() == 3
    prompts = [{"id": str(i), "task": "t", "prompt": p} for i, p in enumerate(PROMPTS[:4])]
    res = bench(out, prompts, max_new=20, modes=("plain", "mtp+gate", "hybrid+gate"), threads=1, engine=False,
                progress=False)
    assert res["spec_vs_plain_mismatches"] == 0 and res["min_prob"] == man["settings"]["min_prob"]
    assert res["hybrid_min_ngram"] == {"drafter": 3, "drafter_ctx": 2}
    assert res["table"]["plain"]["all"]["tokens_per_pass"] == pytest.approx(1.0)
    assert res["table"]["mtp+gate"]["all"]["tokens_per_pass"] > 1.0
    # the energy proxy: process CPU-seconds per generated token of each mode, from the per-prompt user + system time
    for m in res["modes"]:
        recs, row = res["per_prompt"][m]["all"], res["table"][m]["all"]
        assert all(r["cpu_s"] > 0 for r in recs)
        assert row["cpu_s_per_token"] == pytest.approx(sum(r["cpu_s"] for r in recs) / sum(r["tokens"] for r in recs))
    assert "CPU-ms per generated token" in markdown(res)


def test_draft_table_replays_rules_as_the_loop_runs_them(tmp_path):
    """lab/scripts/draft_table.py records both drafters at every position of one exact-mode greedy stream and replays
    hybrid rules on it: each replayed rule must give the cycles, accepted drafts and plain steps the loop itself runs
    with that rule (else choosing a rule on the replay means nothing)."""
    from mtplite.model import generate as G
    from mtplite.runtime.litert import Bundle
    from mtplite.runtime.lookup import drafting

    dt = script("draft_table")
    bb, *_ = trained("tiny:gemma3")
    b = Bundle(bundle("tiny:gemma3"), threads=1, mtp=True, context=True, exact=True)
    b.use_context = True
    eos, N = set(bb.eos_ids), 20
    rows = []
    for p in PROMPTS[:6]:
        ids = bb.encode(p)
        stream, heads = dt.table(b, ids, 3, N, eos)
        rows.append({"task": "t", "P": len(ids), "max_new": N, "stream": stream, "heads": heads, "ids": ids})
    checked = 0
    for draft, n, gate, choose in [("lookup", None, 0.0, dt.rule_lookup()), ("hybrid", 1, 0.0, dt.rule_hybrid(1, 0.0)),
                                   ("hybrid", 2, 0.3, dt.rule_hybrid(2, 0.3)), ("mtp", None, 0.3, dt.rule_head(0.3)),
                                   ("mtp", None, 0.0, dt.rule_head(0.0))]:
        loop = {"cycles": 0, "accepted": 0, "plain": 0}
        for r in rows:
            b.min_prob = gate
            steps, on_tok, _ = drafting(b.steps(), r["ids"], draft, min_ngram=n)
            res = G.run(r["ids"], steps, max_new_tokens=N, eos_ids=eos, K=3, cache_len=b.C, on_token=on_tok)
            b.min_prob = 0.0
            assert res["tokens"] == [t for t in r["stream"][r["P"]:r["P"] + N] if t != dt.EOS], draft  # exact mode: every rule emits one stream
            loop["cycles"] += res["cycles"]
            loop["accepted"] += res["accepted"]
            loop["plain"] += 1 + res["plain_steps"]
        rep = dt.replay(rows, choose, 3)["t"]
        assert (rep["cycles"], rep["accepted"], rep["plain"]) == (loop["cycles"], loop["accepted"], loop["plain"]), (draft, n, gate, dict(rep), loop)
        checked += loop["cycles"]
    assert checked > 0


def test_same_cycles_scores_each_drafter_as_the_loop_does(tmp_path):
    """lab/scripts/same_cycles.py scores drafts against the emitted stream: on the driver's own cycles that must give the
    accepted counts the loop itself recorded (else the head-vs-lookup comparison on shared cycles means nothing)."""
    sc = script("same_cycles")
    from mtplite.runtime.lookup import accepted

    bb, *_ = trained("tiny:gemma3")
    b = loaded("tiny:gemma3")
    checked = 0
    for p in PROMPTS[:4]:
        ids = bb.encode(p)
        for driver in ("lookup", "head"):
            stream, rec, res = sc.side_by_side(b, ids, 3, driver, 20, set(bb.eos_ids))
            mine = [accepted(dl if driver == "lookup" else dh, stream, i, 3) for i, dl, dh in rec
                    if (dl if driver == "lookup" else dh) is not None]
            loop = [c["accepted"] for c in res["trace"]]
            assert len(mine) == len(loop) and mine[:-1] == loop[:-1], (driver, mine, loop)  # the last may pass the end
            checked += sum(loop[:-1])
    assert checked > 0
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": str(i), "task": t, "prompt": p}) + "\n"
                               for i, (t, p) in enumerate(zip(("a", "b", "a"), PROMPTS))))
    r = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[1] / "lab" / "scripts" / "same_cycles.py"),
                        str(bundle("tiny:gemma3")), "--prompts", str(prompts), "--max-new-tokens", "20", "--threads", "1",
                        "--json", str(tmp_path / "sc.json")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "sc.json").read_text())
    assert doc["prompts"] == 3 and set(doc["on_lookup_cycles"]) == {"a", "b", "all"}
    assert doc["on_lookup_cycles"]["all"]["cycles"] == sum(doc["on_lookup_cycles"][t]["cycles"] for t in "ab")


ENGINE_OFF = r"""
import json, sys, litert_lm
path, prompts, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
with litert_lm.ModelInfo(path) as mi:
    spec = mi.llm.has_speculative_decoding_support()
eng = litert_lm.Engine(path, backend=litert_lm.Backend.CPU(), max_num_tokens=128, cache_dir=sys.argv[4])
texts = []
for p in prompts:
    s = eng.create_session(apply_prompt_template=False, max_output_tokens=n, enable_speculative_decoding=False)
    s.run_prefill([p]); texts.append(s.run_decode().texts[0]); s.close()
print("RESULT " + json.dumps({"spec": spec, "texts": texts}))
"""


def test_calibrate_records_the_engine_and_offers_a_bundle_without_the_drafter(tmp_path, monkeypatch):
    """calibrate times the official engine with MTP off and on (on its held-out prompts) into the manifest; where
    MTP does not pay there, model-nodrafter.litertlm holds the same graphs without the drafter section: the engine
    runs it with the text of MTP off, and inspect says plainly which file to ship."""
    import mtplite.runtime.engine as E
    from mtplite.export.bundle import NO_DRAFTER
    from mtplite.export.cli import inspect_bundle
    from mtplite.export.contract import litertlm_sections
    from mtplite.runtime.calibrate import calibrate

    out = tmp_path / "b"
    shutil.copytree(bundle("tiny:gemma3"), out)
    man_path = out / "android" / "manifest.json"
    calibrate(out, [{"prompt": p} for p in PROMPTS[:3]], threads=1, max_new=16)
    e = json.loads(man_path.read_text())["engine"]
    assert e["prompts"] == 3 and e["plain_tokens_per_s"] > 0 and e["mtp_tokens_per_s"] > 0, e
    assert e["pays"] == (e["mtp_over_plain"] > 1.0) and (out / NO_DRAFTER).exists() == (not e["pays"])
    assert e["mtp_over_plain"] == pytest.approx(e["mtp_tokens_per_s"] / e["plain_tokens_per_s"], rel=0.01)

    # both verdicts, whichever this machine measured: the engine's speeds set by hand, the variant real
    def engine_at(ratio):
        return lambda *a, **k: {"engine_plain": {"decode_tokens_per_s": 10.0, "texts": ["x"]},
                                "engine_mtp": {"decode_tokens_per_s": 10.0 * ratio, "texts": ["x"]}}

    monkeypatch.setattr(E, "run_engine", engine_at(0.8))
    rec = E.engine_check(out, [{"prompt": p} for p in PROMPTS[:2]], 8)
    assert not rec["pays"] and rec["variant"] == NO_DRAFTER and rec["mtp_over_plain"] == 0.8
    types = [s["model_type"] for s in litertlm_sections(out / NO_DRAFTER) if s["model_type"]]
    assert "tf_lite_mtp_drafter" not in types and {"tf_lite_prefill_decode", "tf_lite_embedder"} <= set(types)
    man = json.loads(man_path.read_text())
    man["engine"] = rec
    man["quantization"] = {"backbone": "int8", "embedder": "int8", "drafter": "int4-b32"}  # as int8-h4 records it
    man_path.write_text(json.dumps(man))
    assert inspect_bundle(out)["variant_sections"] == types
    r = subprocess.run([sys.executable, "-m", "mtplite.cli", "inspect", str(out)], capture_output=True, text=True)
    assert r.returncode == 0 and "does NOT pay" in r.stdout and NO_DRAFTER in r.stdout and "0.80x" in r.stdout, r.stdout
    assert "weights: backbone int8, embedder int8, head int4-b32" in r.stdout
    # the engine runs the variant, plainly, with the text of the full bundle's MTP off
    texts = {}
    for f in ("model.litertlm", NO_DRAFTER):
        r = subprocess.run([sys.executable, "-c", ENGINE_OFF, str(out / f), json.dumps(PROMPTS[:3]), "12",
                            str(tmp_path)], capture_output=True, text=True, timeout=600)
        line = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
        assert line, r.stderr[-2000:]
        texts[f] = json.loads(line[0][7:])
    assert texts["model.litertlm"]["spec"] is True and texts[NO_DRAFTER]["spec"] is False
    assert texts[NO_DRAFTER]["texts"] == texts["model.litertlm"]["texts"]
    # a variant that holds a drafter after all is refused by inspect
    shutil.copyfile(out / "model.litertlm", out / NO_DRAFTER)
    from mtplite.errors import UserError

    with pytest.raises(UserError, match=NO_DRAFTER):
        inspect_bundle(out)
    # where MTP pays, the variant goes (a stale one would contradict the record)
    monkeypatch.setattr(E, "run_engine", engine_at(1.3))
    rec = E.engine_check(out, [{"prompt": p} for p in PROMPTS[:2]], 8)
    assert rec["pays"] and "variant" not in rec and not (out / NO_DRAFTER).exists()
