"""`mtplite generate OUT` on LiteRT and `mtplite bench`."""
import json
import sys

from mtplite.errors import UserError


def print_result(text, res, K, a, extra=None):
    """What `mtplite generate` prints (torch reference or bundle): the text, or with --json the whole record."""
    from mtplite.model.generate import summary

    if a.stop:
        for s in a.stop:
            if s in text:
                text = text[: text.index(s)]
    doc = {"text": text, "tokens": res["tokens"], "stop_reason": res["stop_reason"],
           "stop_token": res.get("stop_token"), **summary(res, K),
           "mtp": K > 0, "K": K, **(extra or {})}
    if a.json:
        print(json.dumps(doc))
    else:
        print(text)
        if K:
            print(f"[accept_length {doc['accept_length'] or 0:.2f} over {doc['cycles']} cycles]", file=sys.stderr)


def generate_bundle(a):
    """`mtplite generate OUT`: a thin CLI over the Python API (runtime/api.py)."""
    from mtplite.runtime.api import load

    if a.stream and a.json:
        raise UserError("--stream prints the text as it comes and --json prints one record at the end: choose one")
    m = load(a.bundle, threads=a.threads, draft="off" if a.no_mtp else a.draft, gate=not a.no_gate,
             context=not a.no_context, exact=a.exact)
    if a.k and m.K:
        if a.k != m.bundle.K:
            raise UserError(f"--k {a.k}: this bundle's verify graph checks exactly K={m.bundle.K} drafts; re-export "
                            "with --k")
        m.K, m.why = a.k, f"{m.draft} drafting, K={a.k} (--k)"
    print(f"mtplite: {m.why}" + (f", the head's drafts gated at p >= {m.min_prob} (settings.min_prob)"
                                  if m.K and m.min_prob else ""), file=sys.stderr)
    kw = dict(max_new_tokens=a.max_new_tokens, temperature=a.temperature, top_k=a.top_k, top_p=a.top_p, seed=a.seed,
              stop=a.stop)
    if a.stream:
        for piece in m.generate(a.prompt, stream=True, **kw):
            print(piece, end="", flush=True)
        print()
        g = m.last
    else:
        g = m.generate(a.prompt, **kw)
    doc = {"text": g.text, "tokens": g.tokens, "stop_reason": g.stop_reason, "tokens_per_s": g.tokens_per_s,
           "decode_tokens_per_s": g.tokens_per_s, "ttft_s": g.ttft_s, "accept_length": g.accept_length,
           "mtp": g.K > 0, "K": g.K, "draft": g.draft, "runtime": "litert", **g.stats}
    if a.json:
        print(json.dumps(doc))
        return
    if not a.stream:
        print(g.text)
    speed = f", {g.tokens_per_s:.1f} tok/s" if g.tokens_per_s else ""
    acc = f", accept length {g.accept_length:.2f} over {g.stats['cycles']} cycles" if g.accept_length else ""
    print(f"[{len(g.tokens)} tokens{speed}{acc}; stopped: {g.stop_reason}]", file=sys.stderr)


MODES = ("plain", "mtp", "lookup", "hybrid", "mtp+gate", "hybrid+gate", "standalone", "mtp+ctx", "hybrid+ctx",
         "mtp+ctx+gate", "hybrid+ctx+gate")
DEFAULT_MODES = ("plain", "mtp", "mtp+ctx", "lookup", "hybrid", "hybrid+ctx", "mtp+gate", "hybrid+gate", "standalone")


def cmd_bench(a):
    from mtplite.paths import write_text_atomic
    from mtplite.runtime.bench import bench, markdown, plot
    from mtplite.data.benchmark import bundle_prompts

    prompts = bundle_prompts(a.out, a.prompts)
    if a.limit:
        prompts = prompts[: a.limit]
    modes = tuple(m.strip() for m in a.modes.split(",") if m.strip())
    bad = [m for m in modes if m not in MODES]
    if bad or "plain" not in modes:
        raise UserError(f"--modes {a.modes}: choose from {','.join(MODES)} (plain is required)")
    also = []
    for x in a.also:
        name, _, d = x.partition("=")
        if not d or not name.isidentifier():
            raise UserError(f"--also {x}: write NAME=DIR, NAME of letters, digits and _ (e.g. --also float=out-float)")
        also.append((name, d))
    from mtplite.model.sampling import from_args

    from mtplite.runtime.summary import compact, to_csv, verdict

    sampler = from_args(a)
    if a.repeat < 1:
        raise UserError(f"--repeat {a.repeat}: runs of the whole bench, at least 1")
    runs = []
    for i in range(a.repeat):
        if a.repeat > 1:
            print(f"[bench] run {i + 1} of {a.repeat}", file=sys.stderr)
        runs.append(bench(a.out, prompts, max_new=a.max_new_tokens, modes=modes, threads=a.threads,
                          engine=not a.no_engine, exact=a.exact or None, also=also, sampler=sampler))
    res = runs[-1]  # tables and outputs of the last run, the speedups of every run
    if len(runs) > 1:
        res["repeats"] = [{"ratios": r["ratios"], **({"engine": r["engine"]} if "engine" in r else {})} for r in runs]
    print(verdict(res))
    print(compact(res) if a.compact else markdown(res))
    if a.json:
        write_text_atomic(a.json, json.dumps(res, indent=1))
    if a.csv:
        write_text_atomic(a.csv, to_csv(res))
    if a.plot:
        plot(res, a.plot)


def add_run_args(p, max_new, what):
    """The options every command that runs a bundle over the benchmark prompts takes."""
    p.add_argument("--prompts", metavar="FILE",
                   help="JSONL of prompts ({'prompt': ...} or {'messages': [...]}, optional 'id' and 'task') to run on, "
                        "every line (default: the prompts the head held out of its --prompts file, else the benchmark "
                        "prompts in mtplite/data/bench_prompts.jsonl)")
    p.add_argument("--max-new-tokens", type=int, default=max_new, help="new tokens per prompt")
    p.add_argument("--threads", type=int, default=2, help="CPU threads for LiteRT")
    p.add_argument("--json", help=f"write the {what} here (atomically)")


def add_view_args(p):
    """--compact / --csv for the commands that print a bench table (bench, report)."""
    p.add_argument("--compact", action="store_true", help="print speedups per task and mode in under 100 columns "
                   "instead of the full table")
    p.add_argument("--csv", metavar="FILE", help="also write the table as CSV here (task, mode, tok/s, τ, speedup)")


def register(sub):
    b = sub.add_parser("bench", help="plain vs MTP vs prompt lookup vs hybrid (+ official engine), side by side")
    b.add_argument("out", help="a bundle directory (the --out of export)")
    add_run_args(b, 64, "results")
    b.add_argument("--modes", default=",".join(DEFAULT_MODES),
                   help="'+gate': the head drafts only while it is sure (settings.min_prob from calibrate); '+ctx': "
                        "it also drafts the text's own ids outside its draft vocabulary, all K drafts in one call (drafter_ctx.tflite). All: "
                        + ",".join(MODES))
    b.add_argument("--limit", type=int, default=0, help="run only the first N prompts (default 0: all)")
    b.add_argument("--no-engine", action="store_true", help="skip the official litert_lm engine rows")
    b.add_argument("--repeat", type=int, default=1, help="run the whole bench N times; speedups get ± over the runs")
    add_view_args(b)
    b.add_argument("--plot", metavar="PNG", help="also draw the speeds into this PNG")
    b.add_argument("--exact", action="store_true",
                   help="force plain steps through the verify graph (taken by itself where the load-time probe finds "
                        "that decode and verify row 0 round differently)")
    b.add_argument("--also", action="append", default=[], metavar="NAME=DIR",
                   help="another bundle of the same backbone (float, int4, another head): plain, MTP and mtp+ctx, "
                        "interleaved")
    from mtplite.model.sampling import add_args

    add_args(b)
    b.set_defaults(fn=cmd_bench)
