"""The benchmark prompts: JSONL rows of id, task and prompt, read by bench, calibrate, soak and export.

The default set ships in the package (bench_prompts.jsonl) so a plain clone or a wheel benchmarks without anything
beside it; no training prompt shares a framing with it (tests/test_core.py).
"""
import json
from pathlib import Path

from mtplite.errors import UserError


def is_messages(x):
    """A chat conversation as prompts files hold it: a non-empty list of {"role": str, "content": str}."""
    return isinstance(x, list) and bool(x) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in x)


def load_prompts(path):
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: prompts file not found (JSONL with 'id', 'task', 'prompt')")
    rows = []
    for i, line in enumerate(p.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            prompt = r.get("prompt", r.get("messages")) if isinstance(r, dict) else None
            if not (isinstance(prompt, str) and prompt or is_messages(prompt)):
                raise ValueError("needs a non-empty string 'prompt' or a 'messages' list of {role, content}")
        except (json.JSONDecodeError, ValueError) as e:
            raise UserError(f"{p}:{i}: bad prompt line ({e})") from None
        rows.append({"id": str(r.get("id", i)), "task": str(r.get("task", "all")), "prompt": prompt})
    if not rows:
        raise UserError(f"{p}: no prompts")
    return rows


BENCH_PROMPTS = Path(__file__).with_name("bench_prompts.jsonl")


def default_prompts():
    return BENCH_PROMPTS


def bundle_prompts(out, path=None):
    """What to measure bundle `out` on: `path` when given, else the prompts its head held out of the user's own
    prompt file (manifest "eval_prompts", written by a head trained with --prompts FILE), else the shipped benchmark."""
    if path:
        return load_prompts(path)
    man = {}
    for m in (Path(out) / "android" / "manifest.json", Path(out) / "manifest.json"):
        try:
            man = json.loads(m.read_text())
            break
        except (OSError, ValueError):  # a missing or broken manifest is reported when the bundle loads
            continue
    held = man.get("eval_prompts") if isinstance(man, dict) else None
    return list(held) if isinstance(held, list) and held else load_prompts(default_prompts())
