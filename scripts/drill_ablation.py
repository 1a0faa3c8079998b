"""Do copy drills teach the head to copy? Two heads, same seed, same training budget, same number of distilled
training tokens: A on the topic corpus only, B with part of it replaced by copy drills (prompts whose specifics are
random, mtplite.data.drill_prompts). Both are scored teacher-forced on the held-out templates of the topic corpus,
on held-out drill templates, and on the benchmark prompts (evaluation only: greedy continuations made here, never
trained on), per task type, with the copy probe's split on the benchmark prompts.

  python scripts/drill_ablation.py --data DISTILL.jsonl [--drills 36] [--minutes 12] [--seed 0] [--json out.json]

DISTILL.jsonl is a distillation cache of the backbone (96 new tokens); the drills are distilled into it if missing.
"""
import argparse
import json
import sys
import time
from collections import defaultdict

import torch

from mtplite.data import drill_prompts, training_prompts
from mtplite.errors import UserError, run_main
from mtplite.model.load import load_backbone
from mtplite.paths import write_text_atomic
from mtplite.runtime.bench import default_prompts
from mtplite.train.distill import distill, fast_decode, format_prompt, greedy_batch, load_rows
from mtplite.train.train import evaluate, split_rows, train_head

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from copy_probe import probe  # noqa: E402


def n_gen(rows):
    return sum(len(r["tokens"]) - r["prompt_len"] for r in rows)


def bench_rows(bb, path, max_new):
    ps = [json.loads(line) for line in open(path)]
    seqs = [format_prompt(bb, p["prompt"]) for p in ps]
    outs = []
    with fast_decode(bb.model, torch.float32):
        for i in range(0, len(seqs), 16):
            outs += greedy_batch(bb.model, seqs[i : i + 16], max_new, set(bb.eos_ids))
    return [{"id": p["id"], "task": p["task"], "prompt_len": len(s), "tokens": s + c} for p, s, c in zip(ps, seqs, outs)]


def score(bb, head, K, sets):
    out = {}
    for name, rows in sets.items():
        by = defaultdict(list)
        for r in rows:
            by[r["task"]].append(r)
        out[name] = {"all": evaluate(head, bb, rows, K), **{t: evaluate(head, bb, rs, K) for t, rs in sorted(by.items())}}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backbone", default="gemma3-270m")
    ap.add_argument("--data", required=True)
    ap.add_argument("--drills", type=int, default=36, help="drill prompts per drill template")
    ap.add_argument("--minutes", type=float, default=12, help="training budget per head")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--max-new", type=int, default=96)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0, help="training seed of both heads (the held-out split stays fixed)")
    ap.add_argument("--prompts", help="benchmark prompts JSONL (default ../shared/prompts/tasks.jsonl)")
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.drills < 1 or a.minutes <= 0 or a.epochs < 1:
        raise UserError(f"--drills {a.drills}, --epochs {a.epochs}, --minutes {a.minutes:g}: drills and epochs must be "
                        ">= 1 and minutes > 0")
    torch.manual_seed(a.seed)
    bb = load_backbone(a.backbone)
    corpus = {p["id"]: p for p in training_prompts()}
    cached = load_rows(a.data)
    topic = [{**r, "template": corpus[r["id"]]["template"]} for r in cached.values()
             if r["id"] in corpus and "-d" not in r["id"]]
    if not topic:
        raise UserError(f"{a.data}: no cached rows of the topic corpus; run `mtplite train` or quickstart first")
    per = defaultdict(list)
    for p in drill_prompts():
        per[p["template"]].append(p)
    drills = distill(bb, [p for ps in per.values() for p in ps[: a.drills]], a.data, max_new=a.max_new, batch=64)
    t_train, t_val = split_rows(topic)
    d_train, d_val = split_rows(drills)
    # B keeps A's token count: drop topic rows from the end of A's (shuffled) list until the drills fit
    keep = list(t_train)
    while keep and n_gen(keep) + n_gen(d_train) > n_gen(t_train):
        keep.pop()
    arms = {"A_topics": t_train, "B_topics+drills": keep + d_train}
    bench = bench_rows(bb, a.prompts or default_prompts(), a.max_new)
    sets = {"heldout_topic_templates": t_val, "heldout_drill_templates": d_val, "benchmark_prompts": bench}
    res = {"backbone": a.backbone, "fingerprint": bb.fingerprint, "seed": a.seed, "minutes_per_head": a.minutes,
           "epochs": a.epochs,
           "K": a.k, "eval_rows": {k: len(v) for k, v in sets.items()}, "arms": {}}
    for name, rows in arms.items():
        t0 = time.time()
        head, info = train_head(bb, rows, K=a.k, epochs=a.epochs, budget_s=a.minutes * 60, seed=a.seed, val_rows=t_val,
                                log=lambda s: print(s, file=sys.stderr))
        pr = probe(bb, head, bench)
        res["arms"][name] = {"train_rows": len(rows), "train_tokens": n_gen(rows),
                             "drill_tokens": n_gen([r for r in rows if "-d" in r["id"]]),
                             "train_s": round(time.time() - t0, 1), "history": info["history"],
                             "accept_length": score(bb, head, a.k, sets),
                             "bench_copy_probe": {k: pr[k] for k in ("head_acc", "head_acc_on_copyable",
                                                                     "head_acc_when_no_match", "lookup_acc_when_match",
                                                                     "share_copyable")}}
        print(json.dumps({name: res["arms"][name]["accept_length"]}, indent=1), file=sys.stderr)
    print(json.dumps(res, indent=1))
    if a.json:
        write_text_atomic(a.json, json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.exit(run_main(main, "drill_ablation.py"))
