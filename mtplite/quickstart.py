"""`mtplite quickstart`: self-distill -> train -> export (int8-h4) -> calibrate -> bench, on the built-in default.

Every step writes into a cache dir (default ~/.cache/mtplite/quickstart/<backbone>) and is skipped on a re-run when
its output is already there and matches the backbone, so an interrupted quickstart resumes.
"""
import copy
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from mtplite.errors import UserError


def log(msg):
    print(f"[quickstart] {msg}", file=sys.stderr, flush=True)


def cmd_quickstart(a):
    import torch

    from mtplite.data import training_prompts
    from mtplite.data.benchmark import default_prompts, load_prompts
    from mtplite.data.splits import split_rows
    from mtplite.export.export import export
    from mtplite.model.head import CONTEXT, check_copy_heads, load_head
    from mtplite.model.load import load_backbone
    from mtplite.paths import cache_dir, write_text_atomic
    from mtplite.runtime.bench import bench, markdown, plot
    from mtplite.runtime.calibrate import calibrate
    from mtplite.train.distill import check_echo
    from mtplite.train.pipeline import (BATCH, EPOCHS, LR, build_head, distill_cache, generated_tokens,
                                        standalone_baseline, training_rows)
    from mtplite.train.train import pick_device, pick_dtype

    from mtplite.quantize.quantize import parse_recipe, quantizer

    quick = a.quick
    recipe = parse_recipe(a.quant)  # a bad recipe fails now, not after training
    check_copy_heads(a.copy_heads)
    check_echo(a.echo)
    from mtplite.train.corpus_cli import app_meta, app_split

    # the user's own prompts (a bad file fails now, not after training): trained on, less a held-out share the bundle
    # is measured on; without them the built-in prompts, measured on the benchmark prompts
    app = app_split(a.prompts)
    prompts = app[1] if app else load_prompts(default_prompts())
    budget = a.budget_minutes or (2.5 if quick else 45)  # --quick: export int8 alone takes ~5.6 min here
    root = Path(a.dir) if a.dir else cache_dir() / "quickstart" / (a.backbone.replace(":", "-").replace("/", "_")
                                                                      + ("-quick" if quick else "")
                                                                      + (f"-{Path(a.prompts).stem}" if app else ""))
    root.mkdir(parents=True, exist_ok=True)
    if quick:
        log("--quick: a small training budget; expect a lower accept length than the full run")
    t0 = time.time()
    steps = {}  # step -> seconds, so the results page can show where a fresh run's time goes

    def lap(name, since):
        steps[name] = round(time.time() - since, 1)
        log(f"{name}: {steps[name] / 60:.1f} min ({(time.time() - t0) / 60:.1f} min so far)")
        return time.time()

    log(f"loading backbone {a.backbone} (about a minute)")
    bb = load_backbone(a.backbone)
    t = lap("load", t0)
    log(f"backbone fingerprint {bb.fingerprint}; working dir {root}")
    head_dir = root / "head"
    head, dtype = None, None  # dtype: what distillation + training ran in, when they ran here
    if (head_dir / "head.json").exists():
        try:
            head, doc = load_head(head_dir, bb.fingerprint)
            log("head already trained: reusing it (delete the dir to retrain)")
        except UserError as e:
            log(f"cached head unusable ({e}); retraining")
    corpus = committed_corpus(bb) if head is None else []
    share = 0.2 if corpus else 0.55  # of the budget for new greedy data: a committed corpus leaves it to training
    bundle = root / f"bundle-{a.quant}"
    for line in plan(budget, share, corpus, head is not None, (bundle / "android" / "manifest.json").exists(),
                     quick, a.quant):
        log(line)
    train_rows = None
    if head is None:
        dev = pick_device(a.device)
        # real backbones (Gemma 262k, SmolLM2 49k vocab) distil 1.7-3x faster in bf16 where the hardware has it;
        # pick_dtype measures, since an AVX2-only CPU runs bf16 matmuls 50-100x slower than float32
        dtype = pick_dtype(a.dtype, bb, dev, log)
        # distil and train on a bf16 copy: the float weights are what gets exported, bit for bit
        work = dataclasses.replace(bb, model=copy.deepcopy(bb.model).to(dtype)) if dtype == torch.bfloat16 else bb
        work.model.to(dev)
        with dev:  # as in `mtplite train`: every tensor distill/train create lands on dev
            todo = app[0] if app else training_prompts(limit=300 if quick else None)
            rows = training_rows(work, corpus, todo, distill_cache(bb),
                                 dtype=dtype, budget_s=budget * 60 * share, echo=a.echo)
            t = lap("distill", t)
            log(f"training data: {len(rows)} rows ({len(corpus)} from the committed corpus), "
                f"{generated_tokens(rows)} generated tokens; training the head for up "
                f"to {max(budget * 60 - (time.time() - t0), 30) / 60:.0f} min")
            left = budget * 60 - (time.time() - t0)
            head, doc, train_rows = build_head(
                work, rows, head_dir, {"backbone": a.backbone, "corpus_rows": len(corpus), **app_meta(app)},
                budget_s=max(left, 30),
                log=log, K=a.k, draft_vocab_size=a.draft_vocab, epochs=EPOCHS, batch=BATCH, lr=LR, dtype=dtype,
                copy_heads=a.copy_heads, context=CONTEXT, copy_exact="auto")
        del work
        bb.model.cpu()
        t = lap("train", t)
        log(f"head trained on {doc['train_generated_tokens']} self-distilled tokens; held-out accept length "
            f"{doc['best_val_accept_length']:.2f}")
    if a.standalone is not None and not (head_dir / "standalone.json").exists():
        if train_rows is None:  # the head was reused: its rows again, from the corpus and the cache
            rows = training_rows(bb, committed_corpus(bb), [], distill_cache(bb), dtype=torch.float32, all_cached=True)
            train_rows = split_rows(rows, holdout=0.1, held=doc.get("val_templates"))[0]
        log(f"training the standalone-drafter baseline ({a.standalone} min)")
        standalone_baseline(bb, train_rows, head, head_dir, a.standalone)
        t = lap("standalone", t)
    man_path = bundle / "android" / "manifest.json"
    fresh = False
    if man_path.exists():
        man = json.loads(man_path.read_text())
        if man.get("backbone_fingerprint") != bb.fingerprint or man.get("head_fingerprint") is None:
            man_path.unlink()
    if not man_path.exists():
        log(f"exporting ({a.quant}) to {bundle} (expect ~{STAGE_MIN['export']} min)")
        from mtplite.export.export import load_standalone
        export(bb, head, doc, bundle, cache_len=a.cache_length, prefill_lengths=(32, 128),
               quantize=quantizer(recipe, log), progress=log, standalone=load_standalone(head_dir, bb))
        fresh = True
        t = lap("export", t)
    else:
        log("bundle already exported: reusing it")
    del bb
    if quick and not app:
        prompts = prompts[::3]
    man = json.loads(man_path.read_text())
    if fresh or (man.get("settings") or {}).get("source") != "mtplite calibrate":
        log(f"calibrating K on this device (expect ~{STAGE_MIN['calibrate']} min)")
        s = calibrate(bundle, None, threads=a.threads, n=6 if quick else 12, engine=not quick, progress=log)
        log(f"calibrate: settings.draft={s['draft']} ({s['reason']})")
        t = lap("calibrate", t)
    log(f"benchmarking {len(prompts)} prompts: plain / MTP / prompt lookup / hybrid"
        + ("" if quick else " / official engine") + f" (expect ~{STAGE_MIN['bench'] // (3 if quick else 1)} min)")
    res = bench(bundle, prompts, max_new=32 if quick else a.max_new_tokens, threads=a.threads, engine=not quick)
    lap("bench", t)
    res["quickstart"] = {"steps_s": steps, "total_s": round(time.time() - t0, 1), "budget_minutes": budget,
                         "quick": quick, "trained_here": "train" in steps,
                         "train_generated_tokens": doc.get("train_generated_tokens"),
                         "dtype": str(dtype).replace("torch.", "") if dtype else None,
                         "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                         "loadavg_15min_at_end": os.getloadavg()[2]}  # > threads means it shared the CPU
    write_text_atomic(root / "bench.json", json.dumps(res, indent=1))
    plot(res, root / "bench.png")
    print(markdown(res))
    man = json.loads(man_path.read_text())  # with calibrate's settings and engine record, written after it was read
    print(f"\nmtplite quickstart done in {(time.time() - t0) / 60:.1f} min\n"
          + closing(res, man.get("settings") or {}, a.threads, bundle, root, man.get("engine")))


# minutes each later stage took in a fresh Gemma 3 270M quickstart on the 2-core CI machine (lab/notes/PERF.md)
STAGE_MIN = {"export": 6, "calibrate": 3, "bench": 10}


def committed_corpus(bb):
    """The repo's corpus rows for this backbone (corpora/<spec>), checked against it; [] when there is none or it
    belongs to other weights (then quickstart distils afresh, as before corpora existed)."""
    from mtplite.data.corpus import load_corpus
    from mtplite.train.distill import check_corpus
    from mtplite.paths import repo_corpus

    path = repo_corpus(bb.spec)
    if not path.is_dir():
        return []
    rows, metas = load_corpus([path])
    if not rows:
        return []
    if metas[0]["backbone_fingerprint"] != bb.fingerprint:
        log(f"{path} was distilled from backbone {metas[0]['backbone_fingerprint']}, this one is {bb.fingerprint}: "
            "not using it")
        return []
    check_corpus(bb, rows, metas)
    return rows


def plan(budget, share, corpus, have_head, have_bundle, quick, quant):
    """What quickstart will do and roughly how long each stage takes, printed before the long stages start."""
    tokens = sum(len(r["tokens"]) - r["prompt_len"] for r in corpus)
    data = (f"the committed corpus ({len(corpus)} rows, {tokens} generated tokens) + new greedy rows for up to "
            f"{budget * share:.0f} min" if corpus else f"self-distil greedy rows for up to {budget * share:.0f} min")
    bench = STAGE_MIN["bench"] // (3 if quick else 1)
    stages = [("training data", "reuse the trained head" if have_head else data),
              ("train head", "skipped (head reused)" if have_head else f"the rest of the {budget:g}-min budget"),
              (f"export {quant}", "skipped (bundle reused)" if have_bundle else f"~{STAGE_MIN['export']} min"),
              ("calibrate", f"~{STAGE_MIN['calibrate']} min"),
              ("bench", f"~{bench} min" + ("" if quick else " (with the official engine)"))]
    total = (0 if have_head else budget) + (0 if have_bundle else STAGE_MIN["export"]) + STAGE_MIN["calibrate"] + bench
    return ["plan (times measured on a 2-core CPU with Gemma 3 270M; smaller backbones are faster):"] + \
        [f"  {i}. {name:<14} {what}" for i, (name, what) in enumerate(stages, 1)] + [f"  total about {total:.0f} min"]


def closing(res, settings, threads, bundle, root, engine=None):
    """The closing lines: each drafting mode's measured speedup, and which one `mtplite generate` uses by default
    (calibrate's choice): with a small head, prompt lookup alone can be the fastest, and the user must not read the
    MTP line as what they will get."""
    r = res["ratios"]
    # the head as generate runs it: the K-step drafter where the bundle has one, else the contract's per-step drafter
    head = "mtp+ctx" if "mtp+ctx/plain" in r else "mtp"
    tau = res["table"][head]["all"]["accept_length"]
    modes = [f"the MTP head {r[f'{head}/plain']['all']:.2f}x (accept length {tau:.2f})"]
    hy = next((k for k in ("hybrid+ctx+gate/plain", "hybrid+ctx/plain", "hybrid+gate/plain", "hybrid/plain") if k in r),
              "hybrid/plain")
    modes += [f"{name} {r[k]['all']:.2f}x" for k, name in ((hy, "hybrid (lookup + head)"),
                                                           ("lookup/plain", "prompt lookup alone")) if k in r]
    named = {"mtp": "the MTP head", "hybrid": "hybrid (prompt lookup, the head where lookup finds nothing)",
             "lookup": "prompt lookup alone (the head did not pay on this CPU)", "off": "no drafting (plain decoding)"}
    default = (f"  `mtplite generate` drafts with {settings['draft']} by default: "
               f"{named.get(settings['draft'], settings['draft'])}, because calibrate "
               f"{settings.get('reason', 'chose it')}\n" if settings.get("draft") else "")
    if settings.get("draft") == "off":  # calibrate switched drafting off: generate decodes plainly
        default = f"  `mtplite generate` decodes plainly by default (drafting off), because calibrate {settings.get('reason', '')}\n"
    from mtplite.export.bundle import engine_verdict

    from mtplite.runtime.summary import verdict

    return (f"  {verdict(res)}\n"
            f"  decode speedup vs plain (this CPU, {threads} threads): " + "; ".join(modes) + "\n" + default +
            f"  {engine_verdict(engine)}\n" +
            f"  MTP adds {res['memory']['drafter_bytes'] / 1e6:.1f} MB of weights and 0 KV bytes\n"
            f"  bundle: {bundle / 'model.litertlm'} (LiteRT-LM), {bundle / 'android'} (Android demo)\n"
            f"  results: {root / 'bench.json'}, {root / 'bench.png'}\n"
            f"  on a phone: adb push {bundle / 'android'} /sdcard/Android/data/dev.mtplite.demo/files/bundle "
            f"(see README: Run on a Pixel)")


def register(sub):
    from mtplite.train.pipeline import head_options

    q = sub.add_parser("quickstart", help="the main job: distill, train, export (int8, head int4), calibrate, bench")
    head_options(q)
    q.add_argument("--quick", action="store_true",
                   help="<= 10 minutes: 2.5-min training budget, 1/3 of the prompts, no engine rows; lower acceptance")
    q.add_argument("--budget-minutes", type=float, default=0, help="training budget (default 45, --quick 2.5)")
    q.add_argument("--dir", help="working dir (default under the user cache dir)")
    q.add_argument("--quant", default="int8-h4", help="int8-h4 (default: int8 backbone and embedder, int4-b32 head) | "
                   "int8 | int4-b32 | backbone=...,embedder=...,head=...")
    q.add_argument("--max-new-tokens", type=int, default=64, help="tokens per benchmark prompt")
    q.add_argument("--cache-length", type=int, default=512, help="the bundle's KV cache slots")
    q.add_argument("--threads", type=int, default=2, help="CPU threads for LiteRT (calibrate, bench)")
    q.add_argument("--standalone", type=float, nargs="?", const=8, default=None, metavar="MINUTES",
                   help="also train (for MINUTES, default 8) and bench the standalone-drafter baseline")
    q.set_defaults(fn=cmd_quickstart)
