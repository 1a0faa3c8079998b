"""The benchmark prompts: JSONL rows of id, task and prompt, read by bench, calibrate, soak and export.

The default set ships in the package (bench_prompts.jsonl) so a plain clone or a wheel benchmarks without anything
beside it; no training prompt shares a framing with it (tests/test_core.py).
"""
import json
from pathlib import Path

from mtplite.errors import UserError


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
            if not isinstance(r, dict) or not isinstance(r.get("prompt"), str) or not r["prompt"]:
                raise ValueError("needs a non-empty string 'prompt'")
        except (json.JSONDecodeError, ValueError) as e:
            raise UserError(f"{p}:{i}: bad prompt line ({e})") from None
        rows.append({"id": str(r.get("id", i)), "task": str(r.get("task", "all")), "prompt": r["prompt"]})
    if not rows:
        raise UserError(f"{p}: no prompts")
    return rows


BENCH_PROMPTS = Path(__file__).with_name("bench_prompts.jsonl")


def default_prompts():
    return BENCH_PROMPTS
