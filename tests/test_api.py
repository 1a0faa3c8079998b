"""The Python API (mtplite.load) and `mtplite generate OUT`, its thin CLI: same tokens as plain decoding, the chat
template applied, streaming, stop strings, one-line errors, and the README's example as written."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROMPTS
from test_export_runtime import bundle

import mtplite
from mtplite.errors import UserError
from mtplite.model import generate as G

ROOT = Path(__file__).resolve().parents[1]


def test_generate_is_plain_decoding_and_streams_the_same_text():
    out = bundle("tiny:gemma3")
    plain = mtplite.load(out, threads=1, draft="off")
    for draft in ("auto", "mtp", "hybrid", "lookup"):
        m = mtplite.load(out, threads=1, draft=draft)
        for p in PROMPTS[:4]:
            ref = plain.generate(p, max_new_tokens=24)
            g = m.generate(p, max_new_tokens=24)
            assert g.tokens == ref.tokens and g.text == ref.text and g.stop_reason == ref.stop_reason
            assert g.K == m.K > 0 and g.draft in ("mtp", "hybrid", "lookup") and ref.draft is None
            b = plain.bundle
            raw = G.run(plain.encode(p), b.steps(), max_new_tokens=24, eos_ids=set(b.man["eos_ids"]), K=0,
                        cache_len=b.C)
            assert ref.tokens == raw["tokens"]
    m = mtplite.load(out, threads=1, draft="mtp")
    g = m.generate(PROMPTS[1], max_new_tokens=30)
    assert g.accept_length and g.accept_length >= 1 and g.tokens_per_s > 0 and g.stats["cycles"] > 0
    pieces = list(m.generate(PROMPTS[1], max_new_tokens=30, stream=True))
    assert "".join(pieces) == g.text and len(pieces) > 1 and m.last.tokens == g.tokens
    # a string and the one-message conversation holding it are the same prompt
    assert m.generate([{"role": "user", "content": PROMPTS[1]}], max_new_tokens=30).tokens == g.tokens
    # sampling: the same tokens with drafting on and off at one seed
    kw = dict(max_new_tokens=24, temperature=1.0, top_k=16, top_p=0.95, seed=7)
    assert m.generate(PROMPTS[2], **kw).tokens == plain.generate(PROMPTS[2], **kw).tokens


def test_stop_strings_and_errors():
    out = bundle("tiny:gemma3")
    m = mtplite.load(out, threads=1)
    full = m.generate(PROMPTS[1], max_new_tokens=30).text
    stop = full[10:13]
    g = m.generate(PROMPTS[1], max_new_tokens=30, stop=stop)
    assert g.stop_reason == "stop" and g.text == full[: full.index(stop)]
    assert "".join(m.generate(PROMPTS[1], max_new_tokens=30, stop=[stop], stream=True)) == g.text
    for bad, match in ((dict(prompt=""), "empty"), (dict(prompt="x" * 4000), "cache holds"),
                       (dict(prompt="hi", temperature=-1), "temperature"), (dict(prompt="hi", top_p=0), "top-p")):
        with pytest.raises(UserError, match=match):
            m.generate(**bad)
    with pytest.raises(UserError, match="draft="):
        mtplite.load(out, draft="fast")
    with pytest.raises(UserError, match="manifest.json"):
        mtplite.load(ROOT / "tests")


def test_cli_streams_once_to_stdout():
    out = bundle("tiny:gemma3")
    text = mtplite.load(out, threads=1).generate(PROMPTS[1], max_new_tokens=20).text
    r = subprocess.run([sys.executable, "-m", "mtplite.cli", "generate", str(out), "--prompt", PROMPTS[1],
                        "--max-new-tokens", "20", "--stream"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == text + "\n" and text not in r.stderr and "tok/s" in r.stderr


def test_readme_python_example_runs_as_written(tmp_path):
    """The README's first Python block, on a tiny bundle in place of out/."""
    block = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    assert 'mtplite.load("out/")' in block
    code = block.replace('"out/"', repr(str(bundle("tiny:gemma3"))))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert re.search(r"\n[0-9.]+ [0-9.]+ (eos|max_new_tokens)\n", r.stdout), r.stdout
    # the official engine's snippet beside it, on the same bundle's .litertlm
    block = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)[1]
    assert "create_conversation" in block and '"out/model.litertlm"' in block
    code = block.replace('"out/model.litertlm"', repr(str(bundle("tiny:gemma3") / "model.litertlm")))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr[-2000:]


def test_engine_conversation_answers_as_the_python_api(tmp_path):
    """bench's engine rows (runtime/engine.py) send a string, a one-message list and a multi-turn conversation through
    the official engine's Conversation API; with MTP off each reply is the Python API's text for the same messages."""
    from mtplite.runtime.engine import engine_summary, run_engine

    out = bundle("tiny:gemma3")
    convo = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
             {"role": "user", "content": PROMPTS[2]}]
    prompts = [PROMPTS[1], [{"role": "user", "content": PROMPTS[3]}], convo]
    s = engine_summary(run_engine(out, prompts, 12), prompts)
    assert s["api"] == "conversation" and s["text_matches_off"] == 3, s
    m = mtplite.load(out, threads=1, draft="off")
    assert [r["mtp_off"] for r in s["replies"]] == [m.generate(p, max_new_tokens=12).text for p in prompts]
    assert s["replies"][2]["prompt"] == PROMPTS[2] and s["mtp/plain"] > 0
