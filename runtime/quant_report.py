"""`mtplite quant-report FLOAT_OUT Q_OUT [Q_OUT ...]`: what quantization costs, per bundle and task type.

For every bundle: graph sizes; greedy agreement with the float bundle (the quantized backbone, teacher-forced on the
float backbone's greedy token stream: share of positions where its argmax is the float token); whole outputs equal
to float's; and the MTP accept length of the bundle's own head on its own backbone (so a float-trained head on an
int8 backbone and a quantization-aware head on the same backbone are two rows side by side).
"""
import json
import sys
from collections import defaultdict
from pathlib import Path

from tqdm import tqdm

from mtplite.errors import UserError


def teacher_forced_agreement(b, ids, ref):
    """Share of positions where bundle b's greedy choice equals ref (the float stream), fed ref as history."""
    b.reset()
    if len(ids) > 1:
        b.prefill(ids[:-1], 0)
    pred, _ = b.decode(ids[-1], len(ids) - 1)
    same = 0
    for i, t in enumerate(ref):
        same += pred == t
        if i + 1 < len(ref):
            pred, _ = b.decode(t, len(ids) + i)
    return same, len(ref)


def quant_report(float_dir, qdirs, prompts, max_new=48, threads=2, progress=True):
    from mtplite.model import generate as G
    from mtplite.runtime.bench import aggregate, run_mode
    from mtplite.runtime.litert import encode
    from mtplite.runtime.litert import Bundle, load_tokenizer

    fb = Bundle(float_dir, threads=threads, mtp=True)
    tok = load_tokenizer(float_dir)
    eos = set(fb.man["eos_ids"])
    from mtplite.export.contract import check

    for q in qdirs:
        m, _ = check(Path(q) / "android" / "manifest.json")
        if m.get("backbone_fingerprint") != fb.man.get("backbone_fingerprint"):
            raise UserError(f"{q}: exported from backbone {m.get('backbone_fingerprint')}, but {float_dir} from "
                            f"{fb.man.get('backbone_fingerprint')}; compare bundles of one backbone")
    work = []
    for p in prompts:
        ids = encode(tok, fb.man, p["prompt"])
        if len(ids) + max_new < fb.C:
            ref = G.run(ids, fb.steps(), max_new_tokens=max_new, eos_ids=eos, K=0, cache_len=fb.C)["tokens"]
            work.append((p, ids, ref))
    if not work:
        raise UserError(f"no prompt fits the cache of {fb.C} tokens with {max_new} new tokens")
    rows = []
    for q in [float_dir] + list(qdirs):
        b = fb if q == float_dir else Bundle(q, threads=threads, mtp=True)
        per = defaultdict(list)
        agree = defaultdict(lambda: [0, 0])
        equal = defaultdict(lambda: [0, 0])
        differ = defaultdict(int)  # MTP output != plain output of the same bundle (numerics of verify vs decode)
        for p, ids, ref in tqdm(work, desc=f"quant-report {Path(q).name}", disable=not progress):
            s, n = teacher_forced_agreement(b, ids, ref)
            plain = G.run(ids, b.steps(), max_new_tokens=max_new, eos_ids=eos, K=0, cache_len=b.C)["tokens"]
            r = run_mode(b, ids, b.K, "mtp", max_new, eos)
            spec = r.pop("out")
            for t in (p["task"], "all"):
                agree[t][0] += s
                agree[t][1] += n
                equal[t][0] += plain == ref
                equal[t][1] += 1
                differ[t] += spec != plain
                per[t].append(r)
        tasks = sorted(t for t in per if t != "all") + ["all"]
        m = b.man
        rows.append({
            "bundle": str(q), "quantization": m.get("quantization"), "head_target_quant": m.get("head_target_quant"),
            "head_fingerprint": m.get("head_fingerprint"), "file_bytes": m.get("file_bytes"),
            "litertlm_bytes": m.get("litertlm_bytes"),
            "greedy_agreement_with_float": {t: agree[t][0] / max(agree[t][1], 1) for t in tasks},
            "outputs_equal_to_float": {t: equal[t][0] / max(equal[t][1], 1) for t in tasks},
            "accept_length": {t: aggregate(per[t])["accept_length"] for t in tasks},
            "spec_vs_plain_mismatches": differ["all"]})
    return {"float_bundle": str(float_dir), "max_new_tokens": max_new, "prompts": len(work), "rows": rows}


def markdown(rep):
    tasks = list(rep["rows"][0]["accept_length"])
    L = ["| bundle | quantization | head trained against | size MB (backbone / drafter) | greedy agreement with float "
         "| outputs = float | MTP ≠ plain | " + " | ".join(f"τ {t}" for t in tasks) + " |",
         "|" + "---|" * (7 + len(tasks))]
    for r in rep["rows"]:
        fb = r["file_bytes"] or {}
        q = r["quantization"] or {}
        qs = "float" if all(v == "float" for v in q.values()) else ", ".join(f"{k} {v}" for k, v in q.items())
        tq = r["head_target_quant"]
        tqs = "float" if not tq else ", ".join(f"{k} {v}" for k, v in tq.items())
        L.append(f"| {Path(r['bundle']).name} | {qs} | {tqs} | {fb.get('backbone', 0) / 1e6:.1f} / "
                 f"{fb.get('drafter', 0) / 1e6:.1f} | {r['greedy_agreement_with_float']['all']:.3f} | "
                 f"{r['outputs_equal_to_float']['all']:.2f} | {r['spec_vs_plain_mismatches']}/{rep['prompts']} | "
                 + " | ".join(f"{r['accept_length'][t]:.2f}" for t in tasks) + " |")
    return "\n".join(L)


def register(sub):
    from mtplite.runtime.cli import add_run_args

    r = sub.add_parser("quant-report", help="sizes, greedy agreement with float and MTP accept length per bundle")
    r.add_argument("float_out", help="the float export of the backbone")
    r.add_argument("quant_outs", nargs="+", help="quantized exports of the same backbone (any heads)")
    add_run_args(r, 48, "report")
    r.set_defaults(fn=cmd_quant_report)


def cmd_quant_report(a):
    from mtplite.paths import write_text_atomic
    from mtplite.data.benchmark import bundle_prompts

    rep = quant_report(a.float_out, a.quant_outs, bundle_prompts(a.float_out, a.prompts),
                       max_new=a.max_new_tokens, threads=a.threads)
    if a.json:
        write_text_atomic(a.json, json.dumps(rep, indent=1))
    print(markdown(rep))
    print(f"mtplite quant-report: {rep['prompts']} prompts, {len(rep['rows'])} bundles", file=sys.stderr)
