"""Heads compared teacher-forced on one backbone's held-out rows (issue 58): greedy τ on the greedy rows, and coupled
vs argmax τ on the sampled rows (train/sampled.py), each head on the templates the first head held out.

  python lab/probes/sampled_accept.py --backbone smollm2-135m --data corpora/smollm2-135m \
      corpora/smollm2-135m-sampled --heads heads/smollm2-135m OTHER_HEAD ... [--limit 200] [--json OUT]
"""
import argparse
import json
import time

import torch

from mtplite.errors import run_main
from mtplite.paths import write_text_atomic


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backbone", required=True)
    ap.add_argument("--data", nargs="+", required=True)
    ap.add_argument("--heads", nargs="+", required=True)
    ap.add_argument("--limit", type=int, default=200, help="held-out rows of each kind at most")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from mtplite.data.corpus import load_corpus
    from mtplite.data.splits import split_of, split_rows
    from mtplite.model.head import load_head
    from mtplite.model.load import load_backbone
    from mtplite.train.sampled import coupled_accept_length
    from mtplite.train.train import evaluate

    bb = load_backbone(a.backbone)
    rows, _ = load_corpus(a.data)
    heads = [load_head(h, bb.fingerprint) for h in a.heads]
    val = split_rows(rows, **split_of(heads[0][1]))[1]
    greedy = [r for r in val if not r.get("sampled")][: a.limit]
    sampled = [r for r in val if r.get("sampled")][: a.limit]
    out = {"backbone": a.backbone, "data": a.data, "held_out_templates": heads[0][1].get("val_templates"),
           "greedy_rows": len(greedy), "sampled_rows": len(sampled), "heads": {}}
    for path, (head, meta) in zip(a.heads, heads):
        t = time.time()
        rec = {"greedy_tau": round(evaluate(head, bb, greedy, head.c.K), 4),
               "sampled": coupled_accept_length(head, bb, sampled, head.c.K),
               "init_head": meta.get("init_head"), "data": meta.get("data"),
               "train_s": meta.get("train_s"), "steps": meta.get("steps")}
        out["heads"][path] = rec
        print(path, json.dumps(rec), f"({time.time() - t:.0f} s)", flush=True)
    if a.json:
        write_text_atomic(a.json, json.dumps(out, indent=1))


if __name__ == "__main__":
    run_main(main)
