"""Distillation corpora (mtplite/data/corpus.py): written in shards by distillation, resumable, read by training,
checked against the backbone before use."""
import json

import numpy as np
import pytest

from test_core import _cli, _one_line_error


def _items(bb, n):
    from mtplite.train.distill import corpus_items

    return corpus_items(bb)[:n]


def _meta(bb):
    return {"backbone": bb.spec, "backbone_fingerprint": bb.fingerprint, "numerics": "float32 cpu", "settings": {}}


def test_corpus_rows_are_the_greedy_rows_and_a_rerun_resumes(tmp_path):
    from mtplite.data.corpus import corpus_info, load_corpus
    from mtplite.model.load import load_backbone
    from mtplite.train.distill import distill, distill_corpus

    bb = load_backbone("tiny:llama")
    items = _items(bb, 20)
    out = tmp_path / "c"
    assert distill_corpus(bb.model, items[:12], out, _meta(bb), 10, bb.eos_ids, batch=5, shard_rows=5,
                          progress=False) == 12
    assert len(list(out.glob("shard-*.npz"))) == 3 and not list(out.glob("*.tmp*"))  # 5 + 5 + the last 2
    # a later run adds only the prompts the corpus lacks, as new shards
    assert distill_corpus(bb.model, items, out, _meta(bb), 10, bb.eos_ids, batch=8, progress=False) == 8
    assert distill_corpus(bb.model, items, out, _meta(bb), 10, bb.eos_ids, batch=8, progress=False) == 0
    rows, metas = load_corpus([out])
    assert sorted(r["id"] for r in rows) == sorted(p["id"] for p in items) and len(metas) == 4
    # the same greedy tokens the JSONL path distils (one batch there, other batches here: padding changes nothing)
    prompts = {p["id"]: p for p in __import__("mtplite.data", fromlist=["x"]).training_prompts()}
    prompts.update({p["id"]: p for p in __import__("mtplite.data", fromlist=["x"]).program_prompts()})
    ref = {r["id"]: r for r in distill(bb, [prompts[p["id"]] for p in items], None, max_new=10, batch=20,
                                       progress=False)}
    assert all(r["tokens"] == ref[r["id"]]["tokens"] and r["prompt_len"] == ref[r["id"]]["prompt_len"] for r in rows)
    assert all(r["template"] == prompts[r["id"]]["template"] for r in rows)
    info = corpus_info([out])
    assert info["backbone_fingerprint"] == bb.fingerprint and info["rows"] == 20
    assert info["tokens"] == sum(len(r["tokens"]) - r["prompt_len"] for r in rows) > 0


def test_sampled_rows_are_plain_sampling_at_their_recorded_seed(tmp_path):
    """distill --temperature: each row is what generate samples at the row's recorded seed, rows sit beside the
    greedy rows of the same prompts, and a rerun adds nothing."""
    from mtplite.data.corpus import corpus_info, load_corpus
    from mtplite.model.generate import run, torch_steps
    from mtplite.model.load import load_backbone
    from mtplite.model.sampling import Sampler
    from mtplite.train.distill import distill_corpus

    bb = load_backbone("tiny:llama")
    items, out = _items(bb, 6), tmp_path / "c"
    sp = Sampler(1.0, 64, 0.95, 7)
    distill_corpus(bb.model, items, out, _meta(bb), 10, bb.eos_ids, batch=4, progress=False)
    assert distill_corpus(bb.model, items, out, _meta(bb), 10, bb.eos_ids, batch=4, progress=False, sampler=sp) == 6
    assert distill_corpus(bb.model, items, out, _meta(bb), 10, bb.eos_ids, batch=3, progress=False, sampler=sp) == 0
    rows, metas = load_corpus([out])
    greedy = {r["id"]: r for r in rows if not r.get("sampled")}
    sampled = [r for r in rows if r.get("sampled")]
    assert len(greedy) == len(sampled) == 6 and len({r["seed"] for r in sampled}) == 6
    differ = 0
    for r in sampled:
        g = greedy[r["id"].split("~")[0]]
        assert r["tokens"][: r["prompt_len"]] == g["tokens"][: g["prompt_len"]]
        at_seed = Sampler(1.0, 64, 0.95, r["seed"])
        C = r["prompt_len"] + 12
        ref = run(r["tokens"][: r["prompt_len"]], torch_steps(bb, cache_len=C, sampler=at_seed), max_new_tokens=10,
                  eos_ids=set(bb.eos_ids), cache_len=C)
        cont = r["tokens"][r["prompt_len"]:]
        assert [t for t in cont if t not in bb.eos_ids] == ref["tokens"]
        differ += cont != g["tokens"][g["prompt_len"]:]
    assert differ >= 3  # sampling at T 1 is not the greedy row
    assert corpus_info([out])["decoding"] == ["T 1 top-k 64 top-p 0.95", "greedy"]


def test_corpus_check_refuses_another_backbone_and_other_numerics(tmp_path):
    from mtplite.data.corpus import load_corpus, write_shard
    from mtplite.train.distill import check_corpus
    from mtplite.errors import UserError
    from mtplite.model.load import load_backbone
    from mtplite.train.distill import distill_corpus

    bb = load_backbone("tiny:llama")
    out = tmp_path / "c"
    distill_corpus(bb.model, _items(bb, 8), out, _meta(bb), 10, bb.eos_ids, batch=8, progress=False)
    rows, metas = load_corpus([out])
    assert check_corpus(bb, rows, metas)["agreed"] > 0
    other = load_backbone("tiny:qwen3")
    with pytest.raises(UserError) as e:
        check_corpus(other, rows, metas)
    assert bb.fingerprint in str(e.value) and other.fingerprint in str(e.value)
    # same fingerprint, tokens the backbone does not predict: rows from other numerics (or tampered) are refused
    bad = [{**r, "tokens": r["tokens"][: r["prompt_len"]] + [(t + 7) % 500 for t in r["tokens"][r["prompt_len"]:]]}
           for r in rows]
    write_shard(tmp_path / "bad", bad, _meta(bb))
    with pytest.raises(UserError, match="re-predicts only"):
        check_corpus(bb, *load_corpus([tmp_path / "bad"]))
    # two backbones' shards in one call
    distill_corpus(other.model, _items(other, 4), tmp_path / "q", _meta(other), 6, other.eos_ids, progress=False)
    with pytest.raises(UserError, match="one backbone"):
        load_corpus([out, tmp_path / "q"])


def test_cli_distill_info_train_from_corpus(tmp_path):
    env = {"MTPLITE_CACHE": str(tmp_path / "cache")}
    c = tmp_path / "corpus"
    rc, out, err = _cli("distill", "--backbone", "tiny:llama", "--out", str(c), "--limit", "24", "--max-new", "12",
                        "--batch", "8", "--shard-rows", "10", env=env)
    assert rc == 0, err[-2000:]
    assert json.loads(out.splitlines()[-1])["rows_added"] == 24
    rc, out, err = _cli("corpus", "info", str(c), "--json")
    info = json.loads(out)
    assert rc == 0 and info["rows"] == 24 and info["tokens"] > 24 and info["shards"] == 2  # whole batches: 16 + 8
    rc, out, err = _cli("train", "--backbone", "tiny:llama", "--data", str(c), "--out", str(tmp_path / "h"),
                        "--epochs", "1", "--draft-vocab", "64", "--k", "2", env=env)
    assert rc == 0, err[-2000:]
    doc = json.loads((tmp_path / "h" / "head.json").read_text())
    assert doc["train_sequences"] + doc["val_sequences"] == 24 and doc["data"] == [str(c)]
    assert not (tmp_path / "cache" / "distill").exists() or not any((tmp_path / "cache" / "distill").iterdir())
    # bad inputs: one line naming the file or flag
    msg = _one_line_error(*_cli("train", "--backbone", "tiny:qwen3", "--data", str(c), "--out", str(tmp_path / "x"),
                                env=env)[::2])
    assert "corpus distilled from backbone" in msg and "tiny:qwen3" in msg
    msg = _one_line_error(*_cli("train", "--backbone", "tiny:llama", "--data", str(c), "--echo", "4", "--out",
                                str(tmp_path / "x"), env=env)[::2])
    assert "--echo" in msg
    (tmp_path / "junk").mkdir()
    np.save(tmp_path / "junk" / "shard-00000.npz", np.zeros(3))
    (tmp_path / "junk" / "shard-00000.npz.npy").rename(tmp_path / "junk" / "shard-00000.npz")
    msg = _one_line_error(*_cli("corpus", "info", str(tmp_path / "junk"))[::2])
    assert "shard-00000.npz" in msg
    msg = _one_line_error(*_cli("corpus", "info", str(tmp_path / "none"))[::2])
    assert "no such corpus" in msg


def test_committed_corpora_are_readable():
    """What the repo ships: each committed corpus loads, names its backbone, and its rows are well formed."""
    from pathlib import Path

    from mtplite.data.corpus import corpus_info, load_corpus

    root = Path(__file__).resolve().parents[1] / "corpora"
    folders = [p for p in root.iterdir() if p.is_dir()]
    assert folders
    for f in folders:
        rows, metas = load_corpus([f])
        info = corpus_info([f])
        sampled = f.name.endswith("-sampled")
        assert info["backbone"] == f.name.removesuffix("-sampled") and info["rows"] == len(rows) > 0
        assert all(0 < r["prompt_len"] < len(r["tokens"]) for r in rows)
        assert all(m["settings"]["decoding"] == ("sample" if sampled else "greedy") for m in metas)
        assert all(bool(r.get("sampled")) == sampled and (not sampled or "~T1k64p0.95s" in r["id"]) for r in rows)


def test_quickstart_trains_from_the_committed_corpus_of_its_backbone(tmp_path, monkeypatch, capsys):
    """quickstart reads corpora/<backbone> when its fingerprint matches (and says so in its plan); a corpus of other
    weights is not used."""
    import mtplite.paths
    from mtplite import quickstart
    from mtplite.model.load import load_backbone
    from mtplite.train.distill import distill_corpus

    bb, other = load_backbone("tiny:llama"), load_backbone("tiny:qwen3")
    distill_corpus(bb.model, _items(bb, 6), tmp_path / "tiny-llama", _meta(bb), 8, bb.eos_ids, progress=False)
    monkeypatch.setattr(mtplite.paths, "repo_corpus", lambda spec: tmp_path / spec.replace(":", "-"))
    rows = quickstart.committed_corpus(bb)
    assert len(rows) == 6
    (tmp_path / "tiny-qwen3").symlink_to(tmp_path / "tiny-llama")
    assert quickstart.committed_corpus(other) == [] and "not using it" in capsys.readouterr().err
    assert quickstart.committed_corpus(load_backbone("tiny:gemma3")) == []  # no corpus at all
    text = "\n".join(quickstart.plan(45, 0.2, rows, False, False, False, "int8"))
    assert "the committed corpus (6 rows" in text and "export int8" in text and "total about" in text
    assert "head reused" in "\n".join(quickstart.plan(45, 0.2, [], True, True, False, "int8"))


def test_committed_heads_load_and_name_their_corpus():
    """heads/<backbone>: open-licence heads shipped in the repo load as they are, for the backbone whose committed
    corpus trained them (the fingerprints agree), with their training record."""
    from pathlib import Path

    from mtplite.data.corpus import corpus_info
    from mtplite.model.head import load_head

    root = Path(__file__).resolve().parents[1]
    heads = [p for p in (root / "heads").iterdir() if (p / "head.json").exists()]
    assert heads
    for h in heads:
        head, doc = load_head(h)
        assert doc["backbone"] == h.name and doc["train_generated_tokens"] > 0 and doc["best_val_accept_length"] > 1
        assert corpus_info([root / "corpora" / h.name])["backbone_fingerprint"] == doc["backbone_fingerprint"]
        assert not h.name.startswith("gemma")  # Gemma Terms: no trained Gemma head in the repo
