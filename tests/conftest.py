import os
import warnings

import pytest

warnings.filterwarnings("ignore")

FAMILIES = ["tiny:gemma3", "tiny:qwen3", "tiny:llama"]

PROMPTS = [
    "Hello world, this is", "The three primary colors are", "Things Alex needs for a moving day plan:\n-",
    "Chat between two friends.\nA: hi\nB:", "def add(a, b):\n    return", "Once upon a time",
    "Key points from the memo:\n-", "Q: why is the sky blue?\nA:", "SELECT name FROM users", "Dear team,",
    "Steps to bake bread:\nStep 1:", "The weather today is", "Make this formal: hey", "In short,", "Customer: hi",
    "import numpy as np\n", "Diary entry, Monday.", "A list of fruits: apple,", "class Node:\n", "TL;DR:",
    "x", "The the the the",
]


def script(name):
    """A script of scripts/ or the lab (lab/, lab/scripts/, lab/probes/) as a module (they are not a package)."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    path = next(p for d in ("scripts", "lab", "lab/scripts", "lab/probes") if (p := root / d / f"{name}.py").exists())
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# What makes a test slow here: training a head, exporting a bundle, compiling Kotlin, a subprocess. Marked by what the
# test calls, so a new test lands in the right tier without anyone remembering to mark it.
SLOW_CALLS = ("trained(", "bundle(", "qbundle(", "train_head(", "build_head(", "distill(", "distill_corpus(",
              "subprocess", "_cli(", "cli(", "kotlinc", "export(", "bench(", "calibrate(", "main(")


def pytest_collection_modifyitems(config, items):
    import inspect

    def source(fn):
        try:
            return inspect.getsource(fn)
        except (OSError, TypeError):
            return ""

    for item in items:
        fns = [getattr(item, "function", None)]  # the test and the fixtures it uses (a module fixture may export)
        fns += [d.func for defs in getattr(item, "_fixtureinfo").name2fixturedefs.values() for d in defs]
        if any(c in source(fn) for fn in fns if fn is not None for c in SLOW_CALLS):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def _cache(tmp_path_factory):
    os.environ["MTPLITE_CACHE"] = str(tmp_path_factory.mktemp("mtplite-cache"))


_trained = {}


def trained(spec, K=3):
    """A tiny backbone and a head trained for a few seconds on its own greedy outputs (cached per session)."""
    if (spec, K) not in _trained:
        from mtplite.data import training_prompts
        from mtplite.model.load import load_backbone
        from mtplite.paths import cache_dir
        from mtplite.train.distill import distill
        from mtplite.train.train import train_head
        from mtplite.data.splits import split_rows

        bb = load_backbone(spec)
        rows = distill(bb, training_prompts(limit=256), cache_dir() / f"{bb.fingerprint}.jsonl", max_new=48, batch=32,
                       progress=False)
        tr, va = split_rows(rows)
        # tiny:llama's head has the copy read and its carried read-position code, so every llama test (exactness,
        # export, runtime) covers them too
        copy = 2 if spec == "tiny:llama" else 0
        # tiny:gemma3's and tiny:qwen3's heads train with the context draft space (the text's own ids outside their
        # draft vocabulary), so their bundles carry drafter_ctx; tiny:llama's covers a head without one
        head, info = train_head(bb, tr, K=K, draft_vocab_size=256, epochs=6, batch=16, lr=2e-3, val_rows=va,
                                progress=False, log=lambda s: None, copy_heads=copy,
                                context=0 if spec == "tiny:llama" else 64)
        if copy:  # drafting with copy_exact too (the head trained without it), so the llama tests cover it
            from mtplite.model.head import with_copy_exact

            head = with_copy_exact(head, 2.0)
        _trained[(spec, K)] = (bb, head, rows, va, info)
    return _trained[(spec, K)]
