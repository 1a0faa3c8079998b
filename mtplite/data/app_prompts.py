"""A user's own prompts (`--prompts app.jsonl` in distill, train and quickstart): what their app sends.

One JSON object a line: {"prompt": "..."} or {"messages": [{"role": "user", "content": "..."}, ...]}, with an
optional "task" (default "app") and "id". A fixed share of the rows, chosen by a hash of their content, is held
out: never distilled or trained on, it is what calibrate, bench and the phone's benchmark measure that head on.
"""
import hashlib
import json
from pathlib import Path

from mtplite.errors import UserError

HOLDOUT = 0.1  # share of an app's prompts held out for evaluation (at least one row)


def _text(r):
    return r if isinstance(r, str) else "\n".join(m["content"] for m in r)


def load_app_prompts(path):
    """Rows {id, task, template, prompt, source} of a user's JSONL; one-line errors name the file and line."""
    from mtplite.data.benchmark import default_prompts, is_messages, load_prompts

    p = Path(path)
    if not p.is_file():
        raise UserError(f"--prompts {path}: no such file (JSONL, one {{\"prompt\": ...}} or {{\"messages\": [...]}} "
                        "a line)")
    bench = {r["prompt"].strip() for r in load_prompts(default_prompts())}
    rows, seen = [], {}
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise UserError(f"{p}: not UTF-8 text; give a JSONL file of prompts") from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{p}:{i}: not JSON ({e.msg}); each line must be one object such as "
                            '{"prompt": "..."}') from None
        if not isinstance(r, dict):
            raise UserError(f"{p}:{i}: a JSON object is needed, such as {{\"prompt\": \"...\"}}")
        prompt = r.get("prompt", r.get("messages"))
        if isinstance(prompt, list):
            if not is_messages(prompt):
                raise UserError(f"{p}:{i}: \"messages\" must be a non-empty list of {{\"role\": ..., \"content\": "
                                "...}} with string values")
            prompt = [{"role": m["role"], "content": m["content"]} for m in prompt]
        elif not isinstance(prompt, str) or not prompt.strip():
            raise UserError(f"{p}:{i}: no prompt: give a non-empty \"prompt\" string or a \"messages\" list")
        if _text(prompt).strip() in bench:
            raise UserError(f"{p}:{i}: this is one of mtplite's benchmark prompts (mtplite/data/bench_prompts.jsonl); "
                            "training on it would flatter every result: remove it")
        key = hashlib.sha1(json.dumps(prompt, sort_keys=True).encode()).hexdigest()[:12]
        if key in seen:
            raise UserError(f"{p}:{i}: the same prompt as line {seen[key]}; remove the duplicate")
        seen[key] = i
        task = str(r.get("task") or "app")
        # a content id: the distillation cache and corpora key rows by id, so two files never share one
        rows.append({"id": f"app-{key}", "task": task, "template": f"app-{key}", "prompt": prompt,
                     "source": p.name})
    if not rows:
        raise UserError(f"{p}: no prompts in it; one {{\"prompt\": ...}} or {{\"messages\": [...]}} a line")
    return rows


def split_app_prompts(rows):
    """(train, held_out): HOLDOUT of the rows by a hash of their id, at least one held out and one kept."""
    if len(rows) < 2:
        raise UserError(f"{rows[0]['source']}: one prompt cannot be split into training and held-out evaluation "
                        "prompts; give at least 2 (20 or more to measure anything)")
    rank = sorted(rows, key=lambda r: hashlib.md5(r["id"].encode()).hexdigest())
    n = min(len(rows) - 1, max(1, round(HOLDOUT * len(rows))))
    held = {r["id"] for r in rank[:n]}
    return [r for r in rows if r["id"] not in held], [r for r in rows if r["id"] in held]


def eval_rows(held):
    """The held-out rows as benchmark rows ({id, task, prompt}), for head.json and the bundle's manifest."""
    return [{"id": r["id"], "task": r["task"], "prompt": r["prompt"]} for r in held]
