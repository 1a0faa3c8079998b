"""`mtplite generate OUT` on LiteRT and `mtplite bench`."""
import json
import sys

from mtplite.errors import UserError


def settings_K(man, mtp_requested):
    """The K the runtime will use, and why. Speculation never switches itself off silently."""
    s = man.get("settings") or {}
    k = s.get("K", man["K"])
    if not mtp_requested:
        return 0, "plain decoding (--no-mtp)"
    if s.get("draft") == "off":
        return 0, f"drafting off: `mtplite calibrate` measured no speedup on this device ({s.get('reason', 'see manifest')})"
    if not isinstance(k, int) or not 1 <= k <= man["K"]:
        return man["K"], f"settings.K={k!r} invalid; using the exported K={man['K']}"
    return k, f"MTP with K={k} ({s.get('source', 'export default')})"


def settings_draft(man):
    """Who drafts by default: calibrate's choice (settings.draft), else the head."""
    return (man.get("settings") or {}).get("draft") or "mtp"


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
    from mtplite.model import generate as G
    from mtplite.runtime.litert import Bundle, encode, load_tokenizer
    from mtplite.runtime.lookup import DRAFT_WHO, drafting, source_counts

    b = Bundle(a.bundle, threads=a.threads, mtp=not a.no_mtp, exact=a.exact or None, context=not a.no_context)
    tok = load_tokenizer(a.bundle)
    K, why = settings_K(b.man, not a.no_mtp)
    if a.k and not a.no_mtp:
        if a.k != b.K:
            raise UserError(f"--k {a.k}: this bundle's verify graph checks exactly K={b.K} drafts; re-export with --k")
        K, why = a.k, f"MTP with K={a.k} (--k)"
    print(f"mtplite: {why}", file=sys.stderr)
    ids = encode(tok, b.man, a.prompt)
    if len(ids) >= b.C:
        raise UserError(f"prompt is {len(ids)} tokens but the bundle's cache holds {b.C}; shorten it or re-export "
                        f"with a larger --cache-length")
    stop = (lambda out: any(s in tok.decode(out, skip_special_tokens=True) for s in a.stop)) if a.stop else None
    on_tok = None
    if a.stream:
        on_tok = lambda t: print(tok.decode([t], skip_special_tokens=True), end="", flush=True, file=sys.stderr)
    draft = settings_draft(b.man) if a.draft == "auto" else a.draft
    # the head drafts only while it is as sure as calibrate found pays (settings.min_prob), as the Android app runs it
    b.min_prob = 0.0 if a.no_gate or draft == "lookup" else b.calibrated_min_prob()
    if K:
        print(f"mtplite: drafting with {DRAFT_WHO[draft].format(n=b.hybrid_min_ngram())}"
              + (" (settings.draft)" if a.draft == "auto" and draft != "mtp" else "")
              + (f", the head's drafts gated at p >= {b.min_prob} (settings.min_prob)" if b.min_prob else ""),
              file=sys.stderr)
    from mtplite.model.sampling import from_args

    steps, on_tok, source = drafting(b.steps(from_args(a)), ids, draft if K else "mtp", b.hybrid_min_ngram(), on_tok)
    res = G.run(ids, steps, max_new_tokens=a.max_new_tokens, eos_ids=set(b.man["eos_ids"]), K=K, cache_len=b.C,
                should_stop=stop, on_token=on_tok)
    n = len(res["tokens"])
    dec_s = res["total_s"] - res["ttft_s"]
    extra = {"ttft_s": res["ttft_s"], "decode_tokens_per_s": (n - 1) / dec_s if n > 1 and dec_s > 0 else None,
             "runtime": "litert", "stop_reason": res["stop_reason"], "draft": draft if K else None,
             **source_counts(source, res["trace"])}
    print_result(tok.decode(res["tokens"], skip_special_tokens=True), res, K, a, extra)


MODES = ("plain", "mtp", "lookup", "hybrid", "mtp+gate", "hybrid+gate", "standalone", "mtp+ctx", "hybrid+ctx",
         "mtp+ctx+gate", "hybrid+ctx+gate")
DEFAULT_MODES = ("plain", "mtp", "mtp+ctx", "lookup", "hybrid", "hybrid+ctx", "mtp+gate", "hybrid+gate", "standalone")


def cmd_bench(a):
    from mtplite.paths import write_text_atomic
    from mtplite.runtime.bench import bench, markdown, plot
    from mtplite.data.benchmark import default_prompts, load_prompts

    prompts = load_prompts(a.prompts or default_prompts())
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

    sampler = from_args(a)
    res = bench(a.out, prompts, max_new=a.max_new_tokens, modes=modes, threads=a.threads, engine=not a.no_engine,
                exact=a.exact or None, also=also, sampler=sampler)
    print(markdown(res))
    if a.json:
        write_text_atomic(a.json, json.dumps(res, indent=1))
    if a.plot:
        plot(res, a.plot)


def add_run_args(p, max_new, what):
    """The options every command that runs a bundle over the benchmark prompts takes."""
    p.add_argument("--prompts", help="JSONL with id/task/prompt (default: the benchmark prompts shipped in mtplite/data/bench_prompts.jsonl)")
    p.add_argument("--max-new-tokens", type=int, default=max_new)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", help=f"write the {what} here (atomically)")


def register(sub):
    b = sub.add_parser("bench", help="plain vs MTP vs prompt lookup vs hybrid (+ official engine), side by side")
    b.add_argument("out")
    add_run_args(b, 64, "results")
    b.add_argument("--modes", default=",".join(DEFAULT_MODES),
                   help="'+gate': the head drafts only while it is sure (settings.min_prob from calibrate); '+ctx': "
                        "it also drafts the text's own ids outside its draft vocabulary, all K drafts in one call (drafter_ctx.tflite). All: "
                        + ",".join(MODES))
    b.add_argument("--limit", type=int, default=0)
    b.add_argument("--no-engine", action="store_true", help="skip the official litert_lm engine rows")
    b.add_argument("--plot")
    b.add_argument("--exact", action="store_true",
                   help="force plain steps through the verify graph (taken by itself where the load-time probe finds "
                        "that decode and verify row 0 round differently)")
    b.add_argument("--also", action="append", default=[], metavar="NAME=DIR",
                   help="another bundle of the same backbone (float, int4, another head): plain, MTP and mtp+ctx, "
                        "interleaved")
    from mtplite.model.sampling import add_args

    add_args(b)
    b.set_defaults(fn=cmd_bench)
