"""How large the backbone's final-normed activation h gets: the head's step-1 input, whose last dim the copy read's
step flag (model/head.py FLAG) must never be mistaken for. Teacher-forced over a spread of distilled rows.

  python scripts/activation_range.py SPEC=DISTILL.jsonl [SPEC=DISTILL.jsonl ...] [--rows 64] [--json out.json]
"""
import argparse
import json
import sys

import torch

from mtplite.errors import UserError, run_main
from mtplite.model.head import FLAG
from mtplite.model.load import load_backbone
from mtplite.paths import write_text_atomic
from mtplite.train.distill import load_rows
from mtplite.train.train import features


@torch.no_grad()
def activation_range(bb, rows, batch=8):
    top = last = 0.0
    for i in range(0, len(rows), batch):
        f = features(bb, rows[i : i + batch], [0])
        a = f["act"][f["ok"]]
        top, last = max(top, float(a.abs().max())), max(last, float(a[:, -1].abs().max()))
    return {"rows": len(rows), "max_abs_h": top, "max_abs_h_last_dim": last, "flag_threshold": FLAG / 2}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pairs", nargs="+", help="SPEC=DISTILL.jsonl")
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--json")
    a = ap.parse_args()
    out = {}
    for pair in a.pairs:
        spec, _, data = pair.partition("=")
        rows = list(load_rows(data).values())
        if not rows:
            raise UserError(f"{data}: no distilled rows; give SPEC=DISTILL.jsonl of a `mtplite train` cache")
        rows = rows[:: max(1, len(rows) // a.rows)][: a.rows]
        out[spec] = activation_range(load_backbone(spec), rows)
        print(spec, out[spec], file=sys.stderr)
    print(json.dumps(out, indent=1))
    if a.json:
        write_text_atomic(a.json, json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(run_main(main, "activation_range.py"))
