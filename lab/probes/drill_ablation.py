"""Do copy drills teach the head to copy? Two heads, same seed, same training budget, same number of distilled
training tokens: A on the topic corpus only, B with part of it replaced by copy drills (prompts whose specifics are
random, mtplite.data.drill_prompts). Both are scored teacher-forced on the held-out templates of the topic corpus,
on held-out drill templates, and on the benchmark prompts (evaluation only: greedy continuations made here, never
trained on), per task type, with the copy probe's split on the benchmark prompts.

  python lab/probes/drill_ablation.py --data DISTILL.jsonl [--drills 36] [--minutes 12] [--seed 0] [--json out.json]

DISTILL.jsonl is a distillation cache of the backbone (96 new tokens); the drills are distilled into it if missing.

--compare copy: the same scoring for the copy read (mtplite.model.head.CopyRead) instead: A = the attention-only head,
B = the same plus --copy-heads pointer heads over layer 0's V cache, both on the same rows (topics + drills) and the
same budget.

(The bigram-pointer and copy-only-ids arms were retired with those experiments, in git tag lab-before-retire-39;
the re-matching pointer arm in lab-before-redesign-39.) The JSON carries the title and description lab/results_page.py
prints above its table.
"""
import argparse
import json
import sys
import time
from collections import defaultdict

import torch

from mtplite.data import drill_prompts, is_drill, training_prompts
from mtplite.errors import UserError, run_main
from mtplite.model.head import MAX_COPY_HEADS, save_head
from mtplite.model.load import load_backbone
from mtplite.paths import write_text_atomic
from mtplite.data.benchmark import default_prompts, load_prompts
from mtplite.train.distill import distill, load_rows
from mtplite.train.train import accepted_runs, train_head
from mtplite.data.splits import SPLIT, split_rows

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "scripts"))  # lab/scripts/copy_probe.py
from copy_probe import probe  # noqa: E402


# what each comparison's arms differ in: the section title and text lab/results_page.py prints above the table
ARMS = {
    "drills": ("Copy drills",
               "Do copy drills (prompts whose specifics are random, `mtplite.data.drill_prompts`) teach the head to "
               "copy? Two heads per seed, same training budget ({minutes} min, {epochs} epochs at most) and the same "
               "number of distilled training tokens; B replaces part of A's topic rows with drills "
               "(`lab/probes/drill_ablation.py`)."),
    "copy": ("Copy read",
             "Does a pointer over the text make the head copy? A = the attention-only head, B = the same plus pointer "
             "heads over layer 0's V cache (`CopyRead` in model/head.py). Same rows (topics + drills), seed and budget "
             "({minutes} min, {epochs} epochs at most; `lab/probes/drill_ablation.py --compare copy`)."),
}


def n_gen(rows):
    return sum(len(r["tokens"]) - r["prompt_len"] for r in rows)


def bench_rows(bb, path, max_new):
    """The benchmark prompts' greedy continuations, made here and never cached (evaluation only)."""
    return distill(bb, load_prompts(path), None, max_new=max_new, batch=16, progress=False)


def score(bb, head, K, sets):
    """Teacher-forced accept_length per set, overall and per task: one backbone pass per row."""
    out = {}
    for name, rows in sets.items():
        by = defaultdict(list)
        for r in rows:
            by[r["task"]].append(r)
        runs = {t: accepted_runs(head, bb, rs, K) for t, rs in sorted(by.items())}
        every = torch.cat(list(runs.values()))
        out[name] = {"all": float(1 + every.mean()), **{t: float(1 + a.mean()) for t, a in runs.items() if len(a)}}
    return out


def probe_summary(pr):
    return {k: pr[k] for k in ("head_acc", "head_acc_on_copyable", "head_acc_when_no_match", "lookup_acc_when_match",
                               "share_copyable")}


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
    ap.add_argument("--prompts", help="benchmark prompts JSONL (default: the benchmark prompts shipped in mtplite/data/bench_prompts.jsonl)")
    ap.add_argument("--compare", choices=tuple(ARMS), default="drills")
    ap.add_argument("--copy-heads", type=int, default=2, help="pointer heads of arm B under --compare copy")
    ap.add_argument("--json")
    ap.add_argument("--save", help="directory to save each arm's head in (DIR/ARM)")
    a = ap.parse_args()
    if a.drills < 1 or a.minutes <= 0 or a.epochs < 1 or not 1 <= a.copy_heads <= MAX_COPY_HEADS:
        raise UserError(f"--drills {a.drills}, --epochs {a.epochs}, --minutes {a.minutes:g}, --copy-heads "
                        f"{a.copy_heads}: drills and epochs must be >= 1, minutes > 0, copy heads 1-{MAX_COPY_HEADS}")
    torch.manual_seed(a.seed)
    bb = load_backbone(a.backbone)
    corpus = {p["id"]: p for p in training_prompts()}
    cached = load_rows(a.data)
    topic = [{**r, "template": corpus[r["id"]]["template"]} for r in cached.values()
             if r["id"] in corpus and not is_drill(r["id"])]
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
    n = a.copy_heads
    if a.compare == "drills":
        arms = {"A_topics": (t_train, 0), "B_topics+drills": (keep + d_train, 0)}
    else:
        arms = {"A_attention": (t_train + d_train, 0), f"B_copy{n}": (t_train + d_train, n)}
    bench = bench_rows(bb, a.prompts or default_prompts(), a.max_new)
    sets = {"heldout_topic_templates": t_val, "heldout_drill_templates": d_val, "benchmark_prompts": bench}
    title, what = ARMS[a.compare]
    scoring = (f"Teacher-forced accept length (K={a.k}) on held-out topic templates ({len(t_val)} rows), held-out drill "
               f"templates ({len(d_val)}) and the {len(bench)} benchmark prompts (evaluation only); 'copyable right' = "
               "benchmark positions where lookup's copy is right and the head's first draft is too.")
    res = {"title": title, "description": what.format(minutes=f"{a.minutes:g}", epochs=a.epochs) + " " + scoring,
           "compare": a.compare, "backbone": a.backbone, "fingerprint": bb.fingerprint, "seed": a.seed,
           "minutes_per_head": a.minutes,
           "epochs": a.epochs,
           "K": a.k, "eval_rows": {k: len(v) for k, v in sets.items()}, "arms": {}}
    for name, (rows, copy_heads) in arms.items():
        t0 = time.time()
        head, info = train_head(bb, rows, K=a.k, epochs=a.epochs, budget_s=a.minutes * 60, seed=a.seed, val_rows=t_val,
                                log=lambda s: print(s, file=sys.stderr), copy_heads=copy_heads)
        if a.save:
            save_head(head, f"{a.save}/{name}", {"backbone": a.backbone, "backbone_fingerprint": bb.fingerprint,
                                                  "split": SPLIT, "seed": a.seed, "train_generated_tokens": n_gen(rows),
                                                  "train_sequences": len(rows), "val_sequences": len(t_val),
                                                  **{k: info[k] for k in ("history", "steps", "train_s",
                                                                          "best_val_accept_length")}})
        pr = probe(bb, head, bench)
        res["arms"][name] = {"train_rows": len(rows), "train_tokens": n_gen(rows), "copy_heads": copy_heads,
                             "drill_tokens": n_gen([r for r in rows if is_drill(r["id"])]),
                             "train_s": round(time.time() - t0, 1), "steps": info["steps"],
                             "history": info["history"],
                             "accept_length": score(bb, head, a.k, sets),
                             "bench_copy_probe": probe_summary(pr)}
        print(json.dumps({name: res["arms"][name]["accept_length"]}, indent=1), file=sys.stderr)
    print(json.dumps(res, indent=1))
    if a.json:
        write_text_atomic(a.json, json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.exit(run_main(main, "drill_ablation.py"))
