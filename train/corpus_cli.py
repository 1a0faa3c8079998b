"""`mtplite distill` (add the backbone's continuations to a corpus) and `mtplite corpus info`."""
import json
import sys
import time


def cmd_distill(a):
    import torch

    from mtplite.errors import UserError
    from mtplite.model.load import load_backbone
    from mtplite.model.sampling import from_args
    from mtplite.train.distill import corpus_items, distill_corpus
    from mtplite.train.train import pick_device

    if a.max_new < 1:
        raise UserError(f"--max-new {a.max_new}: new tokens per prompt, at least 1")
    if a.batch < 1:
        raise UserError(f"--batch {a.batch}: prompts per batch, at least 1")
    sampler = from_args(a)
    if a.threads:
        torch.set_num_threads(a.threads)
    app = app_split(a.prompts)  # a bad file fails before the backbone loads
    dev = pick_device(a.device)
    bb = load_backbone(a.backbone)
    items = corpus_items(bb, app[0] if app else None)
    items = items[: a.limit] if a.limit else items
    bb.model.to(dev)
    numerics = f"float32 {dev.type}" + (f" ({torch.cuda.get_device_name()}, no TF32)" if dev.type == "cuda" else "")
    torch.backends.cuda.matmul.allow_tf32 = False
    meta = {"backbone": a.backbone, "backbone_fingerprint": bb.fingerprint, "numerics": numerics,
            "settings": {"prompt_format": "chat" if bb.chat else "plain", "torch": torch.__version__,
                         "prompts": app[2] if app else "built-in"}}
    if app:  # the held-out share travels with the corpus, so a head trained on it (--data) measures on it
        meta["eval_prompts"] = app[1]
    t0 = time.time()
    with dev:
        n = distill_corpus(bb.model, items, a.out, meta, a.max_new, bb.eos_ids, batch=a.batch,
                           budget_s=a.budget_minutes * 60 if a.budget_minutes else None, shard_rows=a.shard_rows,
                           sampler=sampler)
    print(json.dumps({"out": a.out, "rows_added": n, "seconds": round(time.time() - t0, 1)}))


def app_split(path):
    """(train rows, held-out eval rows, file name) of a user's --prompts FILE, or None without one."""
    if not path:
        return None
    from mtplite.data.app_prompts import eval_rows, load_app_prompts, split_app_prompts

    rows = load_app_prompts(path)
    train, held = split_app_prompts(rows)
    return train, eval_rows(held), rows[0]["source"]


def app_meta(app, metas=()):
    """head.json's record of the user's prompt file and the held-out prompts it is measured on (from --prompts, else
    from the corpus shards distilled with one)."""
    if app:
        return {"prompts_file": app[2], "eval_prompts": app[1]}
    held, files = {}, []
    for m in metas:
        for r in m.get("eval_prompts") or []:
            held.setdefault(r["id"], r)
        f = (m.get("settings") or {}).get("prompts")
        if m.get("eval_prompts") and f not in files:
            files.append(f)
    return {"prompts_file": ", ".join(files), "eval_prompts": list(held.values())} if held else {}


def cmd_corpus(a):
    from mtplite.data.corpus import corpus_info

    info = corpus_info(a.paths)
    if a.json:
        print(json.dumps(info))
    else:
        print(f"{info['backbone']} ({info['backbone_fingerprint']}): {info['rows']} rows, {info['tokens']} generated "
              f"tokens, {info['shards']} shards, {info['bytes'] / 1e6:.2f} MB; {', '.join(info['decoding'])}; numerics "
              f"{', '.join(info['numerics'])}")
        print("  rows per task: " + ", ".join(f"{k} {v}" for k, v in info["tasks"].items()), file=sys.stdout)


def register(sub):
    from mtplite.model.sampling import add_args

    d = sub.add_parser("distill", help="add the backbone's continuations of the training prompts to a corpus (greedy, "
                       "or sampled with --temperature)")
    d.add_argument("--backbone", default="gemma3-270m", help="gemma3-270m (default) | smollm2-135m | tiny:gemma3 | "
                   "a Hugging Face checkpoint dir | a .gguf file")
    d.add_argument("--prompts", metavar="FILE", help="distil your own prompts instead of the built-in ones: JSONL, one "
                   "{'prompt': ...} or {'messages': [...]} a line (optional 'task'); 10%% are held out for evaluation")
    d.add_argument("--out", required=True, help="corpus folder (e.g. corpora/gemma3-270m); prompts it holds are skipped")
    d.add_argument("--max-new", type=int, default=128, help="new tokens per prompt")
    d.add_argument("--batch", type=int, default=32, help="prompts per batch")
    d.add_argument("--shard-rows", type=int, default=256, help="rows per shard file (a stopped run loses at most one)")
    d.add_argument("--budget-minutes", type=float, default=None, help="stop adding shards after this long (default: "
                   "no limit)")
    d.add_argument("--limit", type=int, default=0, help="distil at most the first N prompts of the corpus order "
                   "(default 0: all)")
    d.add_argument("--device", default="auto", help="auto (CUDA when present) | cpu | cuda[:N]")
    d.add_argument("--threads", type=int, default=0, help="torch CPU threads (default 0: torch's choice)")
    add_args(d)  # sampled rows get ids of their own (prompt id ~ settings), so they sit beside the greedy ones
    d.set_defaults(fn=cmd_distill)
    c = sub.add_parser("corpus", help="inspect a distillation corpus")
    csub = c.add_subparsers(dest="corpus_cmd", required=True)
    i = csub.add_parser("info", help="rows, generated tokens, backbone fingerprint, numerics")
    i.add_argument("paths", nargs="+", help="corpus folders or shard files")
    i.add_argument("--json", action="store_true", help="one JSON record instead of text")
    i.set_defaults(fn=cmd_corpus)
