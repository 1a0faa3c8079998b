import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import FAMILIES, PROMPTS, script, trained
from mtplite.model import generate as G
from mtplite.model.decoder import causal_mask

CACHE = 128


def _gen(bb, head, ids, K, n, eos=None):
    return G.run(ids, G.torch_steps(bb, head, CACHE), max_new_tokens=n, eos_ids=set(bb.eos_ids if eos is None else eos),
                 K=K, cache_len=CACHE)


@pytest.mark.parametrize("spec", FAMILIES)
def test_decoder_matches_hf(spec):
    from mtplite.model.load import _tiny_hf, load_backbone, tiny_tokenizer

    bb = load_backbone(spec)
    hf = _tiny_hf(spec.split(":")[1], len(tiny_tokenizer()), 0)
    ids = torch.tensor([bb.encode("Chat between two friends. A: hello there, how are you doing today?")])
    pos = torch.arange(ids.shape[1], dtype=torch.int32)
    with torch.no_grad():
        ref = hf(ids).logits
        lg, _, _ = bb.model(bb.model.embed(ids), pos, causal_mask(pos, 64), bb.model.empty_cache(64))
    assert (ref - lg).abs().max() < 1e-3


@pytest.mark.parametrize("spec", FAMILIES)
def test_tiny_greedy_not_degenerate(spec):
    from mtplite.model.load import load_backbone

    bb = load_backbone(spec)
    out = _gen(bb, None, bb.encode("Hello world, this is"), 0, 32, eos=())["tokens"]
    assert len(set(out)) >= 8, out


@pytest.mark.parametrize("spec", FAMILIES)
def test_mtp_equals_plain_greedy(spec):
    bb, head, *_ = trained(spec)
    budgets = [1, 2, 3, 5, 7, 11, 17, 24, 31, 40]
    accepted_blocks = 0
    for i, p in enumerate(PROMPTS):
        ids = bb.encode(p)
        n = budgets[i % len(budgets)]
        plain = _gen(bb, head, ids, 0, n)
        mtp = _gen(bb, head, ids, 3, n)
        assert mtp["tokens"] == plain["tokens"], p
        assert len(mtp["tokens"]) <= n
        accepted_blocks += mtp["accepted"]
        # EOS inside an accepted block: declare a token from the middle of the plain output as EOS
        long = _gen(bb, head, ids, 0, 40)["tokens"]
        if len(long) > 8:
            eos = {long[7]}
            a, b = _gen(bb, head, ids, 0, 40, eos=eos), _gen(bb, head, ids, 3, 40, eos=eos)
            assert a["tokens"] == b["tokens"] and b["stop_reason"] == "eos"
    assert accepted_blocks > 0  # the budget/EOS cuts really fell inside multi-token blocks


def test_budget_ends_inside_accepted_block():
    bb, head, *_ = trained("tiny:gemma3")
    hit = 0
    for p in PROMPTS:
        ids = bb.encode(p)
        full = _gen(bb, head, ids, 3, 40)
        for c in full["trace"]:
            if c["accepted"] >= 2:  # cut the budget one token into this block
                n = sum(len(x["emitted"]) for x in full["trace"][: full["trace"].index(c)]) + 1 + 1
                r = _gen(bb, head, ids, 3, n)
                assert r["tokens"] == full["tokens"][:n] and r["stop_reason"] == "max_new_tokens"
                hit += 1
                break
    assert hit >= 3


def test_training_raises_accept_length():
    from mtplite.model.head import MTPHead, head_config
    from mtplite.train.train import evaluate

    bb, head, rows, va, info = trained("tiny:gemma3")
    h0 = MTPHead(head_config(bb.model.c, head.c.draft_ids, K=3))
    h0.init_from_backbone(bb.model)
    untrained = evaluate(h0.eval(), bb, va, 3)
    after = evaluate(head, bb, va, 3)
    assert after > untrained + 0.5, (untrained, after)
    # and in real decoding, on prompts the head never saw
    tot = sum(G.summary(_gen(bb, head, bb.encode(p), 3, 40), 3)["accept_length"] or 1 for p in PROMPTS[:10])
    assert tot / 10 > 1.5


def test_backbone_frozen_during_training():
    from mtplite.data import training_prompts
    from mtplite.model.load import fingerprint, load_backbone
    from mtplite.train.distill import distill
    from mtplite.train.train import train_head

    bb = load_backbone("tiny:qwen3")
    before = {k: v.clone() for k, v in bb.model.state_dict().items()}
    fp = fingerprint(bb.model)
    rows = distill(bb, training_prompts(limit=32), os.path.join(os.environ["MTPLITE_CACHE"], "frozen.jsonl"),
                   max_new=16, batch=16, progress=False)
    # a budget of 0 s: the cached rows and nothing new, not "no budget"
    more = distill(bb, training_prompts(limit=48), os.path.join(os.environ["MTPLITE_CACHE"], "frozen.jsonl"),
                   max_new=16, batch=16, progress=False, budget_s=0)
    assert [r["id"] for r in more] == [r["id"] for r in rows]
    train_head(bb, rows, K=2, draft_vocab_size=64, epochs=1, batch=8, progress=False)
    after = bb.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert fingerprint(bb.model) == fp


def test_budget_spent_by_validation_does_not_evaluate_an_untrained_epoch(monkeypatch):
    # the budget runs out while epoch 0 is being validated: epoch 1 takes no step, so it must not be validated again
    # (a SmolLM2 quickstart spent 160 s re-evaluating the same head and logged it as a second epoch)
    import time

    import mtplite.train.train as tr
    from mtplite.data import training_prompts
    from mtplite.model.load import load_backbone
    from mtplite.train.distill import distill

    bb = load_backbone("tiny:llama")
    rows = distill(bb, training_prompts(limit=16), None, max_new=8, batch=16, progress=False)
    real, calls = tr.evaluate, []

    def slow_evaluate(*a, **k):
        calls.append(1)
        time.sleep(8.0)
        return real(*a, **k)

    monkeypatch.setattr(tr, "evaluate", slow_evaluate)
    # a budget with room for the first step on a loaded machine (at 3 s, a CI run sharing 2 cores took none)
    _, info = tr.train_head(bb, rows[:8], K=2, draft_vocab_size=64, epochs=3, batch=8, progress=False,
                            val_rows=rows[8:], budget_s=6.0)
    assert info["steps"] == 1 and len(calls) == 1
    assert [h["epoch"] for h in info["history"]] == [0]

def test_head_roundtrip_and_fingerprint_mismatch(tmp_path):
    from mtplite.errors import UserError
    from mtplite.model.head import load_head, save_head
    from mtplite.model.load import load_backbone

    bb, head, *_ = trained("tiny:gemma3")
    save_head(head, tmp_path, {"backbone_fingerprint": bb.fingerprint})
    h2, doc = load_head(tmp_path, bb.fingerprint)
    assert all(torch.equal(a, b) for a, b in zip(head.state_dict().values(), h2.state_dict().values()))
    other = load_backbone("tiny:qwen3")
    with pytest.raises(UserError) as e:
        load_head(tmp_path, other.fingerprint)
    assert bb.fingerprint in str(e.value) and other.fingerprint in str(e.value)


def _cli(*args, env=None):
    r = subprocess.run([sys.executable, "-m", "mtplite.cli", *args], capture_output=True, text=True,
                       env={**os.environ, **(env or {})}, timeout=300)
    return r.returncode, r.stdout, r.stderr


def _one_line_error(rc, err):
    assert rc == 2, err
    assert "Traceback" not in err
    lines = [l for l in err.splitlines() if l.startswith("mtplite: error:")]
    assert len(lines) == 1, err
    return lines[0]


def test_heads_of_retired_experiments_are_refused_by_name(tmp_path):
    """Heads saved while the retired experiments existed: with the value now built in they load unchanged; with the
    experiment itself (copy-only ids, the bigram pointer, a second block, re-matching pointers, another MLP width)
    they are refused with the reason."""
    import json

    from mtplite.errors import UserError
    from mtplite.model.head import load_head, save_head

    bb, head, *_ = trained("tiny:llama")  # a copy read, so copy_ngram matters
    save_head(head, tmp_path, {"backbone_fingerprint": bb.fingerprint})
    doc = json.loads((tmp_path / "head.json").read_text())
    assert doc["version"] == 3 and "copy_ngram" not in doc["config"] and "copy_follow" not in doc["config"]
    c = head.c
    # version 2 also held the fields that are now built in: with their built-in values a v2 head loads unchanged
    v2 = {"draft_vocab_size": c.draft_vocab_size, "intermediate_size": c.intermediate_size,
          "copy_follow": c.copy_follow, "norm_offset": False}
    # norm_offset was copied from the backbone and never read: a Gemma head saved with True loads too
    for extra in ({"copy_ngram": 3, "copy_ids": [], "num_blocks": 1}, {}, v2, {**v2, "norm_offset": True}):
        (tmp_path / "head.json").write_text(json.dumps({**doc, "version": 2, "config": {**doc["config"], **extra}}))
        again, _ = load_head(tmp_path, bb.fingerprint)
        assert again.c == c
    for extra, want in (({"copy_ngram": 3, "copy_ids": [5, 6]}, "copy-only ids"), ({"copy_ngram": 2}, "bigram"),
                        ({"copy_ngram": 3, "num_blocks": 2}, "more than one block"),
                        ({**v2, "copy_follow": 0}, "copy_follow=0"),
                        ({**v2, "intermediate_size": 3 * c.hidden_size}, "intermediate_size")):
        (tmp_path / "head.json").write_text(json.dumps({**doc, "version": 2, "config": {**doc["config"], **extra}}))
        with pytest.raises(UserError, match=want) as e:
            load_head(tmp_path, bb.fingerprint)
        assert "head.json" in str(e.value) and "retrain" in str(e.value)
    # a version-1 head.json without copy_ngram was saved before the trigram pointer existed: the bigram one
    (tmp_path / "head.json").write_text(json.dumps({**doc, "version": 1}))
    with pytest.raises(UserError, match="bigram"):
        load_head(tmp_path, bb.fingerprint)


def test_train_echo_distills_framed_continuations_into_the_same_cache(tmp_path):
    """--echo: a second distillation pass over prompts framing the first pass's continuations, cached with the rest (a
    rerun distills nothing new) and split by their own templates."""
    import json

    env = {"MTPLITE_CACHE": str(tmp_path / "cache")}
    args = ("train", "--backbone", "tiny:gemma3", "--out", str(tmp_path / "h"), "--prompt-limit", "24", "--echo", "12",
            "--max-new", "12", "--epochs", "1", "--batch", "8", "--draft-vocab", "64")
    rc, out, err = _cli(*args, env=env)
    assert rc == 0, err[-2000:]
    cache = next((tmp_path / "cache" / "distill").glob("*.jsonl"))
    ids = [json.loads(line)["id"] for line in cache.read_text().splitlines()]
    from mtplite.data import is_echo

    echo = [i for i in ids if is_echo(i)]
    assert len(ids) == 36 and len(echo) == 12 and len(set(ids)) == 36
    doc = json.loads((tmp_path / "h" / "head.json").read_text())
    assert doc["train_sequences"] + doc["val_sequences"] == 36
    # --copy-exact auto (the default): the bonus is chosen on the held-out rows after training and drafts in the head
    sweep = doc["copy_exact_sweep"]
    assert doc["config"]["copy_exact"] == sweep["chosen"] and sweep["held_out_rows"] == doc["val_sequences"]
    from mtplite.train.train import held_out_rows
    from mtplite.data.splits import split_of

    assert len(held_out_rows(cache, **split_of(doc))) == doc["val_sequences"] > 0  # the split training made
    rc, out, err = _cli(*args, env=env)
    assert rc == 0 and len(cache.read_text().splitlines()) == 36, err[-2000:]
    # --all-cached: a run asking for 8 prompts trains on all 36 cached rows, split by the same templates; here it
    # also fine-tunes the head
    rc, out, err = _cli(*args[:5], "--prompt-limit", "8", *args[9:], "--all-cached", "--init-head", str(tmp_path / "h"),
                        env=env)
    assert rc == 0 and len(cache.read_text().splitlines()) == 36, err[-2000:]
    doc2 = json.loads((tmp_path / "h" / "head.json").read_text())
    assert doc2["all_cached"] and doc2["train_sequences"] + doc2["val_sequences"] == 36
    # lab/probes/tune_copy_exact.py scores bonuses on that head's held-out rows and writes the head with the best
    root = Path(__file__).resolve().parents[1] / "lab"
    r = subprocess.run([sys.executable, str(root / "probes" / "tune_copy_exact.py"), "--backbone", "tiny:gemma3", "--head",
                        str(tmp_path / "h"), "--data", str(cache), "--out", str(tmp_path / "hx"), "--values", "0,3,9"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, **env})
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    tau = {float(k): v for k, v in res["tau"].items()}
    assert res["held_out_rows"] == doc2["val_sequences"] and sorted(tau) == [0, 3, 9]
    assert res["chosen"] == min(v for v in tau if tau[v] >= max(tau.values()) - 0.002)
    doc3 = json.loads((tmp_path / "hx" / "head.json").read_text())
    assert doc3["config"]["copy_exact"] == res["chosen"] and doc3["val_templates"] == doc2["val_templates"]
    assert doc2["val_templates"] == doc["val_templates"]


def test_export_refuses_a_one_head_copy_read_in_one_line(tmp_path):
    """A head.json with copy_heads 1 (the converter cannot lower its drafter graph) is a one-line error from
    export, before any conversion, naming the file and the fix."""
    from mtplite.model.head import MTPHead, head_config, save_head
    from mtplite.model.load import load_backbone

    bb = load_backbone("tiny:llama")
    head = MTPHead(head_config(bb.model.c, list(range(3, 64)), K=2, copy_heads=1))
    save_head(head, tmp_path / "h", {"backbone_fingerprint": bb.fingerprint})
    msg = _one_line_error(*_cli("export", "--backbone", "tiny:llama", "--head", str(tmp_path / "h"), "--out",
                                str(tmp_path / "out"))[::2])
    assert "head.json: copy_heads 1" in msg and "use 2" in msg, msg
    assert not (tmp_path / "out").exists()


def test_cli_bad_inputs(tmp_path):
    bb, head, *_ = trained("tiny:gemma3")
    from mtplite.model.head import save_head

    hd = tmp_path / "head"
    save_head(head, hd, {"backbone_fingerprint": bb.fingerprint})
    msg = _one_line_error(*_cli("generate", "--backbone", "nope:xyz", "--prompt", "hi")[::2])
    assert "unknown backbone" in msg
    empty = tmp_path / "ckpt"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    msg = _one_line_error(*_cli("generate", "--backbone", str(empty), "--prompt", "hi")[::2])
    assert str(empty) in msg
    msg = _one_line_error(*_cli("generate", "--backbone", "tiny:gemma3", "--head", str(hd), "--prompt", "")[::2])
    assert "empty" in msg
    msg = _one_line_error(*_cli("train", "--backbone", "tiny:gemma3", "--out", str(tmp_path / "x"), "--k", "0")[::2])
    assert "--k" in msg
    msg = _one_line_error(*_cli("train", "--backbone", "tiny:gemma3", "--out", str(tmp_path / "x"), "--echo", "-1")[::2])
    assert "--echo -1" in msg
    save_head(head, tmp_path / "head2", {"backbone_fingerprint": bb.fingerprint})
    msg = _one_line_error(*_cli("train", "--backbone", "tiny:gemma3", "--out", str(tmp_path / "x"), "--copy-exact", "2",
                                "--init-head", str(tmp_path / "head2"))[::2])
    assert "--copy-exact 2" in msg and "no copy read" in msg  # tiny:gemma3's head has none
    msg = _one_line_error(*_cli("train", "--backbone", "tiny:gemma3", "--out", str(tmp_path / "x"), "--device", "tpu")[::2])
    assert "--device tpu" in msg
    msg = _one_line_error(*_cli("train", "--backbone", "tiny:gemma3", "--out", str(tmp_path / "x"),
                                "--read-layers", "1,99")[::2])
    assert "--read-layers 1,99" in msg
    msg = _one_line_error(*_cli("train", "--backbone", "tiny:gemma3", "--out", str(tmp_path / "x"),
                                "--copy-heads", "9")[::2])
    assert "--copy-heads 9" in msg
    msg = _one_line_error(*_cli("train", "--backbone", "tiny:gemma3", "--out", str(tmp_path / "x"),
                                "--copy-heads", "1")[::2])
    assert "--copy-heads 1" in msg and "does not convert" in msg
    for bad, want in ((["--copy-exact", "lots"], "--copy-exact lots"), (["--copy-exact", "99"], "0-64 nats"),
                      (["--copy-exact", "2", "--copy-heads", "0"], "--copy-heads 2")):
        msg = _one_line_error(*_cli("train", "--backbone", "tiny:gemma3", "--out", str(tmp_path / "x"), *bad)[::2])
        assert want in msg, msg
    if not torch.cuda.is_available():
        msg = _one_line_error(*_cli("train", "--backbone", "tiny:gemma3", "--out", str(tmp_path / "x"),
                                    "--device", "cuda")[::2])
        assert "no CUDA" in msg
    (hd / "head.safetensors").write_bytes((hd / "head.safetensors").read_bytes()[:100])
    msg = _one_line_error(*_cli("generate", "--backbone", "tiny:gemma3", "--head", str(hd), "--prompt", "hi")[::2])
    assert "head.safetensors" in msg
    msg = _one_line_error(*_cli("generate", "--backbone", "tiny:gemma3", "--head", str(tmp_path / "nohead"),
                                "--prompt", "hi")[::2])
    assert "head.json" in msg


def test_scripts_bad_inputs(tmp_path):
    """The measurement scripts end like the CLI: a wrong path or spec is one line naming it, exit 2, no traceback."""
    root = Path(__file__).resolve().parents[1] / "lab"
    for args, needle in ((["copy_probe.py", "--backbone", "nope:xyz", "--head", str(tmp_path), "--data", "x"],
                          "unknown backbone"),
                         (["bench_hybrid_rule.py", str(tmp_path / "nobundle")], "manifest.json"),
                         (["same_cycles.py", str(tmp_path / "nobundle")], "manifest.json"),
                         (["draft_cost.py", str(tmp_path / "nobundle")], "manifest.json"),
                         (["draft_table.py", str(tmp_path / "nobundle")], "manifest.json"),
                         (["draft_table.py", "--replay", __file__], "cannot read a draft table"),
                         (["draft_table.py", "--replay", str(tmp_path / "none.json")], "cannot read a draft table"),
                         (["bench_distill.py", "--batches", "64,0"], "--batches"),
                         (["drill_ablation.py", "--data", "x", "--drills", "0"], "--drills 0"),
                         (["generalization_gap.py", "--backbone", "tiny:gemma3", "--head", str(tmp_path), "--data",
                           str(tmp_path / "none.jsonl")], "no such distillation cache"),
                         (["tune_copy_exact.py", "--backbone", "tiny:llama", "--head", str(tmp_path), "--data", __file__,
                           "--out", str(tmp_path / "o"), "--values", "0,x"], "--values 0,x"),
                         (["tune_copy_exact.py", "--backbone", "tiny:llama", "--head", str(tmp_path), "--data", __file__,
                           "--out", str(tmp_path / "o"), "--values", "0,99"], "0-64 nats"),
                         (["tune_copy_exact.py", "--backbone", "tiny:llama", "--head", str(tmp_path), "--data",
                           str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "o")], "no such distillation cache"),
                         (["vocab_coverage.py", "--backbone", "tiny:gemma3", "--data", str(tmp_path / "none.jsonl")],
                          "no such distillation cache"),
                         (["vocab_coverage.py", "--backbone", "tiny:gemma3", "--data", __file__, "--sizes", "0,a"],
                          "--sizes 0,a")):
        path = root / "scripts" / args[0] if (root / "scripts" / args[0]).exists() else root / "probes" / args[0]
        r = subprocess.run([sys.executable, str(path), *args[1:]], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.strip().splitlines()[-1].startswith(f"{args[0]}: error:") and needle in r.stderr, r.stderr


def test_cli_generate_json(tmp_path):
    bb, head, *_ = trained("tiny:gemma3")
    from mtplite.model.head import save_head

    save_head(head, tmp_path, {"backbone_fingerprint": bb.fingerprint})
    rc, out, err = _cli("generate", "--backbone", "tiny:gemma3", "--head", str(tmp_path), "--prompt", "Hello world",
                        "--max-new-tokens", "12", "--json")
    assert rc == 0, err
    doc = json.loads(out.strip().splitlines()[-1])
    for k in ("text", "tokens", "accept_length", "drafted", "accepted", "cycles"):
        assert k in doc
    assert len(doc["tokens"]) <= 12
    rc, out2, _ = _cli("generate", "--backbone", "tiny:gemma3", "--no-mtp", "--prompt", "Hello world",
                       "--max-new-tokens", "12", "--json")
    assert json.loads(out2.strip().splitlines()[-1])["tokens"] == doc["tokens"]
    # who drafts changes the speed, never the text; hybrid says which drafter served its cycles
    rep = "one two three one two three one two"
    docs = {}
    for draft in ("mtp", "hybrid", "lookup"):
        rc, o, err = _cli("generate", "--backbone", "tiny:gemma3", "--head", str(tmp_path), "--prompt", rep,
                          "--max-new-tokens", "24", "--json", "--draft", draft)
        assert rc == 0, err
        docs[draft] = json.loads(o.strip().splitlines()[-1])
        assert docs[draft]["draft"] == draft
    assert docs["mtp"]["tokens"] == docs["hybrid"]["tokens"] == docs["lookup"]["tokens"]
    src = docs["hybrid"].get("accepted_by_source", {})
    assert sum(v["cycles"] for v in src.values()) == docs["hybrid"]["cycles"] and "lookup" in src


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_train_on_cuda_matches_cpu():
    """Distill + train under `with device:` on CUDA gives the CPU head within float tolerance."""
    from mtplite.data import training_prompts
    from mtplite.model.load import load_backbone
    from mtplite.paths import cache_dir
    from mtplite.train.distill import distill
    from mtplite.train.train import pick_device, train_head

    heads, rows = [], {}
    for name in ("cpu", "cuda"):
        bb = load_backbone("tiny:qwen3")
        dev = pick_device(name)
        bb.model.to(dev)
        with dev:
            rows[name] = distill(bb, training_prompts(limit=32), cache_dir() / f"cuda-check-{name}.jsonl", max_new=16,
                                 batch=16, progress=False)
            # both devices train on the CPU rows: near-tie argmaxes may differ between kernels
            head, _ = train_head(bb, rows["cpu"], K=2, draft_vocab_size=64, epochs=1, batch=8, progress=False,
                                 log=lambda s: None)
        heads.append({k: v.cpu() for k, v in head.state_dict().items()})
    same = sum(a["tokens"] == b["tokens"] for a, b in zip(rows["cpu"], rows["cuda"]))
    assert same >= 0.9 * len(rows["cpu"])
    assert max(float((heads[0][k] - heads[1][k]).abs().max()) for k in heads[0]) < 1e-3


def test_runtime_encode_uses_the_manifest_chat_template():
    """Instruction-tuned backbones are distilled through their chat template; the runtime must encode prompts the
    same way (export records the template in the manifest), and a broken template is a one-line error."""
    from mtplite.errors import UserError
    from mtplite.model.load import tiny_tokenizer
    from mtplite.runtime.litert import encode

    tok = tiny_tokenizer()
    raw = encode(tok, {"bos_id": 1}, "hello there")
    assert raw[0] == 1 and raw[1:] == list(tok("hello there", add_special_tokens=False)["input_ids"])
    man = {"bos_id": 1, "chat_template": "{{ bos_token }}U: {{ messages[0]['content'] }}\nA:"}
    ids = encode(tok, man, "hello there")
    # BOS once, prepended (the template's bos_token renders empty), as the official engine places it
    assert ids == [1] + list(tok("U: hello there\nA:", add_special_tokens=False)["input_ids"]) and ids != raw
    # no bos_id: the template places the manifest's bos_token itself
    ids = encode(tok, {**man, "bos_id": None, "bos_token": "<bos>"}, "hello there")
    assert ids == [1] + list(tok("U: hello there\nA:", add_special_tokens=False)["input_ids"])
    # a message list renders the same as the string it holds
    assert encode(tok, man, [{"role": "user", "content": "hello there"}]) == encode(tok, man, "hello there")
    with pytest.raises(UserError):
        encode(tok, {"chat_template": "{{ raise_exception('no') }}"}, "x")


def test_chat_turn_is_the_template_around_one_message():
    """manifest chat_turn (for apps without Jinja: the Android demo's screen): BOS + before + message + after are the
    ids format_prompt gives a one-message prompt; a base model has none."""
    from types import SimpleNamespace

    from mtplite.model.load import chat_turn, format_prompt, tiny_tokenizer

    tok = tiny_tokenizer()
    # as chat templates do (SmolLM2, Gemma 3), a newline before the message: the split then tokenizes as the whole
    tok.chat_template = "{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>\n{{ m['content'] }}\n{% endfor %}" \
                        "{% if add_generation_prompt %}<assistant>{% endif %}"
    bb = SimpleNamespace(chat=True, tokenizer=tok, bos_id=1)
    turn = chat_turn(bb)
    msg = list(tok("hello there", add_special_tokens=False)["input_ids"])
    assert [1] + turn["before_ids"] + msg + turn["after_ids"] == format_prompt(bb, "hello there")
    assert turn["before_ids"] and turn["after_ids"]
    assert chat_turn(SimpleNamespace(chat=False)) is None


def test_benchmarks_page_is_rendered_from_the_committed_json():
    """BENCHMARKS.md is exactly what scripts/benchmarks.py renders from the current runs in results/, and the lab's
    experiments page what lab/results_page.py renders from lab/results/gemma3-270m (machine lines aside)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    page = script("benchmarks").render(root / "results")
    assert page == (root / "BENCHMARKS.md").read_text()
    assert {f"## {f.stem}" for f in (root / "results").glob("*.json")} <= set(page.splitlines())
    out = Path(os.environ["MTPLITE_CACHE"]) / "EXPERIMENTS.md"
    script("results_page").main([str(root / "lab" / "results" / "gemma3-270m"), "--out", str(out), "--auto"])
    machine = lambda text: [l for l in text.splitlines() if not l.startswith(("- CPU:", "- Python"))]
    assert machine(out.read_text()) == machine((root / "lab" / "EXPERIMENTS.md").read_text())


def test_quickstart_closing_names_every_mode_and_the_calibrated_default():
    """A small quickstart head lost to prompt lookup and calibrate chose lookup: the closing lines must show lookup's
    speedup and what `mtplite generate` will use, not the MTP number alone."""
    from pathlib import Path

    from mtplite.quickstart import closing

    res = {"ratios": {"mtp/plain": {"all": 1.18}, "hybrid+gate/plain": {"all": 1.72}, "hybrid/plain": {"all": 1.6},
                      "lookup/plain": {"all": 1.83}},
           "table": {"mtp": {"all": {"accept_length": 2.46}}, "plain": {"all": {"decode_tokens_per_s": 40.0}}},
           "memory": {"drafter_bytes": 15e6}}
    text = closing(res, {"draft": "lookup", "reason": "predicted 1.52x with prompt lookup alone"}, 2, Path("b"), Path("r"))
    assert text.splitlines()[0].strip().startswith("verdict: best lookup 1.83x plain; head alone (mtp) 1.18x")
    assert "MTP head 1.18x (accept length 2.46)" in text and "hybrid (lookup + head) 1.72x" in text
    assert "prompt lookup alone 1.83x" in text and "drafts with lookup by default" in text and "1.52x" in text
    assert "by default" not in closing(res, {}, 2, Path("b"), Path("r"))
    off = closing(res, {"K": 3, "draft": "off", "reason": "predicted 0.56x at K=3"}, 2, Path("b"), Path("r"))
    assert "decodes plainly by default" in off and "drafts with" not in off
    # a bundle with the K-step drafter: the head's line is the mode generate runs (mtp+ctx), not the per-step drafter
    res["ratios"].update({"mtp+ctx/plain": {"all": 1.77}, "hybrid+ctx+gate/plain": {"all": 1.88}})
    res["table"]["mtp+ctx"] = {"all": {"accept_length": 2.82}}
    text = closing(res, {}, 2, Path("b"), Path("r"))
    assert "MTP head 1.77x (accept length 2.82)" in text and "hybrid (lookup + head) 1.88x" in text


def test_torch_exact_mode_in_bf16():
    """bf16 batched verify rows round differently from single-token decode; exact mode (plain steps as row 0 of a
    K+1-row pass) must give speculative output == plain output on every prompt."""
    import copy

    bb0, head0, *_ = trained("tiny:llama")
    bb, head = copy.deepcopy(bb0), copy.deepcopy(head0)  # the cached float32 models stay untouched
    bb.model.to(torch.bfloat16)
    head.to(torch.bfloat16)
    cycles = 0
    for p in PROMPTS[:12]:
        ids = bb.encode(p)
        for exact in (True, None):  # forced, and the default: the probe must see that bf16 rows differ
            runs = [G.run(ids, G.torch_steps(bb, head, CACHE, dtype=torch.bfloat16, exact=exact), max_new_tokens=30,
                          eos_ids=set(bb.eos_ids), K=K, cache_len=CACHE) for K in (0, 3)]
            assert runs[0]["tokens"] == runs[1]["tokens"], (p, exact)
            cycles += runs[1]["cycles"]
    assert cycles > 0


def test_held_out_split_covers_every_task():
    # the older hash split held out no reply or rewrite template of the shipped corpus: early stopping and the
    # held-out τ never saw those tasks. By task, every task with 2+ templates has one held out, none on both sides.
    from collections import defaultdict

    from mtplite.data import training_prompts
    from mtplite.data.splits import split_of, split_rows

    rows = training_prompts()
    tr, va = split_rows(rows)
    templates = defaultdict(set)
    for r in rows:
        templates[r["task"]].add(r["template"])
    held = {r["template"] for r in va}
    assert {r["template"] for r in tr}.isdisjoint(held) and len(tr) + len(va) == len(rows)
    for task, ts in templates.items():
        assert 1 <= len(ts & held) < len(ts), task
    assert 0.05 < len(va) / len(rows) < 0.2
    # heads saved before the change keep the split they were validated on
    assert split_rows(rows, **split_of({}))[1] == split_rows(rows, by_task=False)[1]
    assert split_of({"split": "by-task"}) == {"by_task": True, "held": None}
    # a head that records its held-out templates keeps them whatever else a later cache holds
    from mtplite.data import echo_prompts

    more = rows + echo_prompts(["A sentence of content that is long enough to frame."], 300)
    held = sorted({r["template"] for r in va})[:3]
    assert {r["template"] for r in split_rows(more, **split_of({"val_templates": held}))[1]} == set(held)


def test_training_prompts_share_no_framing_with_the_benchmark_prompts():
    """Evaluating on templates seen in training flatters the head (issue #9): no training prompt may open with the same
    two words or end on the same last line as a benchmark prompt. Fails on the retired framings if they come back."""
    import json

    from mtplite.data import RETIRED, training_prompts
    from mtplite.data.benchmark import default_prompts

    bench = [json.loads(line)["prompt"] for line in open(default_prompts())]

    def opening(p):
        return " ".join(p.split()[:2])

    def last_line(p):
        return p.rstrip(" \n").splitlines()[-1].strip() if "\n" in p.strip() else None

    openings = {opening(p) for p in bench}
    endings = {last_line(p) for p in bench} - {None}
    rows = training_prompts()
    assert len(rows) > 9000 and len({r["id"] for r in rows}) == len(rows)
    clash = [r["prompt"] for r in rows if opening(r["prompt"]) in openings or last_line(r["prompt"]) in endings]
    assert not clash, clash[:3]
    assert not any(r["template"] in RETIRED for r in rows)
    # copy drills only teach copying if their specifics really differ from prompt to prompt
    drills = [r["prompt"] for r in rows if "-d" in r["template"]]
    assert len(drills) >= 3000 and len(set(drills)) == len(drills)
    # rows cached before `template` was recorded get it from their id; held-out splits depend on it being right
    from mtplite.data.splits import template_of

    assert all(template_of(r["id"]) == r["template"] for r in rows)
    # echo prompts frame any content; the benchmark prompts' own sentences are the hardest content to frame apart
    from mtplite.data import echo_prompts, echo_texts

    content = echo_texts([p.split(": ", 1)[-1].strip('"') for p in bench] + [r["prompt"] for r in rows[:400]])
    echo = echo_prompts(content, 3000, seed=1)
    assert len(echo) == 3000 and len({r["id"] for r in echo}) == 3000 and len({r["template"] for r in echo}) > 40
    clash = [r["prompt"] for r in echo if opening(r["prompt"]) in openings or last_line(r["prompt"]) in endings]
    assert not clash, clash[:3]
    assert all(template_of(r["id"]) == r["template"] for r in echo)
    assert echo_prompts(content, 50, seed=1) == echo[:50]  # deterministic: a cached id names one prompt
    assert echo_texts(["def f(x):\n    return x == 1", "ok", "Fine. " + "word " * 80]) == []
    # requests for real programs: none opens or ends like a benchmark prompt, none asks for a benchmark code task
    from mtplite.data import program_prompts

    progs = program_prompts()
    assert len(progs) >= 1000 and len({r["id"] for r in progs}) == len(progs)
    assert not ({r["id"] for r in progs} & {r["id"] for r in rows})
    clash = [r["prompt"] for r in progs if opening(r["prompt"]) in openings or last_line(r["prompt"]) in endings
             or any(w in r["prompt"].lower() for w in ("prime", "reverse the order", "csv", '"""'))]
    assert not clash, clash[:3]
    assert all(template_of(r["id"]) == r["template"] and r["task"] == "code" for r in progs)
    assert program_prompts()[:20] == progs[:20]  # deterministic: the corpus names the same prompts each run


def test_bf16_feature_cache_is_lossless():
    """Training keeps epoch-0 features in the backbone's dtype to fit ~1M tokens in memory; that must not change
    what later epochs train on."""
    from mtplite.model.load import load_backbone
    from mtplite.train.train import features, pack, unpack

    bb = load_backbone("tiny:gemma3")
    bb.model.to(torch.bfloat16)
    rows = [{"tokens": [5, 9, 17, 3, 44, 8], "prompt_len": 3}, {"tokens": [7, 2, 30, 31], "prompt_len": 2}]
    f = features(bb, rows, [0, 1], torch.bfloat16)
    g = unpack(pack(f, torch.bfloat16))
    assert g["act"].dtype == torch.float32 and pack(f, torch.bfloat16)["act"].dtype == torch.bfloat16
    for k in ("act", "emb", "labels", "tokens", "ok"):
        assert torch.equal(f[k], g[k]), k
    assert all(torch.equal(a, c) and torch.equal(b, d) for (a, b), (c, d) in zip(f["kv"], g["kv"]))


def test_default_read_layers():
    """Gemma 3 270M's layout (global every 6th of 18) -> its last global layer + the last sliding one; a 30-layer
    full-attention backbone (SmolLM2) -> its last layer; never more than 2 layers, never out of range."""
    from types import SimpleNamespace

    from mtplite.model.head import default_read_layers

    gemma = SimpleNamespace(num_layers=18, sliding_window=[0 if i % 6 == 5 else 512 for i in range(18)])
    assert default_read_layers(gemma) == [16, 17]
    assert default_read_layers(SimpleNamespace(num_layers=30, sliding_window=[0] * 30)) == [29]
    for n in range(1, 40):
        for sw in ([0] * n, [0 if i % 2 else 4096 for i in range(n)], [4096] * (n - 1) + [0]):
            got = default_read_layers(SimpleNamespace(num_layers=n, sliding_window=sw))
            assert 1 <= len(got) <= 2 and got == sorted(set(got)) and all(0 <= i < n for i in got) and n - 1 in got


def test_hybrid_copies_matches_of_its_minimum_length_and_drafts_with_the_head_otherwise():
    from mtplite.runtime.lookup import lookup, lookup_steps
    from mtplite.export.contract import HYBRID_MIN_NGRAM

    assert lookup([7, 5, 7], 3) == [5, 7, 7] and lookup([7, 5, 7], 3, min_ngram=2) is None
    assert lookup([1, 2, 3, 4, 5, 9, 2, 3], 2, min_ngram=2) == [4, 5]
    assert HYBRID_MIN_NGRAM == 1  # measured by lab/probes/bench_hybrid_rule.py; the Kotlin core has the same constant
    head = lambda tok, act, pos, k: [0] * k
    for hist, want in (([7, 5, 7], ("lookup", [5, 7, 7])), ([7, 5, 8], ("head", [0, 0, 0])),
                       ([1, 2, 3, 9, 2, 3], ("lookup", [9, 2, 3]))):
        (_, _, _, draft), src = lookup_steps((None, None, None, head), hist, mode="hybrid")
        assert draft(hist[-1], None, len(hist), 3) == want[1] and src == [want[0]]
    (_, _, _, draft), src = lookup_steps((None, None, None, head), [7, 5, 8], mode="lookup")
    assert draft(8, None, 3, 3) is None and src == []
    # a measured choice (settings.hybrid_min_ngram) leaves shorter matches to the head; lookup alone ignores it
    for n, hist, want in ((2, [7, 5, 7], "head"), (3, [1, 2, 3, 9, 2, 3], "head"), (3, [1, 2, 3, 9, 1, 2, 3], "lookup")):
        (_, _, _, draft), src = lookup_steps((None, None, None, head), hist, mode="hybrid", min_ngram=n)
        draft(hist[-1], None, len(hist), 3)
        assert src == [want], (n, hist)
    (_, _, _, draft), src = lookup_steps((None, None, None, head), [7, 5, 7], mode="lookup", min_ngram=3)
    assert draft(7, None, 3, 3) == [5, 7, 7]


def test_predict_hybrid_charges_the_drafting_time_measured_in_the_loop():
    from mtplite.runtime.calibrate import predict_hybrid

    # 96 tokens in 32 cycles: copied by lookup they cost verifies only; drafted by the head, 3 drafter steps each
    lookup_only = {"tokens": 97, "plain": 1, "cycles": 32, "draft_s": 0.0}
    head_only = {**lookup_only, "draft_s": 32 * 3 * 0.1}
    assert predict_hybrid(lookup_only, 1.0, 1.2) == pytest.approx(97 / (1 + 32 * 1.2))
    assert predict_hybrid(head_only, 1.0, 1.2) == pytest.approx(97 / (1 + 32 * 1.5))
    # the head's drafting pays where it gets enough more accepted: 97 -> 120 tokens in the same cycles does not
    # cover 0.3 per cycle, 97 -> 130 does
    assert predict_hybrid({**head_only, "tokens": 120}, 1.0, 1.2) < predict_hybrid(lookup_only, 1.0, 1.2)
    assert predict_hybrid({**head_only, "tokens": 130}, 1.0, 1.2) > predict_hybrid(lookup_only, 1.0, 1.2)


def test_draft_table_splits_positions_by_lookups_match():
    """draft_table.by_match: each position goes to the class of lookup's longest match (a 3-token match whose earlier
    occurrences continue differently is "3*"), and both drafters' accepted counts are scored against the stream."""
    dt = script("draft_table")
    assert dt.match_class([5, 6], 3) == "none" and dt.match_class([1, 2, 3, 1], 3) == "1"
    assert dt.match_class([1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3], 3) == "3"  # both earlier matches continue with 4
    # 1 2 3 is followed by 4 once and 5 once: lookup's latest copy and the older one part
    stream = [7, 1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 3, 4]
    heads = {10: ([2, 3, 4], [1.0] * 3), 11: ([3, 4, 0], [1.0] * 3), 12: ([4, 1, 2], [1.0] * 3)}
    bm = dt.by_match([{"task": "t", "P": 9, "max_new": 4, "stream": stream, "heads": heads}], 3)["t"]
    # i=10: 1-token match, lookup copies 2 3 5 (2 right), head 2 3 4 (3); i=11: 2-token, lookup 3 5 1 (1), head 2
    # (the stream ends); i=12: "3*", lookup's latest copy 5 1 2 (0), head 4 (1)
    assert {c: (v["positions"], v["head"], v["lookup"]) for c, v in bm.items()} == {
        "none": (0, 0, 0), "1": (1, 3, 2), "2": (1, 2, 1), "3": (0, 0, 0), "3*": (1, 1, 0)}


def test_export_refuses_a_backbone_whose_weights_drifted(tmp_path):
    """A bf16 round trip (fast distillation) changes the weights: export must refuse rather than ship them under the
    loaded backbone's fingerprint. quickstart distils on a bf16 copy, so its export sees the loaded weights."""
    from mtplite.errors import UserError
    from mtplite.export.export import export
    from mtplite.model.load import load_backbone

    _, head, *_ = trained("tiny:gemma3")
    bb = load_backbone("tiny:gemma3")
    bb.model.to(torch.bfloat16).float()
    with pytest.raises(UserError, match="not the loaded ones"):
        export(bb, head, {}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_dtype_auto_takes_bf16_only_where_it_is_measured_faster(monkeypatch):
    """quickstart once chose bf16 by vocabulary size alone; on an AVX2-only CPU that made distillation ~5x slower."""
    import types

    import mtplite.train.train as T
    from mtplite.errors import UserError

    cpu = torch.device("cpu")
    big = types.SimpleNamespace(model=types.SimpleNamespace(c=types.SimpleNamespace(vocab_size=49_152)))
    small = types.SimpleNamespace(model=types.SimpleNamespace(c=types.SimpleNamespace(vocab_size=512)))
    for x, want in ((0.02, torch.float32), (1.1, torch.float32), (2.5, torch.bfloat16)):
        monkeypatch.setattr(T, "bf16_speedup", lambda dev, x=x: x)
        assert T.pick_dtype("auto", big, cpu, log=lambda s: None) == want
        assert T.pick_dtype("auto", small, cpu, log=lambda s: None) == torch.float32  # tiny models: no gain
        assert T.pick_dtype("float32", big, cpu, log=lambda s: None) == torch.float32
    said = []
    monkeypatch.setattr(T, "bf16_speedup", lambda dev: 0.02)
    assert T.pick_dtype("bfloat16", big, cpu, log=said.append) == torch.bfloat16  # forced, but the user is told
    assert said and "slower" in said[0]
    with pytest.raises(UserError):
        T.pick_dtype("fp8", big, cpu)
    assert T.bf16_speedup(cpu) > 0  # the probe itself runs


@pytest.mark.parametrize("spec", FAMILIES)
def test_fast_decode_gives_the_same_distilled_tokens(spec):
    """Distillation writes its KV cache in place and packs the LM head; tokens must equal the export graph's path."""
    from mtplite.model.decoder import fast_decode, write_cache, write_cache_inplace
    from mtplite.model.load import load_backbone
    from mtplite.train import distill as D

    kc, vc = torch.randn(2, 1, 8, 4), torch.randn(2, 1, 4, 8)
    k, v = torch.randn(2, 1, 3, 4), torch.randn(2, 1, 3, 4)
    for p0 in (0, 3, 6):  # 6: the last row falls past the cache end and is dropped
        a = write_cache(kc, vc, k, v, torch.tensor([p0], dtype=torch.int32))
        b = write_cache_inplace(kc.clone(), vc.clone(), k, v, torch.tensor([p0], dtype=torch.int32))
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    bb = load_backbone(spec)
    seqs = [bb.encode(p) for p in PROMPTS[:6]]  # different lengths: left padding in play
    with fast_decode(bb.model):
        fast = D.greedy_batch(bb.model, seqs, 12, set(bb.eos_ids))
    assert fast == D.greedy_batch(bb.model, seqs, 12, set(bb.eos_ids))
    # left on, export would lower slice assignment and a oneDNN buffer
    assert not any(b.inplace_cache for b in bb.model.layers) and isinstance(bb.model.lm_head, torch.nn.Linear)


@pytest.mark.parametrize("spec", FAMILIES)
def test_copy_read_table_is_layer0_v_cache(spec):
    """The copy read's token rows are exactly what layer 0 writes into its V cache for each token, so a pointer at a
    cached position names the token that is there."""
    from mtplite.model.head import MTPHead, head_config, unit_rms
    from mtplite.model.load import load_backbone
    from mtplite.train.train import features

    bb = load_backbone(spec)
    c = bb.model.c
    head = MTPHead(head_config(c, list(range(c.vocab_size)), K=3, copy_heads=2))
    head.init_from_backbone(bb.model)
    assert head.kv_layers[-1] == 0 and head.v_only_layers == [0]
    rows = [{"tokens": bb.encode(p), "prompt_len": 1} for p in PROMPTS[:4]]
    f = features(bb, rows, head.kv_layers, v_only=head.v_only_layers)
    assert f["kv"][-1][0] is None  # the copy read's K is never kept
    v0 = f["kv"][-1][1]
    E = unit_rms(v0.permute(0, 3, 1, 2).reshape(v0.shape[0], v0.shape[-1], -1))
    ok = f["ok"]
    assert (E[ok] - head.copy.token_rows[f["tokens"][ok]]).abs().max() < 1e-4
    # the table tells tokens apart: each row is nearest to itself
    sim = head.copy.token_rows @ head.copy.token_rows.t()
    assert (sim.argmax(-1) == torch.arange(c.vocab_size)).float().mean() > 0.99


@pytest.mark.parametrize("spec", FAMILIES)
def test_trigram_pointer_starts_as_prompt_lookup(spec):
    """Freshly initialised, the trigram pointer (copy_ngram 3) already drafts what prompt lookup's trigram match
    drafts: the current token's query is its own row, the previous two are the rows cached at pos-1 and pos-2, and
    recency picks the latest of equal matches. Whatever the stream x holds: only the gates read it."""
    from mtplite.model.decoder import causal_mask
    from mtplite.model.head import MTPHead, head_config
    from mtplite.model.load import load_backbone
    from mtplite.runtime.lookup import lookup
    from mtplite.train.train import features

    bb = load_backbone(spec)
    c = bb.model.c
    ids = list(range(c.vocab_size))[::-1]  # draft index != token id, so a missed scatter shows
    head = MTPHead(head_config(c, ids, K=3, copy_heads=2, read_layers=[0]))
    head.init_from_backbone(bb.model)
    assert head.kv_layers == [0] and head.v_only_layers == []  # layer 0 read once, for both uses
    g = torch.Generator().manual_seed(0)
    n = agree = 0
    for _ in range(12):
        a = torch.randint(3, c.vocab_size, (10,), generator=g).tolist()
        b = torch.randint(3, c.vocab_size, (10,), generator=g).tolist()
        seq = a + b + a[:4] + b[:3] + a[4:7]  # matches of 1-3 tokens, some repeated with different successors
        f = features(bb, [{"tokens": seq, "prompt_len": 1}], head.kv_layers)
        v0 = f["kv"][0][1]
        for P in range(3, len(seq)):
            want = lookup(seq[: P + 1], 1, min_ngram=3)
            if want is None:
                continue
            pos = torch.tensor([P], dtype=torch.int32)
            with torch.no_grad():
                prep = head.copy.prepare(causal_mask(pos - 1, len(seq)), v0, pos)
                _, ptr, _ = head.copy(torch.randn(1, 1, c.hidden_size, generator=g), f["emb"][:, P : P + 1],
                                      *first_step(head), prep)
            n += 1
            agree += ids[int(ptr[0, 0].argmax())] == want[0]
    assert n >= 20 and agree == n, (agree, n)


def first_step(head):
    """The copy read's (draft step - 1, last read code) at a cycle's first draft step: step 0, no read yet."""
    return torch.zeros(1, 1, 1), torch.zeros(1, 1, 2 * head.c.copy_follow)


def test_copy_exact_raises_the_token_read_exactly_and_nothing_far_from_it():
    """copy_exact: a read that matches one cached position exactly (a unique trigram match, fresh pointer) gains the
    full bonus on the token it reads; rows far from the read (cosine <= 0.9) gain nothing; 0 changes nothing."""
    from mtplite.model.decoder import causal_mask
    from mtplite.model.head import MTPHead, head_config, with_copy_exact
    from mtplite.model.load import load_backbone
    from mtplite.runtime.lookup import lookup
    from mtplite.train.train import features

    bb = load_backbone("tiny:llama")
    c = bb.model.c
    ids = list(range(c.vocab_size))[::-1]
    head = MTPHead(head_config(c, ids, K=3, copy_heads=2, read_layers=[0]))
    head.init_from_backbone(bb.model)
    sharp = with_copy_exact(head, 4.0)
    g = torch.Generator().manual_seed(0)
    n = 0
    for _ in range(8):
        a = torch.randint(3, c.vocab_size, (10,), generator=g).tolist()
        seq = a + a[:4]
        f = features(bb, [{"tokens": seq, "prompt_len": 1}], head.kv_layers)
        for P in range(12, len(seq)):
            want = lookup(seq[: P + 1], 1, min_ngram=3)
            if want is None:
                continue
            pos = torch.tensor([P], dtype=torch.int32)
            x = torch.randn(1, 1, c.hidden_size, generator=g)
            args = (x, f["emb"][:, P : P + 1], *first_step(head), head.copy.prepare(causal_mask(pos - 1, len(seq)),
                                                                                      f["kv"][0][1], pos))
            with torch.no_grad():
                base, up = head.copy(*args)[1][0, 0], sharp.copy(*args)[1][0, 0]
            d = up - base
            j = ids.index(want[0])
            assert 3.6 < float(d[j]) <= 4.0 + 1e-4 and int(up.argmax()) == j, float(d[j])
            rows = head.copy.token_rows
            cos = torch.nn.functional.cosine_similarity(rows, rows[j][None], dim=-1)
            assert float(d[cos < 0.8].abs().max()) == 0.0 and float(d.min()) >= 0.0
            n += 1
    assert n >= 8


def test_copy_exact_auto_picks_the_best_bonus_on_the_held_out_rows(monkeypatch):
    """evaluate_each (the sweep's one backbone pass per batch for every bonus) scores each head as evaluate() does;
    train_head(copy_exact="auto") keeps the best value of its sweep (ties to the smaller), from the same backbone pass
    over the held-out rows as the last epoch's evaluation; a number is set as given, and a head without a copy read
    keeps 0 and sweeps nothing."""
    import mtplite.train.train as tr
    from mtplite.model.head import with_copy_exact
    from mtplite.train.train import EXACT_VALUES, evaluate, evaluate_each, train_head, tune_copy_exact

    bb, head, rows, va, _ = trained("tiny:llama")
    heads = [with_copy_exact(head, v) for v in (0.0, 8.0, 30.0)]
    each = evaluate_each(heads, bb, va[:24], 3)
    assert each == [evaluate(h, bb, va[:24], 3) for h in heads]
    assert len(set(each)) > 1  # the bonus changes drafts here, so the sweep has something to choose
    best, sweep = tune_copy_exact(head, bb, va[:24], 3, values=(30.0, 0.0, 8.0), tie=0.0)
    assert sweep["tau"] == {f"{v:g}": round(t, 4) for v, t in zip((0.0, 8.0, 30.0), each)}
    assert best == (0.0, 8.0, 30.0)[each.index(max(each))] == sweep["chosen"]
    kw = dict(K=3, draft_vocab_size=64, epochs=1, batch=16, progress=False, val_rows=va[:16], log=lambda s: None)
    held, passes, real = {id(r) for r in va[:16]}, [], tr.features

    def counted(backbone, rs, *a, **k):
        passes.append(all(id(r) in held for r in rs))
        return real(backbone, rs, *a, **k)

    monkeypatch.setattr(tr, "features", counted)
    h, info = train_head(bb, rows[:32], copy_heads=2, copy_exact="auto", **kw)
    assert sum(passes) == 2  # the 16 held-out rows in batches of 8, once: the sweep is the last evaluation
    monkeypatch.setattr(tr, "features", real)
    sw = info["copy_exact_sweep"]
    assert sorted(float(v) for v in sw["tau"]) == list(EXACT_VALUES) and h.c.copy_exact == sw["chosen"]
    assert sw["chosen"] == min(float(v) for v, t in sw["tau"].items() if t >= max(sw["tau"].values()) - 0.002)
    h, info = train_head(bb, rows[:32], copy_heads=2, copy_exact=3.0, **kw)
    assert h.c.copy_exact == 3.0 and "copy_exact_sweep" not in info
    h, info = train_head(bb, rows[:32], copy_exact="auto", **kw)
    assert h.c.copy_exact == 0.0 and "copy_exact_sweep" not in info


@pytest.mark.parametrize("spec,draft,context", [(s, None, False) for s in FAMILIES] + [(s, 16, True) for s in FAMILIES])
def test_follow_pointer_drafts_lookups_continuation(spec, draft, context):
    """With copy_follow, a fresh head drafts all K tokens prompt lookup drafts from its trigram match, through the
    real recurrence (head.step fed its own drafts and projected activations): step 1 matches, later steps continue
    the match through the carried read-position code instead of re-matching on stale cached rows. Pointer logits
    only (the vocabulary head zeroed), so the stream cannot help. draft=16 with context: a 16-id draft vocabulary and
    the context draft space, so nearly every copied token is one only the cached text's ids can draft, their
    embedding rows zeroed as the vocabulary head is."""
    from mtplite.model.head import MTPHead, default_follow, head_config
    from mtplite.model.load import load_backbone
    from mtplite.train.train import context_of, features

    bb = load_backbone(spec)
    c = bb.model.c
    ids = list(range(c.vocab_size))[::-1]
    F = default_follow(c.hidden_size, 2)
    assert F >= 2
    head = MTPHead(head_config(c, ids[:draft], K=3, copy_heads=2, read_layers=[0]))
    assert head.c.copy_follow == F
    head.init_from_backbone(bb.model)
    with torch.no_grad():
        head.draft_head.weight.zero_()
    g = torch.Generator().manual_seed(1)
    n = agree = first = 0
    for _ in range(12):
        a = torch.randint(3, c.vocab_size, (8,), generator=g).tolist()
        b = torch.randint(3, c.vocab_size, (8,), generator=g).tolist()
        seq = a + b + a[:5] + b[:4] + a[3:8] + b[1:7]
        L = len(seq)
        f = features(bb, [{"tokens": seq, "prompt_len": 1}], head.kv_layers,
                     space=(head.vocab_map, head.space) if context else None)
        if context:
            f["ctx_emb"].zero_()
        for P in range(3, L):
            tail = seq[P - 2 : P + 1]
            ms = [s for s in range(P - 3, -1, -1) if seq[s : s + 3] == tail]
            # one match, and lookup's 3 drafts all cached tokens (equal matches start as a soft tie: the learned
            # recency, 1/256 nat per position at init, decides them)
            if len(ms) != 1 or ms[0] + 5 >= P:
                continue
            s = ms[0]
            want = seq[s + 3 : s + 6]
            pos = torch.tensor([P], dtype=torch.int32)
            x2 = torch.cat([f["emb"][:, P : P + 1], torch.randn(1, 1, c.hidden_size, generator=g)], -1)
            got = []
            ctx = context_of(head, f, pos)[0] if context else None
            space = ids[:draft] + f["ctx_ids"][0].tolist() if context else ids
            with torch.no_grad():
                prep = head.prepare(pos, torch.zeros(1, 1, 1, L), f["kv"], ctx)
                for _ in range(3):
                    d, proj = head.step(x2, prep)
                    got.append(space[int(d[0, 0].argmax())])
                    x2 = torch.cat([bb.model.embed(torch.tensor([[got[-1]]])).float(), proj], -1)
            n += 1
            agree += got == want
            first += got[0] == want[0]
    assert n >= 12 and first == n and agree == n, (agree, first, n)


def test_follow_head_refuses_a_backbone_whose_activation_reads_as_a_step_flag():
    """The step flag lives in the carried activation's last dim; a backbone h that large there would make step 1
    look like a later step, so training says so instead of learning from a misread recurrence."""
    from mtplite.errors import UserError
    from mtplite.model.head import FLAG, MTPHead, head_config
    from mtplite.train.train import features, rollout_loss

    bb, _, rows, *_ = trained("tiny:llama")
    c = bb.model.c
    head = MTPHead(head_config(c, list(range(64)), K=2, copy_heads=1, read_layers=[0]))
    f = features(bb, rows[:2], head.kv_layers)
    rollout_loss(head, f, 2)  # a real backbone's h: fine
    f["act"][..., -1] = FLAG
    with pytest.raises(UserError, match="--copy-heads 0"):
        rollout_loss(head, f, 2)


def test_context_space_sees_only_the_cached_text():
    """The context draft space in training: every id of a row outside the draft space, visible to a draft at
    position p only once cached (first occurrence < p: the token at p itself has no KV yet), and a label outside the
    draft space counts as draftable exactly when it is visible there (a leak of later ids would flatter the
    teacher-forced accept length, as session 13's restricted columns did)."""
    from mtplite.model.head import MTPHead, head_config
    from mtplite.train.train import context_of, features, rollout_loss

    bb, _, rows, *_ = trained("tiny:gemma3")
    c = bb.model.c
    head = MTPHead(head_config(c, list(range(40)), K=3))
    head.init_from_backbone(bb.model)
    f = features(bb, rows[:4], head.kv_layers, space=(head.vocab_map, head.space))
    toks, ok = f["tokens"], f["ok"]
    B, L = toks.shape
    pos = torch.arange(1, L, dtype=torch.int32)
    (emb, _, mask), seen = context_of(head, f, pos)
    for b in range(B):
        outside = {int(t) for t, o in zip(toks[b], ok[b]) if o and int(t) >= 40}
        listed = [int(t) for t in f["ctx_ids"][b] if t >= 0]
        assert sorted(listed) == sorted(outside) and len(listed) == len(set(listed))
        for m, t in enumerate(listed):
            first = next(j for j in range(L) if ok[b, j] and int(toks[b, j]) == t)
            assert int(f["ctx_first"][b, m]) == first
            assert torch.equal(seen[b, :, m], pos.long() > first)
            assert torch.equal(emb[b, m], bb.model.embed_tokens.weight[t])
    assert bool(((mask == 0) == seen).all())
    # labels outside the 40 ids: draftable (counted) only where visible
    _, n_ctx, _ = rollout_loss(head, f, 1)
    _, n_plain, _ = rollout_loss(head, {k: v for k, v in f.items() if not k.startswith("ctx_")}, 1)
    y = f["labels"][:, 1:]
    want = 0
    for b in range(B):
        for t in range(L - 1):
            lab = int(y[b, t])
            if lab >= 40 and ok[b, t] and ok[b, t + 1]:
                want += any(int(toks[b, j]) == lab for j in range(t + 1) if ok[b, j])
    assert want > 0 and n_ctx - n_plain == want, (n_ctx, n_plain, want)


def test_budget_counts_emitted_tokens_and_the_stop_token_is_kept():
    """Two edges the official engine gets wrong. The output budget counts emitted tokens, not drafts (LiteRT-LM
    #2816: with MTP on it emitted ~half the requested tokens): every budget gives plain decoding's first N tokens,
    also where an accepted block runs past it. The EOS that ends a turn is reported (#3439: the turn-final stop token
    is never committed), and speculative decoding ends on the same one at the same place as plain decoding, also
    where it arrives inside an accepted draft block."""
    bb, head, *_ = trained("tiny:gemma3")
    ids = bb.encode(PROMPTS[1])
    full = G.run(ids, G.torch_steps(bb, None, CACHE), max_new_tokens=60, eos_ids=set(), cache_len=CACHE)["tokens"]
    over = 0
    for n in range(1, 25):
        r = G.run(ids, G.torch_steps(bb, head, CACHE), max_new_tokens=n, eos_ids=set(), K=3, cache_len=CACHE)
        assert r["tokens"] == full[:n] and r["stop_reason"] == "max_new_tokens" and r["stop_token"] is None
        over += any(len(c["emitted"]) < c["accepted"] + 1 for c in r["trace"])  # the budget cut a block short
    assert over, "no budget fell inside an accepted block: the test head accepts too little to test the cut"
    inside = 0
    for j in range(1, 40):
        eos = full[j]
        if eos in full[:j]:
            continue  # the first occurrence ends the turn; test each stop position once
        plain = G.run(ids, G.torch_steps(bb, None, CACHE), max_new_tokens=60, eos_ids={eos}, cache_len=CACHE)
        spec = G.run(ids, G.torch_steps(bb, head, CACHE), max_new_tokens=60, eos_ids={eos}, K=3, cache_len=CACHE)
        assert plain["tokens"] == spec["tokens"] == full[:j]
        assert plain["stop_reason"] == spec["stop_reason"] == "eos" and plain["stop_token"] == spec["stop_token"] == eos
        last = spec["trace"][-1] if spec["trace"] else None
        inside += bool(last and last["emitted"][-1] == eos and len(last["emitted"]) <= last["accepted"])
    assert inside, "no stop token arrived as an accepted draft: the test did not reach that case"


def test_verify_matches_decode_across_the_sliding_window_edge():
    """tiny:gemma3's sliding layers see 8 positions and the cache holds 128: a verify pass whose K+1 rows straddle a
    window edge (some rows' windows have dropped keys the earlier rows still see) must give, row by row, what decoding
    those tokens one at a time gives. The cache is linear, not a ring, so no pass overwrites a key another row reads."""
    bb, head, *_ = trained("tiny:gemma3")
    W = max(bb.model.c.sliding_window)
    assert W and W < CACHE
    ids = bb.encode(PROMPTS[2])[:5]
    full = G.run(ids, G.torch_steps(bb, None, CACHE), max_new_tokens=3 * W, eos_ids=set(), cache_len=CACHE)["tokens"]
    seq = ids + full
    for pos in range(len(ids), len(ids) + 2 * W):  # every offset against the window, twice round
        a = G.torch_steps(bb, None, CACHE)
        a[0](seq[: pos - 1], 0)
        want = [a[1](seq[pos - 1], pos - 1)]
        for i in range(4):
            want.append(a[1](seq[pos + i], pos + i))
        b = G.torch_steps(bb, head, CACHE)
        b[0](seq[: pos - 1], 0)
        b[1](seq[pos - 1], pos - 1)
        ys, acts = b[2](seq[pos : pos + 4], pos)
        assert ys == [t for t, _ in want[1:]], pos
        assert torch.allclose(torch.stack([h for _, h in want[1:]]), acts, atol=1e-4), pos


def test_feature_cache_cap_recomputes_the_same_features():
    # a corpus whose features outgrow memory is recomputed past the cap, not cached until the kernel kills training:
    # the same weights either way (features are a deterministic function of the rows)
    from mtplite.data import training_prompts
    from mtplite.model.load import load_backbone
    from mtplite.train.distill import distill
    from mtplite.train.train import train_head

    bb = load_backbone("tiny:gemma3")
    rows = distill(bb, training_prompts(limit=24), None, max_new=8, batch=24, progress=False)
    logs = {}
    heads = {}
    for cap in (None, 0):
        logs[cap] = []
        heads[cap], _ = train_head(bb, rows, K=2, draft_vocab_size=64, epochs=2, batch=8, progress=False,
                                   cache_bytes=cap, log=logs[cap].append)
    assert all(torch.equal(a, b) for a, b in zip(heads[None].state_dict().values(), heads[0].state_dict().values()))
    assert any("feature cache full at 0.0 GB (0 of 3 batches)" in m for m in logs[0])
    assert not any("feature cache full" in m for m in logs[None])
