"""`mtplite calibrate`: time the bundle's graphs on this device, replay its drafters on held-out prompts, and write
who drafts (settings.draft, "off" where nothing pays), K, the confidence gate and hybrid's match length into the
manifest. The cost model predicts tokens per second from the measured step costs and acceptance."""
import sys
from collections import defaultdict

from mtplite.errors import UserError
from mtplite.export.contract import DRAFTS


CALIBRATION_PROMPTS = 24  # 4 per task of the shipped corpus


GATES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


# drafting is switched on only where it is predicted (report --calibrate: measured) this much faster than plain
PAYS = 1.05


def predict_gate(cycles, t_dec, t_ver, t_draw, t_decline, gate):
    """Predicted tokens per second of decoding when the head declines a cycle whose first draft it gives less than
    `gate` probability (Bundle.draft's rule). `cycles`: (probs of the K drafts, accepted count) recorded ungated.
    A declined cycle costs what the drafter spent deciding (`t_decline`: the whole call for the K-step drafter, one
    step for the contract's) plus a plain decode; a kept one its K drafts (`t_draw`) plus a verify."""
    tokens = secs = 0.0
    for probs, acc in cycles:
        if probs[0] < gate:
            tokens, secs = tokens + 1, secs + t_decline + t_dec
        else:
            tokens, secs = tokens + acc + 1, secs + t_draw + t_ver
    return tokens / secs if secs else 0.0


def predict_hybrid(counts, t_dec, t_ver):
    """Predicted speedup over plain decoding of a lookup or hybrid run. `counts`: tokens, plain decode steps (the
    first one after prefill included), cycles, and the seconds its drafting took in the loop (the head's cycles cost
    K drafter steps, lookup's only a scan of the text)."""
    secs = counts["plain"] * t_dec + counts["cycles"] * t_ver + counts["draft_s"]
    return counts["tokens"] * t_dec / secs if secs else 0.0


def calibrate(out, prompts=None, threads=2, max_new=48, progress=print, n=CALIBRATION_PROMPTS, engine=True):
    """Measure decode / verify(K+1) / drafter step on this device and the head's acceptance and confidence, predict
    the speedup with and without a confidence gate, and write the decision into the manifest's settings.
    prompts None: n prompts of the templates the bundle's head held out in training. engine: also measure the
    official engine's MTP on vs off on them (manifest `engine`; runtime/engine.py)."""
    import json
    import time
    from pathlib import Path

    import numpy as np

    from mtplite.model import generate as G
    from mtplite.paths import write_text_atomic
    from mtplite.runtime.litert import Bundle, encode, load_tokenizer
    from mtplite.runtime.lookup import DRAFT_WHO

    # the drafter `mtplite generate` runs by default: drafter_ctx where the bundle has one
    b = Bundle(out, threads=threads, mtp=True, context=True)
    tok = load_tokenizer(out)
    K = b.K
    if prompts is None:  # the user's held-out prompts where the head was trained on theirs
        prompts = (b.man.get("eval_prompts") or [])[:n] or calibration_prompts(n, b.man.get("head_split"),
                                                                                 b.man.get("head_val_templates"))

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
    t_ver, t_draw = ver_s / cyc, dr_s / cyc  # one cycle's drafting: one mtp_draft_k call, or K drafter steps
    t_decline = t_draw if b.use_context else t_draw / K
    acc = depth / max(cyc, 1)
    pred = {}
    for k in range(1, K + 1):
        tau = 1 + float(acc[:k].sum())
        # verify cost measured at K+1 (the only verify graph); the K-step drafter costs its K steps for any k
        pred[k] = tau * t_dec / ((1 if b.use_context else k / K) * t_draw + t_ver)
    gate_pred = {g: predict_gate(cycles, t_dec, t_ver, t_draw, t_decline, g) * t_dec for g in GATES}
    gate = max(GATES, key=lambda g: (round(gate_pred[g], 3), -g))
    hybrid, hybrid_pred, lookup_pred, hybrid_per_pass = calibrate_lookup(b, encoded, max_new, t_dec, t_ver, gate)
    # who drafts by default: the head, hybrid (with the drafter generate runs) or lookup alone; ties go to the head.
    # The head is compared as the other two are, from a run of the loop with its drafting timed there: predict_gate,
    # which picks the gate, charges a declined draft an averaged cost of deciding, and on SmolLM2 it put the gated head
    # level with hybrid where hybrid ran 10% faster side by side (96 held-out prompts, lab/notes/PERF.md).
    default = "drafter_ctx" if b.use_context else "drafter"
    by_draft = {"mtp": predict_hybrid(draft_counts(b, encoded, max_new, "mtp", gate=gate), t_dec, t_ver),
                "hybrid": hybrid_pred[default][str(hybrid[default])], "lookup": lookup_pred}
    draft = max(DRAFTS, key=lambda d: (round(by_draft[d], 3), -DRAFTS.index(d)))
    sp = by_draft[draft]
    mpath = Path(b.dir) / "manifest.json"
    man = json.loads(mpath.read_text())
    man["settings"] = {"K": K, "min_prob": gate, "draft": draft if sp > PAYS else "off", "source": "mtplite calibrate",
                       "predicted_speedup": round(sp, 3),
                       "reason": f"predicted {sp:.2f}x at K={K} drafting with "
                                 + DRAFT_WHO[draft].format(n=hybrid[default])
                                 + (f", the head's drafts gated at p >= {gate}" if gate and draft != "lookup" else ""),
                       "predicted_speedup_per_draft": {d: round(v, 3) for d, v in by_draft.items()},
                       "measured": {"decode_ms": 1e3 * t_dec, "verify_ms": 1e3 * t_ver, "drafter_step_ms": 1e3 * t_draw / K,
                                    "draft_cycle_ms": 1e3 * t_draw,
                                    "acceptance_per_depth": acc.tolist(), "cycles": cyc},
                       "predicted_speedup_per_k": {str(k): round(v, 3) for k, v in pred.items()},
                       "predicted_speedup_per_gate": {str(g): round(v, 3) for g, v in gate_pred.items()},
                       "hybrid_min_ngram": hybrid, "predicted_speedup_hybrid": hybrid_pred,
                       "tokens_per_pass_hybrid": hybrid_per_pass,
                       "prompts": len(prompts), "threads": threads,
                       "drafter": "drafter_ctx" if b.use_context else "drafter",
                       "calibrated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    root = Path(b.dir).parent  # OUT, where model.litertlm lives (an android/ dir copied alone has none)
    if engine and (root / "model.litertlm").exists():
        from mtplite.export.bundle import engine_verdict
        from mtplite.runtime.engine import engine_check

        man["engine"] = engine_check(root, prompts, max_new)
        progress(engine_verdict(man["engine"]))
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
    from mtplite.export.contract import HYBRID_NGRAMS

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
# >= 2 ran 0.8% ahead; on 96 held-out prompts >= 1 ran 1.4% ahead; lab/notes/PERF.md).
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
    from mtplite.data.splits import split_of, split_rows

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

    from mtplite.data.benchmark import load_prompts

    prompts = load_prompts(a.prompts)[: a.limit] if a.prompts else None
    s = calibrate(a.out, prompts, threads=a.threads, n=a.limit, engine=not a.no_engine,
                  progress=lambda m: print(f"mtplite: {m}", file=sys.stderr))
    print(json.dumps(s, indent=1))
    print(f"mtplite: wrote settings.draft={s['draft']} into the manifest ({s['reason']})", file=sys.stderr)


def register(sub):
    c = sub.add_parser("calibrate", help="measure step costs + acceptance here and choose who drafts (or off)")
    c.add_argument("out", help="a bundle directory (the --out of export)")
    c.add_argument("--prompts", metavar="FILE", help="JSONL of prompts to calibrate on (default: the prompts the head "
                   "held out of its --prompts file, else prompts of the training templates it held out; never the "
                   "benchmark prompts)")
    c.add_argument("--limit", type=int, default=CALIBRATION_PROMPTS,
                   help=f"prompts to calibrate on (default {CALIBRATION_PROMPTS}, taken in turn per task)")
    c.add_argument("--threads", type=int, default=2, help="CPU threads for LiteRT (default 2)")
    c.add_argument("--no-engine", action="store_true",
                   help="skip timing the official litert_lm engine with MTP on and off (the manifest's `engine`)")
    c.set_defaults(fn=cmd_calibrate)
