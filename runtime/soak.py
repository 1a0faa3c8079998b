"""`mtplite soak OUT`: one loaded bundle serves many sequential generations (mixed prompts, MTP and plain).

Reports resident memory (current RSS from /proc, not the peak) after the first generation and after the last, and
whether a prompt repeated at the start and at the end gives the same tokens. A leak in buffer handling or a
state that survives `reset()` shows up here long before it shows up on a phone.
"""
import json
import os
import sys
import time

from tqdm import tqdm

from mtplite.errors import UserError


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def soak(bundle_dir, prompts, n=200, max_new=32, threads=2, progress=True):
    from mtplite.model import generate as G
    from mtplite.runtime.litert import encode
    from mtplite.runtime.litert import Bundle, load_tokenizer

    b = Bundle(bundle_dir, threads=threads, mtp=True)
    tok = load_tokenizer(bundle_dir)
    eos = set(b.man["eos_ids"])
    ids = [encode(tok, b.man, p["prompt"]) for p in prompts]
    ids = [x for x in ids if len(x) + max_new < b.C]
    if not ids:
        raise UserError(f"{bundle_dir}: no prompt fits the bundle's cache of {b.C} tokens with {max_new} new tokens")
    probe = ids[0]
    t0 = time.time()
    rss, outs, n_tok = [], {}, 0
    for i in tqdm(range(n), desc="soak", unit="gen", disable=not progress):
        # generation 0 and n-1 are the probe prompt with MTP; in between, prompts and modes alternate
        first_or_last = i in (0, n - 1)
        x = probe if first_or_last else ids[i % len(ids)]
        K = b.K if first_or_last or i % 2 == 0 else 0
        res = G.run(x, b.steps(), max_new_tokens=max_new, eos_ids=eos, K=K, cache_len=b.C)
        n_tok += len(res["tokens"])
        if first_or_last:
            outs[i] = res["tokens"]
        rss.append(rss_bytes())
    first, last = rss[0], rss[-1]
    return {"bundle": str(bundle_dir), "generations": n, "tokens": n_tok, "seconds": round(time.time() - t0, 1),
            "rss_first_bytes": first, "rss_last_bytes": last, "rss_max_bytes": max(rss),
            "rss_growth": (last - first) / first, "repeated_prompt_identical": outs[0] == outs[n - 1],
            "rss_every_10": rss[::10]}


def register(sub):
    from mtplite.runtime.cli import add_run_args

    s = sub.add_parser("soak", help="many sequential generations on one loaded bundle: RSS growth and repeatability")
    s.add_argument("out", help="a bundle directory (the --out of export)")
    s.add_argument("--n", type=int, default=200, help="generations to serve from one loaded bundle")
    add_run_args(s, 32, "result")
    s.set_defaults(fn=cmd_soak)


def cmd_soak(a):
    from mtplite.paths import write_text_atomic
    from mtplite.data.benchmark import bundle_prompts

    if a.n < 2:
        raise UserError(f"--n {a.n}: a soak needs at least 2 generations")
    prompts = bundle_prompts(a.out, a.prompts)
    res = soak(a.out, prompts, n=a.n, max_new=a.max_new_tokens, threads=a.threads)
    text = json.dumps(res, indent=1)
    if a.json:
        write_text_atomic(a.json, text)
    print(text)
    print(f"mtplite soak: {res['generations']} generations, RSS {res['rss_first_bytes'] / 2**20:.1f} -> "
          f"{res['rss_last_bytes'] / 2**20:.1f} MiB ({res['rss_growth']:+.1%}), repeated prompt identical: "
          f"{res['repeated_prompt_identical']}", file=sys.stderr)
