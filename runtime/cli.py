"""`mtplite generate OUT` on LiteRT, `mtplite bench`, `mtplite calibrate`, `mtplite report`."""
import sys
from collections import defaultdict

from mtplite.errors import UserError
from mtplite.runtime.lookup import DRAFTS


def encode(tok, man, text):
    """Prompt ids as the backbone was trained and deployed: through its chat template when it has one (the
    template, recorded in the manifest by export, adds its own BOS), else BOS + the plain text."""
    if man.get("chat_template"):
        tok.chat_template = man["chat_template"]
        try:
            s = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)
        except Exception as e:  # a template is code from a file we did not write: its failure is a user error
            raise UserError(f"manifest.json: chat_template failed to render ({str(e).splitlines()[0][:100]})") from None
        return list(tok(s, add_special_tokens=False)["input_ids"])
    ids = list(tok(text, add_special_tokens=False)["input_ids"])
    return ([man["bos_id"]] if man.get("bos_id") is not None else []) + ids


def settings_K(man, mtp_requested):
    """The K the runtime will use, and why. Speculation never switches itself off silently."""
    s = man.get("settings") or {}
    k = s.get("K", man["K"])
    if not mtp_requested:
        return 0, "plain decoding (--no-mtp)"
    if k == "off":
        return 0, f"MTP off: `mtplite calibrate` measured no speedup on this device ({s.get('reason', 'see manifest')})"
    if not isinstance(k, int) or not 1 <= k <= man["K"]:
        return man["K"], f"settings.K={k!r} invalid; using the exported K={man['K']}"
    return k, f"MTP with K={k} ({s.get('source', 'export default')})"


CALIBRATION_PROMPTS = 24  # 4 per task of the shipped corpus
DRAFT_WHO = {"mtp": "the MTP head", "hybrid": "prompt lookup on matches of >= {n} tokens, else the MTP head",
             "lookup": "prompt lookup alone (plain steps where the text does not repeat)"}


def settings_draft(man):
    """Who drafts by default: calibrate's choice (settings.draft), else the head."""
    return (man.get("settings") or {}).get("draft") or "mtp"


def generate_bundle(a):
    from mtplite.cli import _print_result
    from mtplite.model import generate as G
    from mtplite.runtime.litert import Bundle, load_tokenizer
    from mtplite.runtime.lookup import drafting, source_counts

    b = Bundle(a.bundle, threads=a.threads, mtp=not a.no_mtp, exact=a.exact, context=not a.no_context)
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
    steps, on_tok, source = drafting(b.steps(), ids, draft if K else "mtp", b.hybrid_min_ngram(), on_tok)
    res = G.run(ids, steps, max_new_tokens=a.max_new_tokens, eos_ids=set(b.man["eos_ids"]), K=K, cache_len=b.C,
                should_stop=stop, on_token=on_tok)
    n = len(res["tokens"])
    dec_s = res["total_s"] - res["ttft_s"]
    extra = {"ttft_s": res["ttft_s"], "decode_tokens_per_s": (n - 1) / dec_s if n > 1 and dec_s > 0 else None,
             "runtime": "litert", "stop_reason": res["stop_reason"], "draft": draft if K else None,
             **source_counts(source, res["trace"])}
    _print_result(tok.decode(res["tokens"], skip_special_tokens=True), res, K, a, extra)


MODES = ("plain", "mtp", "lookup", "hybrid", "mtp+gate", "hybrid+gate", "standalone", "mtp+ctx", "hybrid+ctx",
         "mtp+ctx+gate", "hybrid+ctx+gate")
DEFAULT_MODES = ("plain", "mtp", "mtp+ctx", "lookup", "hybrid", "hybrid+ctx", "mtp+gate", "hybrid+gate", "standalone")


def cmd_bench(a):
    import json

    from mtplite.paths import write_text_atomic
    from mtplite.runtime.bench import bench, default_prompts, load_prompts, markdown, plot

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
    res = bench(a.out, prompts, max_new=a.max_new_tokens, modes=modes, threads=a.threads, engine=not a.no_engine,
                exact=a.exact, also=also)
    print(markdown(res))
    if a.json:
        write_text_atomic(a.json, json.dumps(res, indent=1))
    if a.plot:
        plot(res, a.plot)


GATES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def confident_len(probs, gate):
    """How many drafts the head keeps behind a gate: up to the first it gives less than `gate` (Bundle.draft's rule)."""
    return next((j for j, q in enumerate(probs) if q < gate), len(probs))


def predict_gate(cycles, t_dec, t_ver, t_dr, gate):
    """Predicted tokens per second of decoding when the head stops drafting at the first draft it gives less than
    `gate` probability. `cycles`: (probs of the K drafts, accepted count) recorded ungated. A gated-out first draft
    costs one drafter step plus a plain decode; a shorter draft is padded, and we count only its confident part. The
    drafter stops at the step that declines, so m < K confident drafts cost m + 1 drafter steps (Bundle.draft)."""
    tokens = secs = 0.0
    for probs, acc in cycles:
        m = confident_len(probs, gate)
        if m == 0:
            tokens, secs = tokens + 1, secs + t_dr + t_dec
        else:
            tokens, secs = tokens + min(acc, m) + 1, secs + min(m + 1, len(probs)) * t_dr + t_ver
    return tokens / secs if secs else 0.0


def predict_hybrid(counts, t_dec, t_ver):
    """Predicted speedup over plain decoding of a lookup or hybrid run. `counts`: tokens, plain decode steps (the
    first one after prefill included), cycles, and the seconds its drafting took in the loop (the head's cycles cost
    K drafter steps, lookup's only a scan of the text)."""
    secs = counts["plain"] * t_dec + counts["cycles"] * t_ver + counts["draft_s"]
    return counts["tokens"] * t_dec / secs if secs else 0.0


def calibrate(out, prompts=None, threads=2, max_new=48, progress=print, n=CALIBRATION_PROMPTS):
    """Measure decode / verify(K+1) / drafter step on this device and the head's acceptance and confidence, predict
    the speedup with and without a confidence gate, and write the decision into the manifest's settings.
    prompts None: n prompts of the templates the bundle's head held out in training."""
    import json
    import time
    from pathlib import Path

    import numpy as np

    from mtplite.model import generate as G
    from mtplite.paths import write_text_atomic
    from mtplite.runtime.litert import Bundle, load_tokenizer

    # the drafter `mtplite generate` runs by default: drafter_ctx where the bundle has one
    b = Bundle(out, threads=threads, mtp=True, context=True)
    tok = load_tokenizer(out)
    K = b.K
    if prompts is None:
        prompts = calibration_prompts(n, b.man.get("head_split"), b.man.get("head_val_templates"))

    def timeit(fn, n=15):
        fn()
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return float(np.median(ts))

    b.reset()
    pos = min(64, b.C - K - 2)
    t_dec = timeit(lambda: b.decode(1, pos))  # plain decoding runs decode back to back, as timed here
    # verify and drafter steps are timed inside the loop: each runs right after the other graph, with colder caches
    # than back to back (Gemma int8 here: a drafter step 1.9 ms in the loop vs 1.4 ms timed alone)
    depth, cyc, cycles, ver_s, dr_s = np.zeros(K), 0, [], 0.0, 0.0
    encoded = [encode(tok, b.man, p["prompt"]) for p in prompts]  # every calibration run below uses them
    for ids in encoded:
        b.record_probs = []  # the gate's cost (one softmax over the draft space) is part of the step we time
        r = G.run(ids, b.steps(), max_new_tokens=max_new, eos_ids=set(b.man["eos_ids"]),
                  K=K, cache_len=b.C)
        depth += np.array(r["per_depth"][:K], float)
        cyc += r["cycles"]
        ver_s, dr_s = ver_s + r["verify_s"], dr_s + r["draft_s"]
        cycles += [(probs, c["accepted"]) for probs, c in zip(b.record_probs, r["trace"])]
    b.record_probs = None
    if not cyc:
        raise UserError(f"{out}: the calibration prompts gave no draft cycle to time; pass longer --prompts")
    t_ver, t_dr = ver_s / cyc, dr_s / (cyc * K)
    acc = depth / max(cyc, 1)
    pred = {}
    for k in range(1, K + 1):
        tau = 1 + float(acc[:k].sum())
        pred[k] = tau * t_dec / (k * t_dr + t_ver)  # verify cost measured at K+1 (the only verify graph)
    gate_pred = {g: predict_gate(cycles, t_dec, t_ver, t_dr, g) * t_dec for g in GATES}
    gate = max(GATES, key=lambda g: (round(gate_pred[g], 3), -g))
    hybrid, hybrid_pred, lookup_pred, hybrid_per_pass = calibrate_lookup(b, encoded, max_new, t_dec, t_ver, gate)
    # who drafts by default: the head, hybrid (with the drafter generate runs) or lookup alone; ties go to the head.
    # The head is compared as the other two are, from a run of the loop with its drafting timed there: predict_gate,
    # which picks the gate, charges a declined draft one averaged drafter step, and on SmolLM2 it put the gated head
    # level with hybrid where hybrid ran 10% faster side by side (96 held-out prompts, notes/PERF.md session 22).
    default = "drafter_ctx" if b.use_context else "drafter"
    by_draft = {"mtp": predict_hybrid(draft_counts(b, encoded, max_new, "mtp", gate=gate), t_dec, t_ver),
                "hybrid": hybrid_pred[default][str(hybrid[default])], "lookup": lookup_pred}
    draft = max(DRAFTS, key=lambda d: (round(by_draft[d], 3), -DRAFTS.index(d)))
    sp = by_draft[draft]
    choice = K if sp > 1.05 else "off"
    mpath = Path(b.dir) / "manifest.json"
    man = json.loads(mpath.read_text())
    man["settings"] = {"K": choice, "min_prob": gate, "draft": draft, "source": "mtplite calibrate",
                       "predicted_speedup": round(sp, 3),
                       "reason": f"predicted {sp:.2f}x at K={K} drafting with "
                                 + DRAFT_WHO[draft].format(n=hybrid[default])
                                 + (f", the head's drafts gated at p >= {gate}" if gate and draft != "lookup" else ""),
                       "predicted_speedup_per_draft": {d: round(v, 3) for d, v in by_draft.items()},
                       "measured": {"decode_ms": 1e3 * t_dec, "verify_ms": 1e3 * t_ver, "drafter_step_ms": 1e3 * t_dr,
                                    "acceptance_per_depth": acc.tolist(), "cycles": cyc},
                       "predicted_speedup_per_k": {str(k): round(v, 3) for k, v in pred.items()},
                       "predicted_speedup_per_gate": {str(g): round(v, 3) for g, v in gate_pred.items()},
                       "hybrid_min_ngram": hybrid, "predicted_speedup_hybrid": hybrid_pred,
                       "tokens_per_pass_hybrid": hybrid_per_pass,
                       "prompts": len(prompts), "threads": threads,
                       "drafter": "drafter_ctx" if b.use_context else "drafter",
                       "calibrated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_text_atomic(mpath, json.dumps(man, indent=1))
    return man["settings"]


def draft_counts(b, encoded, max_new, draft, n=None, gate=0.0):
    """Tokens, plain decode steps (the first one after prefill included), cycles and drafting seconds of `draft`
    ('mtp' | 'lookup' | 'hybrid' copying matches of >= n tokens) on the prompts `encoded`, the head's drafts gated at
    `gate`."""
    from mtplite.model import generate as G
    from mtplite.runtime.lookup import drafting

    c = {"tokens": 0, "plain": 0, "cycles": 0, "draft_s": 0.0}
    b.min_prob = gate
    try:
        for ids in encoded:
            steps, on_tok, _ = drafting(b.steps(), ids, draft, min_ngram=n)
            r = G.run(ids, steps, max_new_tokens=max_new, eos_ids=set(b.man["eos_ids"]), K=b.K, cache_len=b.C,
                      on_token=on_tok)
            c["tokens"] += len(r["tokens"])
            c["plain"] += 1 + r["plain_steps"]
            c["cycles"] += r["cycles"]
            c["draft_s"] += r["draft_s"]
    finally:
        b.min_prob = 0.0
    return c


def calibrate_lookup(b, encoded, max_new, t_dec, t_ver, gate=0.0):
    """Predicted speedups of prompt lookup alone and of hybrid per shortest match it copies (HYBRID_NGRAMS), per
    drafter the bundle has, on the calibration prompts (`encoded`: their ids). Hybrid's head cycles run behind the
    head's gate, as the runtimes run them (the gate moves the best match length: on Gemma's ctx-1m head, gated,
    lookup's 1-token matches lose to the head). Returns hybrid's match length per drafter (near_tie_choice), the
    hybrid predictions, lookup's, and hybrid's tokens per backbone pass."""
    from mtplite.runtime.lookup import HYBRID_NGRAMS

    lookup_pred = round(predict_hybrid(draft_counts(b, encoded, max_new, "lookup"), t_dec, t_ver), 3)
    choice, pred, per_pass = {}, {}, {}
    default = b.use_context
    for name in ("drafter", "drafter_ctx") if "drafter_ctx" in b.models else ("drafter",):
        b.use_context = name == "drafter_ctx"
        counts = {n: draft_counts(b, encoded, max_new, "hybrid", n, gate) for n in HYBRID_NGRAMS}
        pred[name] = {str(n): round(predict_hybrid(c, t_dec, t_ver), 3) for n, c in counts.items()}
        per_pass[name] = {str(n): round(c["tokens"] / max(c["plain"] + c["cycles"], 1), 3) for n, c in counts.items()}
        choice[name] = near_tie_choice(pred[name], per_pass[name])
    b.use_context = default
    return choice, pred, lookup_pred, per_pass


# Predicted speedups closer than this are a tie: the cost model has erred by up to 1.8% on which match length is faster
# (Gemma ctx-1m, gated: 24 held-out prompts predicted >= 1 1.0% ahead of >= 2, measured side by side on 36 others
# >= 2 ran 0.8% ahead; on 96 held-out prompts >= 1 ran 1.4% ahead; notes/PERF.md, sessions 20-21).
NEAR_TIE = 0.02


def near_tie_choice(pred, per_pass, tie=NEAR_TIE):
    """Hybrid's shortest match: among the choices predicted within `tie` of the fastest (which the cost model cannot
    order), the one with the most tokens per backbone pass (the same text from fewer runs of the big model), then the
    shorter match. pred / per_pass: {str(n): value}."""
    best = max(pred.values())
    close = [int(n) for n, v in pred.items() if v >= best * (1 - tie)]
    return max(close, key=lambda n: (per_pass[str(n)], -n))


def calibration_prompts(n=CALIBRATION_PROMPTS, head_split=None, val_templates=None):
    """Prompts of the templates the bundle's head held out in training (its manifest's "head_split" and, for heads
    that record them, "head_val_templates"; echo templates have no corpus prompt, the corpus's held-out ones do):
    never the benchmark prompts (choosing K or the gate on them would tune on the evaluation set). Taken in turn
    from each task, and within a task from each template: the first 12 in corpus order had held no rewrite prompt,
    where lookup gains most, and three of one template, so calibrate ranked the head first where lookup ran faster."""
    from mtplite.data import training_prompts
    from mtplite.train.train import split_of, split_rows

    rows = training_prompts()
    held = split_rows(rows, **split_of({"split": head_split, "val_templates": val_templates}))[1]
    # a head whose held-out templates were all echo ones (no corpus prompt): the corpus's own held-out rule
    held = held or split_rows(rows, **split_of({"split": head_split}))[1]
    by = defaultdict(lambda: defaultdict(list))
    for r in held:
        by[r["task"]][r["template"]].append(r)
    per_task = [list(_in_turn(ts[k] for k in sorted(ts))) for _, ts in sorted(by.items())]
    return list(_in_turn(per_task))[:n]


def _in_turn(lists):
    """One item from each list in turn until all are spent."""
    its = [iter(x) for x in lists]
    while its:
        for it in list(its):
            x = next(it, None)
            if x is None:
                its.remove(it)
            else:
                yield x


def cmd_calibrate(a):
    import json

    from mtplite.runtime.bench import load_prompts

    prompts = load_prompts(a.prompts)[: a.limit] if a.prompts else None
    s = calibrate(a.out, prompts, threads=a.threads, n=a.limit)
    print(json.dumps(s, indent=1))
    print(f"mtplite: wrote settings.K={s['K']} into the manifest ({s['reason']})", file=sys.stderr)


def register(sub):
    b = sub.add_parser("bench", help="plain vs MTP vs prompt lookup vs hybrid (+ official engine), side by side")
    b.add_argument("out")
    b.add_argument("--prompts", help="JSONL with id/task/prompt (default ../shared/prompts/tasks.jsonl)")
    b.add_argument("--max-new-tokens", type=int, default=64)
    b.add_argument("--modes", default=",".join(DEFAULT_MODES),
                   help="'+gate': the head drafts only while it is sure (settings.min_prob from calibrate); '+ctx': "
                        "it also drafts the text's own ids outside its draft vocabulary (drafter_ctx.tflite). All: "
                        + ",".join(MODES))
    b.add_argument("--limit", type=int, default=0)
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--no-engine", action="store_true", help="skip the official litert_lm engine rows")
    b.add_argument("--json")
    b.add_argument("--plot")
    b.add_argument("--exact", action="store_true", help="plain steps through the verify graph (bit-identical kernels)")
    b.add_argument("--also", action="append", default=[], metavar="NAME=DIR",
                   help="another bundle of the same backbone (float, int4, another head): plain + MTP, interleaved")
    b.set_defaults(fn=cmd_bench)
    c = sub.add_parser("calibrate", help="measure step costs + acceptance here and choose K (or off)")
    c.add_argument("out")
    c.add_argument("--prompts", help="JSONL (default: held-out training templates, never the benchmark prompts)")
    c.add_argument("--limit", type=int, default=CALIBRATION_PROMPTS,
                   help="prompts to calibrate on (default: held-out templates, taken in turn per task)")
    c.add_argument("--threads", type=int, default=2)
    c.set_defaults(fn=cmd_calibrate)
