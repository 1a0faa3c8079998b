"""Does the head copy? Teacher-forced on held-out self-distilled rows (templates never trained on), compare the
head's first draft with prompt lookup's at every generated position, split by whether lookup finds an earlier
match and whether that match is right ("copyable" positions). A head that learned induction-style copying through
its attention over the backbone's KV would be right on nearly every copyable position.

  python lab/scripts/copy_probe.py --backbone gemma3-270m --head HEAD_DIR --data DISTILL.jsonl [--rows 96] [--json out]
"""
import argparse
import json
import sys
from collections import Counter

import torch

from mtplite.errors import run_main
from mtplite.model.head import load_head
from mtplite.model.load import load_backbone
from mtplite.paths import write_text_atomic
from mtplite.runtime.lookup import lookup
from mtplite.train.distill import key_mask
from mtplite.train.train import features, held_out_rows
from mtplite.data.splits import split_of


@torch.no_grad()
def probe(bb, head, rows, batch=8):
    c = Counter()
    for i in range(0, len(rows), batch):
        rs = rows[i : i + batch]
        f = features(bb, rs, head.kv_layers, v_only=head.v_only_layers)
        toks, ok, act, y, emb = f["tokens"], f["ok"], f["act"], f["labels"], f["emb"]
        B, L = toks.shape
        idx = torch.arange(1, L)
        prep = head.prepare(torch.arange(1, L, dtype=torch.int32), key_mask(ok, L), f["kv"])
        d, _ = head.step(torch.cat([emb[:, idx], act[:, :-1]], -1), prep)
        pred = head.draft_ids_t[d.argmax(-1)]
        for b, r in enumerate(rs):
            off = L - len(r["tokens"])
            for j in range(L - 1):  # anchor: token at position j+1, label = token j+2
                lab = int(y[b, j + 1])
                if lab < 0:  # labels exist only for generated positions
                    continue
                hist = r["tokens"][: j + 2 - off]
                lk = lookup(hist, 1)
                head_ok = int(pred[b, j]) == lab
                c["positions"] += 1
                c["head_right"] += head_ok
                c["outside_draft_space"] += int(head.vocab_map[lab]) >= head.space  # no draft can be right there
                # the length of the n-gram lookup matched on: its 1-token matches are far less reliable
                m = next((m for m in (3, 2, 1) if lookup(hist, 1, min_ngram=m) is not None), 0)
                c[f"ngram{m}"] += 1
                c[f"head_right_ngram{m}"] += head_ok
                c[f"lookup_right_ngram{m}"] += lk is not None and lk[0] == lab
                if lk is None:
                    c["no_match"] += 1
                    c["head_right_no_match"] += head_ok
                else:
                    c["match"] += 1
                    c["head_right_match"] += head_ok
                    if lk[0] == lab:
                        c["copyable"] += 1
                        c["head_right_copyable"] += head_ok
                        c["copyable_outside_draft_space"] += int(head.vocab_map[lab]) >= head.space
                    else:
                        c["head_right_match_wrong_copy"] += head_ok
    n = lambda a, b: c[a] / max(c[b], 1)
    return {"positions": c["positions"], "share_copyable": n("copyable", "positions"),
            "share_with_match": n("match", "positions"),
            "head_acc": n("head_right", "positions"), "lookup_acc_when_match": n("copyable", "match"),
            "head_acc_when_match": n("head_right_match", "match"),
            "head_acc_on_copyable": n("head_right_copyable", "copyable"),
            "head_acc_when_copy_wrong": c["head_right_match_wrong_copy"] / max(c["match"] - c["copyable"], 1),
            "head_acc_when_no_match": n("head_right_no_match", "no_match"),
            "share_outside_draft_space": n("outside_draft_space", "positions"),
            "copyable_outside_draft_space": n("copyable_outside_draft_space", "copyable"),
            "by_match_length": {m: {"share": n(f"ngram{m}", "positions"),
                                    "head_acc": n(f"head_right_ngram{m}", f"ngram{m}"),
                                    "lookup_acc": n(f"lookup_right_ngram{m}", f"ngram{m}")} for m in (0, 1, 2, 3)},
            "counts": dict(c)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backbone", required=True)
    ap.add_argument("--head", required=True)
    ap.add_argument("--data", required=True, help="the distillation cache JSONL the head was trained from")
    ap.add_argument("--rows", type=int, default=96)
    ap.add_argument("--benchmark", action="store_true",
                    help="also probe the benchmark prompts' own greedy rows, per task (--max-new tokens each)")
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--json")
    a = ap.parse_args()
    bb = load_backbone(a.backbone)
    head, meta = load_head(a.head, bb.fingerprint)
    held = held_out_rows(a.data, **split_of(meta))  # the held-out templates of this head's own training
    res = {"backbone": a.backbone, "head": a.head, "held_out_rows": min(a.rows, len(held)),
           **probe(bb, head, held[: a.rows])}
    if a.benchmark:
        from mtplite.train.distill import benchmark_rows

        rows = benchmark_rows(bb, a.max_new)
        res["benchmark"] = {t: probe(bb, head, [r for r in rows if r["task"] == t])
                            for t in sorted({r["task"] for r in rows})}
    print(json.dumps(res, indent=1))
    if a.json:
        write_text_atomic(a.json, json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.exit(run_main(main, "copy_probe.py"))
