"""`mtplite bench`: plain vs MTP vs prompt lookup vs hybrid (vs the official LiteRT-LM engine), side by side.

Modes run interleaved prompt by prompt in one process, so machine noise hits them alike; ratios are computed per
task type from the same run. Writes a Markdown table (stdout), JSON and a PNG plot.
"""
import dataclasses
import resource
import sys
import time
from collections import defaultdict

from tqdm import tqdm

from mtplite.errors import UserError
from mtplite.model import generate as G
from mtplite.model.sampling import Sampler


LOOP_N = 4
SAMPLES = 2  # plain outputs kept per task in the bench JSON


def loop_tokens(tokens, n=LOOP_N):
    """How many of `tokens` (one answer) lie inside an n-gram the answer already produced earlier: the copying a
    looping model makes easy for any drafter, counted so that speed-ups on such text are seen for what they are."""
    seen, inside = set(), [False] * len(tokens)
    for j in range(len(tokens) - n + 1):
        g = tuple(tokens[j: j + n])
        if g in seen:
            inside[j: j + n] = [True] * n
        seen.add(g)
    return sum(inside)


def run_mode(b, tok_ids, K, mode, max_new, eos, min_ngram=None, sampler=None):
    """One generation; returns the per-prompt record. min_ngram: hybrid's shortest lookup match (default: the
    bundle's calibrated choice for the drafter in use). sampler: model/sampling.py's (None: greedy)."""
    from mtplite.runtime.lookup import drafting, source_counts

    base, *flags = mode.split("+")
    gated = "gate" in flags
    # '+ctx': the K-step drafter with the context draft space (drafter_ctx.tflite); the others draft with the contract's
    # drafter, one call per step
    b.use_context = "ctx" in flags
    steps = b.standalone_steps() if mode == "standalone" else b.steps()
    b.sampler = sampler or Sampler()
    steps, on_tok, source = drafting(steps, tok_ids, base if base in ("lookup", "hybrid") else "mtp",
                                     min_ngram=min_ngram or b.hybrid_min_ngram())
    # '+gate': the head stops drafting below the calibrated probability (settings.min_prob); plain modes ignore it
    b.min_prob = b.calibrated_min_prob() if gated else 0.0
    cpu0 = time.process_time()  # user + system of every thread (XNNPACK's too): the battery's proxy
    try:
        res = G.run(tok_ids, steps, max_new_tokens=max_new, eos_ids=eos, K=K, cache_len=b.C,
                    on_token=on_tok)
    finally:
        b.min_prob = 0.0
    cpu_s = time.process_time() - cpu0
    n = len(res["tokens"])
    dec_s = res["total_s"] - res["ttft_s"]
    s = G.summary(res, K)
    cyc = max(res["cycles"], 1)
    return {"tokens": n, "decode_s": dec_s, "ttft_s": res["ttft_s"], "out": res["tokens"], "cpu_s": cpu_s,
            "decode_tokens_per_s": (n - 1) / dec_s if n > 1 and dec_s > 0 else None,
            "accept_length": s["accept_length"], "cycles": res["cycles"], "accepted": res["accepted"],
            "backbone_passes": 1 + res["cycles"] + res["plain_steps"],  # decode/verify calls after prefill
            "acceptance_per_depth": s["acceptance_per_depth"], "draft_ms_per_cycle": 1e3 * res["draft_s"] / cyc,
            "verify_ms_per_cycle": 1e3 * res["verify_s"] / cyc,
            "accepted_by_source": {}, **source_counts(source, res["trace"]),
            "loop_tokens": loop_tokens(res["tokens"]), "ended": res["stop_reason"] in ("eos", "stop")}


def aggregate(recs):
    toks = sum(r["tokens"] - 1 for r in recs if r["tokens"] > 1)
    secs = sum(r["decode_s"] for r in recs if r["tokens"] > 1)
    cyc = sum(r["cycles"] for r in recs)
    acc = sum(r["accepted"] for r in recs)
    depth = None
    if cyc:
        K = max(len(r["acceptance_per_depth"]) for r in recs)
        depth = [sum(r["acceptance_per_depth"][i] * r["cycles"] for r in recs if len(r["acceptance_per_depth"]) > i)
                 / cyc for i in range(K)]
    return {"decode_tokens_per_s": toks / secs if secs else None, "ttft_s": sum(r["ttft_s"] for r in recs) / len(recs),
            "accept_length": (acc + cyc) / cyc if cyc else None, "acceptance_per_depth": depth,
            # tokens per backbone pass, plain steps included: lookup's accept length counts only the cycles it
            # drafted, so this is the fair number to compare drafters by (plain decoding = 1)
            "tokens_per_pass": (sum(r["tokens"] for r in recs) / sum(r["backbone_passes"] for r in recs)
                                if all("backbone_passes" in r for r in recs) else None),
            "draft_ms_per_cycle": sum(r["draft_ms_per_cycle"] * r["cycles"] for r in recs) / cyc if cyc else None,
            "verify_ms_per_cycle": sum(r["verify_ms_per_cycle"] * r["cycles"] for r in recs) / cyc if cyc else None,
            "generated_tokens": sum(r["tokens"] for r in recs), "prompts": len(recs),
            # process CPU-seconds per generated token, prefill included (user + system around each generation)
            "cpu_s_per_token": (sum(r["cpu_s"] for r in recs) / max(sum(r["tokens"] for r in recs), 1)
                                if all("cpu_s" in r for r in recs) else None),
            # the Android app's: the battery counter's drop, where the device exposes it
            "energy_nwh_per_token": (sum(r["energy_nwh"] for r in recs) / max(sum(r["tokens"] for r in recs), 1)
                                     if all("energy_nwh" in r for r in recs) else None),
            "accepted_by_source": by_source(recs),
            # share of output tokens inside a 4-gram the same answer already produced, and answers that ended
            # themselves (EOS / stop string) rather than at the budget
            "loop_share": (sum(r["loop_tokens"] for r in recs) / max(sum(r["tokens"] for r in recs), 1)
                           if all("loop_tokens" in r for r in recs) else None),
            "ended_by_itself": sum(r["ended"] for r in recs) if all("ended" in r for r in recs) else None}


def by_source(recs):
    """Hybrid modes: accepted drafts and cycles per drafter (lookup / head), summed over records."""
    out = defaultdict(lambda: {"accepted": 0, "cycles": 0})
    for r in recs:
        for src, v in (r.get("accepted_by_source") or {}).items():
            out[src]["accepted"] += v["accepted"]
            out[src]["cycles"] += v["cycles"]
    return dict(out)


PKGS = ("torch", "litert-torch", "ai-edge-litert", "ai-edge-quantizer", "litert-lm-builder", "litert-lm-api",
        "transformers")


def versions():
    """Python and the packages a bench's numbers depend on, as installed now (recorded in every bench JSON)."""
    import platform
    from importlib import metadata

    out = {"python": platform.python_version()}
    for p in PKGS:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "-"
    return out


def bench(bundle_dir, prompts, max_new=64, modes=("plain", "mtp", "mtp+ctx", "lookup", "hybrid", "hybrid+ctx", "mtp+gate",
                                                  "hybrid+gate", "standalone"),
          threads=2, engine=True,
          progress=True, exact=None, also=(), sampler=None):
    """`also`: (name, dir) of more bundles of the same backbone (e.g. float / int4 exports): each runs plain, MTP and,
    where it has drafter_ctx, mtp+ctx as modes `plain@name` / `mtp@name` / `mtp+ctx@name`, interleaved prompt by
    prompt with the main bundle's modes."""
    from mtplite.runtime.litert import encode
    from mtplite.runtime.litert import Bundle, load_tokenizer

    t0 = time.time()
    b = Bundle(bundle_dir, threads=threads, mtp=True, exact=exact, context=True)
    if not b.man.get("context_drafter") and any("+ctx" in m for m in modes):
        modes = tuple(m for m in modes if "+ctx" not in m)
        print("[bench] no drafter_ctx.tflite in this bundle (export with --context N); skipping the '+ctx' modes",
              file=sys.stderr)
    if "standalone" in modes and not b.load_standalone(threads):
        modes = tuple(m for m in modes if m != "standalone")
        print("[bench] no standalone drafter in this bundle (train with --standalone); skipping that mode",
              file=sys.stderr)
    if not b.calibrated_min_prob() and any(m.endswith("+gate") for m in modes):
        modes = tuple(m for m in modes if not m.endswith("+gate"))
        print("[bench] no confidence gate in the manifest (run `mtplite calibrate`, or it chose none); skipping the "
              "'+gate' modes", file=sys.stderr)
    tok = load_tokenizer(bundle_dir)
    eos = set(b.man["eos_ids"])
    extras = {}
    for name, d in also:
        eb = Bundle(d, threads=threads, mtp=True, exact=exact, context=True)
        if eb.man["backbone_fingerprint"] != b.man["backbone_fingerprint"]:
            raise UserError(f"--also {name}={d}: a bundle of another backbone ({eb.man['backbone_fingerprint']}, main "
                            f"{b.man['backbone_fingerprint']})")
        extras[name] = eb
    xm = {n: ("plain", "mtp") + (("mtp+ctx",) if "drafter_ctx" in eb.models else ()) for n, eb in extras.items()}
    xmodes = [f"{m}@{n}" for n in extras for m in xm[n]]
    xmismatch = defaultdict(int)
    K = b.K
    per = defaultdict(lambda: defaultdict(list))  # mode -> task -> records
    mismatches = 0
    skipped = []
    samples = defaultdict(list)
    bar = tqdm(total=len(prompts) * (len(modes) + len(xmodes)), desc="bench", unit="run", disable=not progress)
    for p in prompts:
        ids = encode(tok, b.man, p["prompt"])
        if len(ids) + 1 >= b.C:  # does not fit the exported cache: reported, never silently truncated
            skipped.append(p["id"])
            bar.update(len(modes))
            continue
        outs = {}
        for mode in modes:
            r = run_mode(b, ids, 0 if mode == "plain" else K, mode, max_new, eos, sampler=sampler)
            outs[mode] = r.pop("out")
            r["id"] = p["id"]
            per[mode][p["task"]].append(r)
            per[mode]["all"].append(r)
            bar.update(1)
        mismatches += sum(outs[m] != outs["plain"] for m in modes if m != "plain")
        if len(samples[p["task"]]) < SAMPLES:  # what users would read, beside the speeds
            samples[p["task"]].append({"id": p["id"], "text": tok.decode(outs["plain"], skip_special_tokens=True),
                                       "ended": per["plain"][p["task"]][-1]["ended"]})
        for n, eb in extras.items():
            xo = {}
            for m in xm[n]:
                r = run_mode(eb, ids, 0 if m == "plain" else eb.K, m, max_new, eos, sampler=sampler)
                xo[m] = r.pop("out")
                r["id"] = p["id"]
                per[f"{m}@{n}"][p["task"]].append(r)
                per[f"{m}@{n}"]["all"].append(r)
                bar.update(1)
            xmismatch[n] += sum(xo[m] != xo["plain"] for m in xm[n] if m != "plain")
    bar.close()
    if not per["plain"]:
        raise UserError(f"no prompt fits the bundle's cache of {b.C} tokens; re-export with a larger --cache-length")
    tasks = sorted({t for t in per["plain"] if t != "all"}) + ["all"]
    modes = tuple(modes) + tuple(xmodes)
    table = {m: {t: aggregate(per[m][t]) for t in tasks} for m in modes}
    ratios = {}
    for m in modes:
        if m == "plain" or ("@" in m and not m.startswith("plain@")):  # an extra bundle's drafting: against its plain
            continue
        ratios[f"{m}/plain"] = {t: (table[m][t]["decode_tokens_per_s"] or 0) / table["plain"][t]["decode_tokens_per_s"]
                                for t in tasks if table["plain"][t]["decode_tokens_per_s"]}
    for n in extras:  # each extra bundle's MTP against its own plain decoding
        for m in xm[n][1:]:
            ratios[f"{m}@{n}/plain@{n}"] = {t: (table[f"{m}@{n}"][t]["decode_tokens_per_s"] or 0)
                                            / table[f"plain@{n}"][t]["decode_tokens_per_s"]
                                            for t in tasks if table[f"plain@{n}"][t]["decode_tokens_per_s"]}
    wb = b.weight_bytes()
    memory = {"backbone_bytes": wb["backbone"], "embedder_bytes": wb["embedder"], "drafter_bytes": wb["drafter"],
              "kv_bytes": b.kv_bytes, "mtp_extra_weight_bytes": wb["drafter"], "mtp_extra_kv_bytes": 0,
              "mtp_extra_fraction_of_backbone": wb["drafter"] / (wb["backbone"] + wb["embedder"]),
              "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    if "drafter_ctx" in wb:  # the '+ctx' modes draft with it instead of the drafter
        memory["drafter_ctx_bytes"] = wb["drafter_ctx"]
    result = {"bundle": str(bundle_dir), "K": K, "exact_mode": b.exact,
              "sampler": dataclasses.asdict(sampler or Sampler()),
              "exactness": {"probe": b.exactness, "detail": b.exactness_detail, "manifest": b.man.get("exactness"),
                            "exact_path": b.exact, "forced": bool(exact)},
              "min_prob": b.calibrated_min_prob(),
              "hybrid_min_ngram": (b.man.get("settings") or {}).get("hybrid_min_ngram") or {}, "max_new_tokens": max_new, "threads": threads, "modes": list(modes),
              "tasks": tasks, "table": table, "ratios": ratios, "memory": memory,
              "spec_vs_plain_mismatches": mismatches, "skipped_prompts_too_long": skipped, "samples": dict(samples), "per_prompt": {m: dict(per[m]) for m in modes},
              "manifest": {k: b.man.get(k) for k in ("backbone_spec", "backbone_fingerprint", "head_fingerprint",
                                                       "quantization", "cache_length", "draft_vocab_size")}}
    # what the exact path would cost (a plain step as a verify pass), from this run's own steps
    pl, mt = table["plain"]["all"], table.get("mtp", {}).get("all") or {}
    if pl.get("decode_tokens_per_s") and mt.get("verify_ms_per_cycle"):
        step_ms = 1e3 / pl["decode_tokens_per_s"]
        result["exactness"]["verify_over_decode_step"] = mt["verify_ms_per_cycle"] / step_ms
    result["extra_bundles"] = {n: {"bundle": str(eb.dir.parent), "quantization": eb.man.get("quantization"),
                                   "head_target_quant": eb.man.get("head_target_quant"),
                                   "head_fingerprint": eb.man.get("head_fingerprint"), "weight_bytes": eb.weight_bytes(),
                                   "spec_vs_plain_mismatches": xmismatch[n]} for n, eb in extras.items()}
    if "standalone" in modes and "mtp" in modes:
        sb = b.man["standalone"]["bytes"]
        memory.update({"standalone_weight_bytes": sb, "standalone_kv_bytes": b.sd_kv_bytes,
                       "standalone_extra_bytes": sb + b.sd_kv_bytes,
                       "memory_saved_by_mtp_vs_standalone_bytes": sb + b.sd_kv_bytes - wb["drafter"]})
        ratios["mtp/standalone"] = {t: (table["mtp"][t]["decode_tokens_per_s"] or 0) / table["standalone"][t]["decode_tokens_per_s"]
                                    for t in tasks if table["standalone"][t]["decode_tokens_per_s"]}
    if engine and sampler and not sampler.greedy:  # its MTP verifies greedily whatever the app's sampler says
        print("[bench] sampling: the official engine's MTP is greedy-only, so its rows are left out", file=sys.stderr)
        engine = False
    if engine:
        if progress:
            print("[bench] running model.litertlm in the official litert_lm engine's Conversation API (MTP off, then on)",
                  file=sys.stderr)
        from mtplite.runtime.engine import engine_summary, run_engine

        kept = [p["prompt"] for p in prompts if p["id"] not in skipped]
        result["engine"] = engine_summary(run_engine(bundle_dir, kept, max_new), kept)
    result["seconds"] = time.time() - t0
    result["versions"] = versions()
    from mtplite.runtime.summary import machine

    result["machine"] = f"{machine()}, {threads} threads"
    return result


def exactness_line(ex):
    if not ex:
        return "decode vs verify probe: not recorded by this run"
    cost = (f"; a plain step through verify costs {ex['verify_over_decode_step']:.2f} decode steps"
            if ex.get("verify_over_decode_step") else "")
    path = ("plain steps ran through verify (" + ("forced" if ex.get("forced") else "the probe found them differing") + ")"
            if ex["exact_path"] else "plain steps ran through decode")
    return f"decode vs verify row 0 (load-time probe): {ex['probe']}; {path}{cost}"


def markdown(res):
    modes, tasks = res["modes"], res["tasks"]
    smp = res.get("sampler") or {}
    how = (f"sampling T={smp['temperature']}, top-k {smp['top_k']}, top-p {smp['top_p']}, seed {smp['seed']}"
           if smp.get("temperature") else "greedy")
    lines = [f"K={res['K']}, max_new_tokens={res['max_new_tokens']}, threads={res['threads']}, {how}", "",
             "| task | " + " | ".join(f"{m} tok/s" for m in modes) + " | " +
             " | ".join(f"{m} τ" for m in modes if not m.startswith("plain")) + " | " +
             " | ".join(f"{k}" for k in res["ratios"]) + " |",
             "|" + "---|" * (1 + len(modes) + sum(not m.startswith("plain") for m in modes) + len(res["ratios"]))]
    for t in tasks:
        row = [t]
        row += [f"{res['table'][m][t]['decode_tokens_per_s']:.1f}" if res["table"][m][t]["decode_tokens_per_s"] else "-"
                for m in modes]
        row += [f"{res['table'][m][t]['accept_length']:.2f}" if res["table"][m][t]["accept_length"] else "-"
                for m in modes if not m.startswith("plain")]
        row += [f"{res['ratios'][k].get(t, 0):.2f}x" for k in res["ratios"]]
        lines.append("| " + " | ".join(row) + " |")
    mem = res["memory"]
    lines += ["", f"weights: backbone {mem['backbone_bytes'] / 1e6:.1f} MB + embedder {mem['embedder_bytes'] / 1e6:.1f} MB;"
              f" MTP adds drafter {mem['drafter_bytes'] / 1e6:.1f} MB ({100 * mem['mtp_extra_fraction_of_backbone']:.1f}%)"
              f" and 0 KV bytes (KV {mem['kv_bytes'] / 1e6:.1f} MB shared); peak RSS {mem['peak_rss_bytes'] / 1e6:.0f} MB",
              f"speculative outputs differing from plain {'sampling' if smp.get('temperature') else 'greedy'}: "
              f"{res['spec_vs_plain_mismatches']}",
              exactness_line(res.get("exactness")),
              "tokens per backbone pass (all tasks; plain steps count, so lookup is not flattered): " + ", ".join(
                  f"{m} {res['table'][m]['all']['tokens_per_pass']:.2f}" for m in modes
                  if res["table"][m]["all"].get("tokens_per_pass"))]
    pl = res["table"]["plain"]
    if pl["all"].get("loop_share") is not None:
        lines.append(f"answers (plain): share of tokens inside a {LOOP_N}-gram the answer already produced, and answers "
                     "that ended by themselves before the budget: " + ", ".join(
                         f"{t} {100 * pl[t]['loop_share']:.0f}% {pl[t]['ended_by_itself']}/{pl[t]['prompts']}"
                         for t in tasks))
    if all(res["table"][m]["all"].get("cpu_s_per_token") for m in modes):
        lines.append("process CPU-ms per generated token (user + system, prefill included): " + ", ".join(
            f"{m} {1e3 * res['table'][m]['all']['cpu_s_per_token']:.1f}" for m in modes))
    if all(res["table"][m]["all"].get("energy_nwh_per_token") is not None for m in modes):
        lines.append("battery energy per generated token, nWh (the device's counter): " + ", ".join(
            f"{m} {res['table'][m]['all']['energy_nwh_per_token']:.0f}" for m in modes))
    for m in modes:
        src = res["table"][m]["all"].get("accepted_by_source") or {}
        if len(src) > 1 or (src and m.startswith("hybrid")):
            lines.append(f"{m}: accepted drafts by source: " + ", ".join(
                f"{k} {v['accepted']} in {v['cycles']} cycles (τ {1 + v['accepted'] / max(v['cycles'], 1):.2f})"
                for k, v in sorted(src.items())))
    if res.get("min_prob"):
        lines.append(f"'+gate' modes: the head drafts only while its top probability is >= {res['min_prob']} "
                     "(settings.min_prob from mtplite calibrate)")
    if res.get("hybrid_min_ngram"):
        lines.append("hybrid modes: lookup copies matches of >= " + ", ".join(
            f"{n} tokens with the {d}" for d, n in sorted(res["hybrid_min_ngram"].items()))
                     + ", the head drafts the rest (settings.hybrid_min_ngram from mtplite calibrate)")
    if "standalone_extra_bytes" in mem:
        lines.append(f"standalone drafter: {mem['standalone_weight_bytes'] / 1e6:.1f} MB weights + "
                     f"{mem['standalone_kv_bytes'] / 1e6:.1f} MB own KV; MTP saves "
                     f"{mem['memory_saved_by_mtp_vs_standalone_bytes'] / 1e6:.1f} MB per instance")
    if res.get("skipped_prompts_too_long"):
        lines.append(f"skipped (longer than the cache): {', '.join(res['skipped_prompts_too_long'])}")
    e = res.get("engine")
    if e and "error" not in e:
        lines.append(f"official litert_lm engine: plain {e['engine_plain']['decode_tokens_per_s']:.1f} tok/s, MTP "
                     f"{e['engine_mtp']['decode_tokens_per_s']:.1f} tok/s ({e['mtp/plain']:.2f}x)"
                     + (f", CPU-ms per token {1e3 * e['engine_plain']['cpu_s_per_token']:.1f} / "
                        f"{1e3 * e['engine_mtp']['cpu_s_per_token']:.1f}" if "cpu_s_per_token" in e["engine_plain"] else "")
                     + (f", drafter success rate {e['engine_mtp']['drafter_success_rate']}"
                        if e["engine_mtp"].get("drafter_success_rate") is not None else "")
                     + f", MTP text = plain text on {e['text_matches_off']}/"
                     f"{e.get('prompts', res['table']['plain']['all']['prompts'])} prompts"
                     + (f"; adaptive {e['engine_adaptive']['decode_tokens_per_s']:.1f} tok/s ({e['adaptive/plain']:.2f}x)"
                        if "engine_adaptive" in e else ""))
    elif e:
        lines.append(f"official litert_lm engine: failed ({e['error']})")
    return "\n".join(lines)


def plot(res, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from mtplite.paths import atomic_path

    modes, tasks = res["modes"], res["tasks"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.5))
    x = np.arange(len(tasks))
    w = 0.8 / len(modes)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, m in enumerate(modes):  # one colour per mode in both panels
        col = colors[i % len(colors)]
        a1.bar(x + i * w, [res["table"][m][t]["decode_tokens_per_s"] or 0 for t in tasks], w, label=m, color=col)
        if not m.startswith("plain"):
            a2.bar(x + i * w, [res["table"][m][t]["accept_length"] or 0 for t in tasks], w, label=m, color=col)
    for a, title in ((a1, "decode tokens/s (higher is better)"), (a2, "accept length τ (tokens per verify)")):
        a.set_xticks(x + 0.4 - w / 2)
        a.set_xticklabels(tasks, rotation=20)
        a.set_title(title)
        a.legend(fontsize=8)
        a.grid(axis="y", alpha=0.3)
    spec = (res.get("manifest") or {}).get("backbone_spec", "")
    fig.suptitle(f"mtplite bench: {spec} K={res['K']} ({res['threads']} threads)")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
