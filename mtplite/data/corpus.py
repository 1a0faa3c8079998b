"""Distillation corpora: the backbone's own continuations (greedy, or sampled with recorded seeds) as committed,
versioned data.

A corpus is a folder of shards (`shard-00000.npz`, ...). Each shard is a compressed npz of
  tokens      uint16 or uint32, every row's prompt ids then its greedy continuation, rows back to back
  starts      int64 [rows + 1], row r is tokens[starts[r]:starts[r + 1]]
  prompt_len  int32 [rows]
  meta        utf-8 JSON: format, backbone, backbone_fingerprint, numerics, settings (max_new, eos_ids, prompt
              format, decoding: greedy | sample with temperature, top_k, top_p, seed), and per row its id, task and
              template (and, for sampled shards, its sampler seed in `seeds`)
Shards are only ever added (each written to a temporary name, then renamed), so a distillation run that stops
loses at most the shard it was filling, and several machines' runs add up by committing their shards.
"""
import json
import os
import time
from pathlib import Path

import numpy as np

from mtplite.errors import UserError

FORMAT = "mtplite-corpus/1"


def shard_paths(path):
    """The shard files a corpus path names: a shard file, or a folder of them (sorted)."""
    p = Path(path)
    if p.is_dir():
        return sorted(p.glob("shard-*.npz"))
    if p.is_file():
        return [p]
    raise UserError(f"{path}: no such corpus (give a corpus folder such as corpora/gemma3-270m or a shard .npz)")


def read_shard(path):
    """(meta, rows) of one shard; rows are {id, task, template, prompt_len, tokens}."""
    import zipfile

    if not zipfile.is_zipfile(path):
        raise UserError(f"{path}: not a corpus shard (an .npz archive); delete it or restore it from git")
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            toks, starts, plen = z["tokens"].astype(np.int64), z["starts"], z["prompt_len"]
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        raise UserError(f"{path}: not a readable corpus shard ({str(e).splitlines()[0]}); delete it or restore it "
                        "from git") from None
    if meta.get("format") != FORMAT:
        raise UserError(f"{path}: corpus format {meta.get('format')!r}, this mtplite reads {FORMAT!r}")
    rows = [{"id": i, "task": t, "template": tp, "prompt_len": int(plen[r]),
             "tokens": toks[starts[r]: starts[r + 1]].tolist()}
            for r, (i, t, tp) in enumerate(zip(meta["ids"], meta["tasks"], meta["templates"]))]
    st = meta.get("settings", {})
    if st.get("decoding") == "sample":  # the continuation is a sample, not the greedy output
        for r, sd in zip(rows, meta["seeds"]):
            r["sampled"], r["seed"], r["sampler"] = True, sd, (st["temperature"], st["top_k"], st["top_p"])
    return meta, rows


def load_corpus(paths):
    """(rows, metas) of every shard the paths name, first occurrence of a prompt id kept. One backbone per call:
    shards of two fingerprints are an error naming both."""
    rows, metas, seen = [], [], set()
    for path in paths:
        for sp in shard_paths(path):
            meta, rs = read_shard(sp)
            if metas and meta["backbone_fingerprint"] != metas[0]["backbone_fingerprint"]:
                raise UserError(f"{sp}: distilled from backbone {meta['backbone_fingerprint']}, but "
                                f"{metas[0]['path']} from {metas[0]['backbone_fingerprint']}; train on one backbone's "
                                "corpora at a time")
            metas.append({**{k: v for k, v in meta.items() if k not in ("ids", "tasks", "templates", "seeds")},
                          "path": str(sp)})
            for r in rs:
                if r["id"] not in seen:
                    seen.add(r["id"])
                    rows.append(r)
    return rows, metas


def corpus_info(paths):
    rows, metas = load_corpus(paths)
    if not metas:
        raise UserError(f"{' '.join(map(str, paths))}: no shards (shard-*.npz) found")
    tasks = {}
    for r in rows:
        tasks[r["task"]] = tasks.get(r["task"], 0) + 1
    return {"backbone": metas[0]["backbone"], "backbone_fingerprint": metas[0]["backbone_fingerprint"],
            "rows": len(rows), "tokens": sum(len(r["tokens"]) - r["prompt_len"] for r in rows),
            "prompt_tokens": sum(r["prompt_len"] for r in rows), "shards": len(metas),
            "bytes": sum(os.path.getsize(m["path"]) for m in metas),
            "numerics": sorted({m["numerics"] for m in metas}),
            "max_new": sorted({m["settings"]["max_new"] for m in metas}), "decoding": decodings(metas),
            "tasks": dict(sorted(tasks.items()))}


def decodings(metas):
    """How a corpus's shards were generated: "greedy", or the sampler settings ("T 1 top-k 64 top-p 0.95")."""
    def one(st):
        if st.get("decoding", "greedy") == "greedy":
            return "greedy"
        return f"T {st['temperature']:g} top-k {st['top_k']} top-p {st['top_p']:g}"
    return sorted({one(m["settings"]) for m in metas})


def write_shard(folder, rows, meta):
    """Add rows as the folder's next shard (atomic: a temporary file renamed into place). Returns its path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    have = [int(p.stem.split("-")[1]) for p in folder.glob("shard-*.npz")]
    path = folder / f"shard-{max(have, default=-1) + 1:05d}.npz"
    flat = [t for r in rows for t in r["tokens"]]
    dt = np.uint16 if max(flat, default=0) < 2 ** 16 else np.uint32
    doc = {"format": FORMAT, **meta, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "ids": [r["id"] for r in rows], "tasks": [r["task"] for r in rows],
           "templates": [r.get("template") for r in rows]}
    tmp = path.with_name(path.name + f".tmp{os.getpid()}.npz")
    np.savez_compressed(tmp, tokens=np.asarray(flat, dtype=dt),
                        starts=np.cumsum([0] + [len(r["tokens"]) for r in rows]).astype(np.int64),
                        prompt_len=np.asarray([r["prompt_len"] for r in rows], dtype=np.int32),
                        meta=np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8))
    os.replace(tmp, path)
    return path


