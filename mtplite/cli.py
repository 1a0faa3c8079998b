"""mtplite command line: load -> train -> export -> quantize -> run -> report.

Every user mistake ends in one line on stderr naming the file or flag and the fix, exit code 2.
"""
import argparse
import json
import os
import sys
import time

def _warn_quiet():
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    logging.getLogger("transformers").setLevel(logging.ERROR)


def _copy_exact(text, copy_heads):
    """--copy-exact auto|NATS -> "auto" or a float (0 where the head has no copy read to sharpen)."""
    from mtplite.errors import UserError

    if text == "auto":
        return "auto"
    try:
        x = float(text)
    except ValueError:
        raise UserError(f"--copy-exact {text}: give auto or a number of nats (0-64), e.g. 2") from None
    if not 0 <= x <= 64:
        raise UserError(f"--copy-exact {text}: use 0-64 nats (auto picks one on the held-out rows)")
    if x and not copy_heads:
        raise UserError(f"--copy-exact {text}: the bonus sharpens the copy read; train with --copy-heads 2")
    return x


def cmd_train(a):
    import torch

    from mtplite.errors import UserError
    from mtplite.model.head import check_context, check_copy_heads
    from mtplite.model.load import load_backbone
    from mtplite.train.distill import check_echo
    from mtplite.train.train import pick_device, pick_dtype

    if a.k < 1:
        raise UserError(f"--k {a.k}: the head must draft at least 1 token per cycle")
    if a.draft_vocab < 16:
        raise UserError(f"--draft-vocab {a.draft_vocab}: use at least 16 (4096 is a good default)")
    check_echo(a.echo)
    check_copy_heads(a.copy_heads)
    check_context(a.context)
    a.copy_exact = _copy_exact(a.copy_exact, a.copy_heads)
    from mtplite.train.corpus_cli import app_split

    check_paths(data=a.data, init_head=a.init_head)
    a.app = app_split(a.prompts)  # a bad prompt file fails before the backbone loads
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads or torch.get_num_threads())
    dev = pick_device(a.device)
    t0 = time.time()
    bb = load_backbone(a.backbone)
    a.read_layers = _layers(a.read_layers, bb)  # checked before any distillation
    bb.model.to(dev)
    with dev:
        _train(a, bb, t0, pick_dtype(a.dtype, bb, dev,
                                     log=lambda s: print(f"mtplite: {s}", file=sys.stderr)))


def _train(a, bb, t0, dtype):
    from mtplite.data import training_prompts
    from mtplite.errors import UserError
    from mtplite.model.head import load_head
    from mtplite.train.corpus_cli import app_meta
    from mtplite.train.pipeline import build_head, distill_cache, generated_tokens, standalone_baseline, training_rows

    budget = a.budget_minutes * 60 if a.budget_minutes else None
    tq = None
    if a.target_quant:
        from mtplite.quantize.fakequant import fake_quantize_backbone_
        from mtplite.quantize.quantize import parse_recipe

        tq = parse_recipe(a.target_quant, "--target-quant")
    # greedy data depends on the numerics it came from: a quantized target gets its own cache file
    cache = distill_cache(bb, a.max_new, "" if not tq else "-q-" + "-".join(f"{g}{r}" for g, r in sorted(tq.items())))
    corpus = []
    # the user's own prompts (their held-out share never trained on) replace the built-in ones
    prompts = a.app[0][: a.prompt_limit or None] if a.app else training_prompts(seed=a.seed, limit=a.prompt_limit)
    if a.data:  # committed corpora replace this run's distillation; checked against the backbone first
        from mtplite.data.corpus import load_corpus
        from mtplite.train.distill import check_corpus

        if tq:
            raise UserError("--data with --target-quant: a corpus holds the float backbone's greedy tokens, not the "
                            "quantized one's; drop --data to distil against the quantized backbone")
        if a.echo:
            raise UserError("--echo distils new prompts, and --data trains on the corpus alone; distil them into "
                            "the corpus first (mtplite distill) or drop --data")
        corpus, metas = load_corpus(a.data)
        if not corpus:
            raise UserError(f"{' '.join(a.data)}: no corpus rows (shard-*.npz) found")
        check_corpus(bb, corpus, metas)
        if not a.app:
            prompts = []
    bb.model.to(dtype)
    if tq:  # the in-memory copy only; the backbone on disk and its fingerprint stay the float ones
        fake_quantize_backbone_(bb.model, tq)
    init, held = None, None
    if a.init_head:
        init, init_meta = load_head(a.init_head, bb.fingerprint)
        # a fine-tune keeps the templates its starting head held out: new rows must not move them into training
        held = init_meta.get("val_templates")
        if a.copy_exact not in ("auto", 0.0) and not init.c.copy_heads:  # before training, not after it
            raise UserError(f"--copy-exact {a.copy_exact:g}: {a.init_head} has no copy read to sharpen (it was trained "
                            "with --copy-heads 0); omit --copy-exact")
    # half the budget at most for new data; what is already cached is free
    rows = training_rows(bb, corpus, prompts, cache, dtype=dtype, budget_s=budget / 2 if budget else None,
                         echo=a.echo, seed=a.seed, max_new=a.max_new, all_cached=a.all_cached)
    left = budget - (time.time() - t0) if budget else None
    if left is not None and left < 5:
        raise UserError(f"--budget-minutes {a.budget_minutes} leaves no time to train after data; raise it")
    head = None
    if a.standalone is not None and os.path.exists(os.path.join(a.out, "head.json")):
        # an existing head for this backbone is kept: --standalone then only adds the baseline
        from mtplite.data.splits import split_rows

        head, kept = load_head(a.out, bb.fingerprint)
        train_rows = split_rows(rows, holdout=0.1, seed=a.seed, held=kept.get("val_templates"))[0]
        print("mtplite: keeping the trained head in --out; training only the standalone baseline", file=sys.stderr)
    if head is None:
        meta = {"backbone": a.backbone, "target_quant": tq, "init_head": a.init_head, "all_cached": a.all_cached,
                "data": a.data, **app_meta(a.app, metas if a.data else [])}
        head, doc, train_rows = build_head(
            bb, rows, a.out, meta, seed=a.seed, held=held, budget_s=left, log=lambda s: print(s, file=sys.stderr),
            K=a.k, draft_vocab_size=a.draft_vocab, read_layers=a.read_layers, copy_heads=a.copy_heads,
            epochs=a.epochs, batch=a.batch, lr=a.lr, dtype=dtype, init_head=init, context=a.context,
            copy_exact=a.copy_exact)
        bb.model.float()
        print(json.dumps({"out": a.out, "best_val_accept_length": doc["best_val_accept_length"],
                          "train_generated_tokens": generated_tokens(train_rows),
                          "seconds": round(time.time() - t0, 1)}))
    if a.standalone is not None:
        standalone_baseline(bb, train_rows, head, a.out, a.standalone, epochs=a.epochs, seed=a.seed)
        print(json.dumps({"out": a.out, "standalone": "standalone.safetensors", "seconds": round(time.time() - t0, 1)}))


def check_paths(data=None, init_head=None, head=None):
    """--data / --init-head / --head paths named by the flag the user typed, before any backbone loads."""
    from pathlib import Path

    from mtplite.errors import UserError

    for d in data or []:
        if not Path(d).exists():
            raise UserError(f"--data {d}: no such corpus folder or shard (e.g. corpora/gemma3-270m)")
    for flag, d in (("--init-head", init_head), ("--head", head)):
        if d and not (Path(d) / "head.json").is_file():
            raise UserError(f"{flag} {d}: no head.json there; give the directory `mtplite train` wrote")


def _layers(spec, bb):
    """--read-layers 5,11,17 -> [5, 11, 17], checked against the backbone; None = the default choice."""
    from mtplite.errors import UserError

    if not spec:
        return None
    try:
        out = sorted({int(x) for x in spec.split(",")})
    except ValueError:
        out = []
    n = bb.model.c.num_layers
    if not out or not all(0 <= i < n for i in out):
        raise UserError(f"--read-layers {spec}: give comma-separated layer indices in 0..{n - 1}")
    return out


def cmd_generate(a):
    from mtplite.errors import UserError

    if not a.prompt:
        raise UserError("--prompt is empty: give the text to continue")
    if a.max_new_tokens < 0:
        raise UserError("--max-new-tokens must be >= 0")
    from mtplite.model.sampling import from_args

    from_args(a)  # bad sampler settings are refused before anything loads
    if a.bundle:
        from mtplite.runtime.cli import generate_bundle

        return generate_bundle(a)
    if not a.backbone:
        raise UserError("give a bundle dir (mtplite generate OUT ...) or --backbone SPEC [--head DIR]")
    from mtplite.model import generate as G
    from mtplite.model.head import load_head
    from mtplite.model.load import load_backbone

    check_paths(head=None if a.no_mtp else a.head)
    bb = load_backbone(a.backbone)
    head, K = None, 0
    if not a.no_mtp:
        if not a.head:
            raise UserError("--head DIR is required for MTP (or pass --no-mtp for plain greedy)")
        head, _ = load_head(a.head, bb.fingerprint)
        K = a.k or head.c.K
        if K < 1:
            raise UserError(f"--k {K}: must be >= 1")
    from mtplite.model.load import format_prompt

    ids = format_prompt(bb, a.prompt)  # the chat template for instruction-tuned backbones, as in training
    cache = a.cache_length
    if len(ids) >= cache:
        raise UserError(f"prompt is {len(ids)} tokens; --cache-length {cache} must be larger")
    ctx = 0 if a.no_context or head is None else head.c.context
    from mtplite.runtime.lookup import drafting, source_counts

    draft = "mtp" if a.draft == "auto" else a.draft
    from mtplite.model.sampling import from_args

    sampler = from_args(a)
    steps, on_tok, source = drafting(G.torch_steps(bb, head, cache, exact=a.exact or None, context=ctx, sampler=sampler),
                                     ids, draft if K else "mtp")
    res = G.run(ids, steps, max_new_tokens=a.max_new_tokens, eos_ids=set(bb.eos_ids), K=K,
                cache_len=cache, should_stop=_stopper(bb, a.stop), on_token=on_tok)
    from mtplite.runtime.cli import print_result

    print_result(bb.decode(res["tokens"]), res, K, a, {"draft": draft if K else None, **source_counts(source, res["trace"])})


def _stopper(bb, stops):
    if not stops:
        return None
    return lambda ids: any(s in bb.decode(ids) for s in stops)


def cmd_export(a):
    from mtplite.errors import UserError
    from mtplite.export.export import export, load_standalone
    from mtplite.model.head import check_copy_heads, load_head
    from mtplite.model.load import load_backbone
    from mtplite.quantize.quantize import parse_recipe, quantizer

    try:
        prefill = sorted({int(x) for x in a.prefill_lengths.split(",") if x.strip()})
    except ValueError:
        raise UserError(f"--prefill-lengths '{a.prefill_lengths}': give comma-separated ints, e.g. 32,128") from None
    if not prefill or min(prefill) < 1:
        raise UserError("--prefill-lengths: give at least one positive length")
    log = lambda s: print(f"[export] {s}", file=sys.stderr)
    quantize = quantizer(parse_recipe(a.quant), log)
    check_paths(head=a.head)
    bb = load_backbone(a.backbone)
    head, doc = load_head(a.head, bb.fingerprint)
    check_copy_heads(head.c.copy_heads, f"{a.head}/head.json: copy_heads")
    man = export(bb, head, doc, a.out, cache_len=a.cache_length, prefill_lengths=prefill, quantize=quantize,
                 progress=log, standalone=load_standalone(a.head, bb))
    print(json.dumps({"out": a.out, "litertlm_bytes": man["litertlm_bytes"], "file_bytes": man["file_bytes"],
                      "quantization": man["quantization"], "export_seconds": man["export_seconds"]}))


class _Help(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the help already names it."""

    def _get_help_string(self, action):
        h = action.help or ""
        if ("default" in h or action.default is None or action.default is False or action.default == argparse.SUPPRESS
                or not action.option_strings
                or isinstance(action, argparse._VersionAction)):
            return h
        return f"{h} (default: %(default)s)"


def build_parser():
    from mtplite import __version__
    from mtplite.model.head import CONTEXT
    from mtplite.train.pipeline import BACKBONES, BATCH, EPOCHS, LR, MAX_NEW, head_options

    p = argparse.ArgumentParser(prog="mtplite", description=__doc__.splitlines()[0], formatter_class=_Help)
    p.add_argument("--version", action="version", version=f"mtplite {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=lambda **kw: argparse.ArgumentParser(
        formatter_class=_Help, **kw))

    t = sub.add_parser("train", help="self-distill data from the backbone and train an MTP head")
    t.add_argument("--out", required=True, help="directory to write head.json + head.safetensors into")
    head_options(t)
    t.add_argument("--read-layers", help="backbone layers whose KV the head reads, e.g. 5,11,16,17 (default: the last "
                                        "global layer + the last sliding one; the last layer where every layer is "
                                        "global)")
    t.add_argument("--copy-exact", default="auto",
                   help="nats added to the copy read's pointer where it reads a token near-exactly (auto = chosen "
                        "from 0, 2, 4, 8, 16 on the held-out rows after training; a number sets it; needs --copy-heads)")
    t.add_argument("--budget-minutes", type=float, default=None, help="wall-clock budget for distillation + training (default: none; training stops after --epochs)")
    t.add_argument("--prompt-limit", type=int, default=None, metavar="N",
                   help="distil at most the first N prompts (default: all)")
    # measured options off the default path; lab/notes/PERF.md has what each gained and cost
    x = t.add_argument_group("experimental", "off by default: measured in lab/notes/PERF.md, not (yet) on the main path")
    t.add_argument("--all-cached", action="store_true",
                   help="also train on every row already distilled for this backbone, --max-new and --target-quant "
                        "(earlier runs' prompts), not only this run's")
    t.add_argument("--data", nargs="+", metavar="PATH",
                   help="train on these distillation corpora (e.g. corpora/smollm2-135m) instead of distilling now")
    t.add_argument("--max-new", type=int, default=MAX_NEW, help="greedy tokens per new prompt (the corpora's)")
    t.add_argument("--epochs", type=int, default=EPOCHS, help="passes over the training rows")
    t.add_argument("--batch", type=int, default=BATCH, help="training sequences per step")
    t.add_argument("--lr", type=float, default=LR, help="AdamW learning rate")
    t.add_argument("--context", type=int, default=CONTEXT,
                   help="the head also drafts up to this many ids of the text outside its draft vocabulary (a copied "
                        "name or number); 0 = off; default 128")
    t.add_argument("--seed", type=int, default=0, help="seed of the head's init, shuffling and held-out split")
    t.add_argument("--threads", type=int, default=0, help="torch CPU threads (default 0: torch's choice)")
    x.add_argument("--target-quant", help="train against the backbone quantized with this recipe (int8, int4-b32, "
                   "backbone=int4-b32,embedder=int8): weights fake-quantized exactly as the LiteRT recipe rounds them")
    t.add_argument("--init-head", help="start from this trained head (e.g. fine-tune a float head for --target-quant)")
    x.add_argument("--standalone", type=float, nargs="?", const=0, default=None, metavar="MINUTES",
                   help="also train the standalone-drafter baseline (own embedding, layer, KV cache) on the same "
                        "rows, for MINUTES (default: --epochs)")
    t.set_defaults(fn=cmd_train)

    e = sub.add_parser("export", help="export backbone + head to LiteRT graphs and a .litertlm bundle (K and the "
                                      "context draft space are the head's)")
    e.add_argument("--backbone", default="gemma3-270m", help=BACKBONES)
    e.add_argument("--head", required=True, help="the directory `mtplite train` wrote")
    e.add_argument("--out", required=True, help="bundle directory: model.litertlm + android/")
    e.add_argument("--quant", default="none", help="none | int8 | int4-b32 | int8-h4 (int8, the head int4-b32) | "
                   "backbone=int8,head=int8,embedder=int8")
    e.add_argument("--cache-length", type=int, default=512, help="KV cache slots: prompt + answer must fit")
    e.add_argument("--prefill-lengths", default="32,128", help="prefill signatures' lengths, comma-separated (longer prompts are prefilled in chunks)")
    e.set_defaults(fn=cmd_export)

    from mtplite.export.contract import DRAFTS

    g = sub.add_parser("generate", help="greedy or MTP generation (torch reference or an exported bundle)")
    g.add_argument("bundle", nargs="?", help="an exported dir (runs on LiteRT); omit to use the torch reference")
    g.add_argument("--backbone", help="torch reference: the backbone spec (as in train); omit when giving a bundle dir")
    g.add_argument("--head", help="torch reference: the head directory (omit with --no-mtp)")
    g.add_argument("--prompt", required=True, help="the text to answer (through the chat template for instruction-tuned backbones)")
    g.add_argument("--max-new-tokens", type=int, default=64, help="at most this many new tokens")
    g.add_argument("--no-mtp", action="store_true", help="plain decoding, no drafting")
    g.add_argument("--k", type=int, default=0, help="drafts per cycle (default 0: the head's / the bundle's calibrated K)")
    g.add_argument("--cache-length", type=int, default=512, help="torch reference: KV cache slots")
    g.add_argument("--stop", action="append", help="stop string (repeatable)")
    g.add_argument("--json", action="store_true", help="print one JSON record (text, tokens, speed, acceptance)")
    g.add_argument("--stream", action="store_true", help="bundles: print the text to stdout as it is accepted")
    g.add_argument("--threads", type=int, default=2, help="CPU threads for LiteRT")
    g.add_argument("--exact", action="store_true",
                   help="force plain steps through the verify pass (LiteRT and torch); taken by itself wherever a "
                        "load-time probe finds that decode and verify row 0 round differently")
    g.add_argument("--no-context", action="store_true",
                   help="the head drafts from its draft vocabulary only, not also the text's own rarer ids")
    g.add_argument("--no-gate", action="store_true",
                   help="bundles: the head drafts every cycle, not only while it is sure (settings.min_prob)")
    g.add_argument("--draft", choices=("auto",) + DRAFTS, default="auto",
                   help="who drafts: the head, prompt lookup where the text repeats and the head elsewhere, or lookup "
                        "alone; auto = the bundle's calibrated choice (settings.draft), else mtp")
    from mtplite.model.sampling import add_args

    add_args(g)
    g.set_defaults(fn=cmd_generate)

    import importlib
    import importlib.util

    for mod in ("mtplite.train.corpus_cli", "mtplite.export.cli", "mtplite.quantize.quantize", "mtplite.runtime.cli",
                "mtplite.runtime.calibrate", "mtplite.runtime.quant_report", "mtplite.runtime.report",
                "mtplite.runtime.soak", "mtplite.quickstart"):
        if importlib.util.find_spec(mod) is not None:
            importlib.import_module(mod).register(sub)
    return p


def main(argv=None):
    a = build_parser().parse_args(argv)
    _warn_quiet()
    from mtplite.errors import run_main

    return run_main(lambda: a.fn(a))


if __name__ == "__main__":
    sys.exit(main())
