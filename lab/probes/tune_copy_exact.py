"""Choose a trained head's copy_exact (the bonus for a near-exact copy read, model/head.py CopyRead.forward) on its
own held-out rows, teacher-forced, and write the head with it. The held-out rows are whole templates the head never
trained on; the benchmark prompts are never looked at. Ties (within --tie of the best) go to the smaller bonus.
`mtplite train` does this itself after training (--copy-exact auto, over 0, 2, 4, 8, 16); this script is for a head
trained before that, or for other values.

  python lab/probes/tune_copy_exact.py --backbone gemma3-270m --head HEAD_DIR --data DISTILL.jsonl --out NEW_HEAD_DIR
      [--values 0,2,4,6,8] [--rows 320] [--json out.json]
"""
import argparse
import json
import random
import sys
import time
from pathlib import Path

from mtplite.errors import UserError, run_main
from mtplite.model.head import load_head, save_head, with_copy_exact
from mtplite.model.load import load_backbone
from mtplite.paths import write_text_atomic
from mtplite.train.train import held_out_rows, tune_copy_exact
from mtplite.data.splits import split_of


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbone", required=True)
    ap.add_argument("--head", required=True)
    ap.add_argument("--data", required=True, help="the distillation cache JSONL the head was trained from")
    ap.add_argument("--out", required=True, help="where to write the head with the chosen copy_exact")
    ap.add_argument("--values", default="0,2,4,6,8", help="bonuses to try, in nats")
    ap.add_argument("--rows", type=int, default=320, help="held-out rows to score (a fixed random sample)")
    ap.add_argument("--tie", type=float, default=0.002, help="τ differences this small go to the smaller bonus")
    ap.add_argument("--json")
    a = ap.parse_args()
    try:
        values = sorted({float(v) for v in a.values.split(",")})
    except ValueError:
        raise UserError(f"--values {a.values}: give comma-separated numbers of nats, e.g. 0,2,4") from None
    if not values or values[0] < 0 or values[-1] > 64:
        raise UserError(f"--values {a.values}: bonuses must lie in 0-64 nats")
    if not Path(a.data).is_file():
        raise UserError(f"--data {a.data}: no such distillation cache (a .jsonl under <cache>/distill)")
    if a.rows < 1:
        raise UserError("--rows must be at least 1")
    t0 = time.time()
    bb = load_backbone(a.backbone)
    head, meta = load_head(a.head, bb.fingerprint)
    if not head.c.copy_heads:
        raise UserError(f"--head {a.head}: this head has no copy read (trained with --copy-heads 0); nothing to tune")
    held = held_out_rows(a.data, **split_of(meta))
    if not held:
        raise UserError(f"--data {a.data}: no held-out rows of this head's corpus in it; pass the cache it trained on")
    random.Random(0).shuffle(held)
    held = held[: a.rows]
    best, sweep = tune_copy_exact(head, bb, held, head.c.K, values, a.tie)
    save_head(with_copy_exact(head, best), a.out, {**meta, "init_head": a.head, "copy_exact_sweep": sweep})
    res = {"backbone": a.backbone, "head": a.head, "out": a.out, **sweep, "seconds": round(time.time() - t0, 1)}
    print(json.dumps(res, indent=1))
    if a.json:
        write_text_atomic(a.json, json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.exit(run_main(main, "tune_copy_exact.py"))
