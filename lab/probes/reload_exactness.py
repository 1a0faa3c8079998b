"""How often does a freshly loaded Bundle's speculative output part from plain decoding, when Bundles of the same
files are loaded and freed one after another (what tests, bench and calibrate do)?

Runs both ways: `ours` (the load-time probe runs on the Bundle's own buffers, as shipped) and `own_buffers` (the
probe makes buffers for each run and frees them, as before session 32; ~1 load in 40 then never wrote verify's logits).

  python lab/probes/reload_exactness.py BUNDLE_DIR [--loads 60] [--json OUT]
"""
import argparse
import gc
import json

from mtplite.export import exactness
from mtplite.model import generate as G
from mtplite.runtime import litert
from mtplite.runtime.litert import Bundle, encode, load_tokenizer

PROMPT = "Hello world, this is"


def broken_loads(path, loads, ids, eos):
    b = Bundle(path, threads=1, context=True)
    plain = G.run(ids, b.steps(), max_new_tokens=20, eos_ids=eos, K=0, cache_len=b.C)["tokens"]
    bad = []
    for i in range(loads):
        del b
        gc.collect()
        b = Bundle(path, threads=1, context=True)
        if G.run(ids, b.steps(), max_new_tokens=20, eos_ids=eos, K=3, cache_len=b.C)["tokens"] != plain:
            bad.append(i)
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--loads", type=int, default=60)
    ap.add_argument("--json")
    a = ap.parse_args()
    b = Bundle(a.bundle, threads=1)
    ids, eos = encode(load_tokenizer(a.bundle), b.man, PROMPT), set(b.man["eos_ids"])
    del b
    shipped, out = exactness._run, {}
    for way in ("ours", "own_buffers"):
        # the probe before session 32: fresh buffers for every run, freed when the run returns
        fresh = lambda m, sig, sigs, bufs, *r: shipped(m, sig, sigs, exactness._buffers(m, sig, sigs), *r)
        exactness._run = fresh if way == "own_buffers" else shipped
        try:
            bad = broken_loads(a.bundle, a.loads, ids, eos)
        except litert.UserError as e:  # the shipped probe refusing a broken load counts as caught, not broken
            bad = [f"refused: {e}"]
        out[way] = {"loads": a.loads, "parted_from_plain": bad}
        print(f"{way}: {len(bad)} of {a.loads} loads parted from plain {bad}")
    exactness._run = shipped
    if a.json:
        json.dump(out, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
