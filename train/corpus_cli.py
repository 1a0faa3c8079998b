"""`mtplite distill` (add the backbone's greedy continuations to a corpus) and `mtplite corpus info`."""
import json
import sys
import time


def cmd_distill(a):
    import torch

    from mtplite.errors import UserError
    from mtplite.model.load import load_backbone
    from mtplite.train.distill import corpus_items, distill_corpus
    from mtplite.train.train import pick_device

    if a.max_new < 1:
        raise UserError(f"--max-new {a.max_new}: greedy tokens per prompt, at least 1")
    if a.batch < 1:
        raise UserError(f"--batch {a.batch}: prompts per greedy batch, at least 1")
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = pick_device(a.device)
    bb = load_backbone(a.backbone)
    items = corpus_items(bb)[: a.limit] if a.limit else corpus_items(bb)
    bb.model.to(dev)
    numerics = f"float32 {dev.type}" + (f" ({torch.cuda.get_device_name()}, no TF32)" if dev.type == "cuda" else "")
    torch.backends.cuda.matmul.allow_tf32 = False
    meta = {"backbone": a.backbone, "backbone_fingerprint": bb.fingerprint, "numerics": numerics,
            "settings": {"prompt_format": "chat" if bb.chat else "plain", "torch": torch.__version__}}
    t0 = time.time()
    with dev:
        n = distill_corpus(bb.model, items, a.out, meta, a.max_new, bb.eos_ids, batch=a.batch,
                           budget_s=a.budget_minutes * 60 if a.budget_minutes else None, shard_rows=a.shard_rows)
    print(json.dumps({"out": a.out, "rows_added": n, "seconds": round(time.time() - t0, 1)}))


def cmd_corpus(a):
    from mtplite.data.corpus import corpus_info

    info = corpus_info(a.paths)
    if a.json:
        print(json.dumps(info))
    else:
        print(f"{info['backbone']} ({info['backbone_fingerprint']}): {info['rows']} rows, {info['tokens']} generated "
              f"tokens, {info['shards']} shards, {info['bytes'] / 1e6:.2f} MB; numerics {', '.join(info['numerics'])}")
        print("  rows per task: " + ", ".join(f"{k} {v}" for k, v in info["tasks"].items()), file=sys.stdout)


def register(sub):
    d = sub.add_parser("distill", help="add the backbone's greedy continuations of the training prompts to a corpus")
    d.add_argument("--backbone", default="gemma3-270m")
    d.add_argument("--out", required=True, help="corpus folder (e.g. corpora/gemma3-270m); prompts it holds are skipped")
    d.add_argument("--max-new", type=int, default=128, help="greedy tokens per prompt")
    d.add_argument("--batch", type=int, default=32, help="prompts per greedy batch")
    d.add_argument("--shard-rows", type=int, default=256, help="rows per shard file (a stopped run loses at most one)")
    d.add_argument("--budget-minutes", type=float, default=None)
    d.add_argument("--limit", type=int, default=0, help="distil at most the first N prompts of the corpus order")
    d.add_argument("--device", default="auto", help="auto (CUDA when present) | cpu | cuda[:N]")
    d.add_argument("--threads", type=int, default=0)
    d.set_defaults(fn=cmd_distill)
    c = sub.add_parser("corpus", help="inspect a distillation corpus")
    csub = c.add_subparsers(dest="corpus_cmd", required=True)
    i = csub.add_parser("info", help="rows, generated tokens, backbone fingerprint, numerics")
    i.add_argument("paths", nargs="+")
    i.add_argument("--json", action="store_true")
    i.set_defaults(fn=cmd_corpus)
