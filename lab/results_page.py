"""Render lab/EXPERIMENTS.md (the experiments page) from the JSON of one run (bench.json + the head's head.json + the bundle's manifest).

  python lab/results_page.py RUN_DIR [--out lab/EXPERIMENTS.md]

RUN_DIR is a quickstart dir (head/, bundle-*/, bench.json, bench.png). Numbers come only from those files; running
it again regenerates the page.
"""
import argparse
import json
import os
import platform
import shutil
from pathlib import Path

from mtplite.paths import write_text_atomic
from mtplite.runtime.bench import markdown, versions

def versions_line(bench):
    """The bench's own recorded versions; a run from before they were recorded shows the rendering environment's,
    said so (a page re-rendered after an upgrade must not claim the new versions ran it)."""
    v = bench.get("versions")
    note = "" if v else " (installed when this page was rendered; this bench run did not record its own)"
    v = v or versions()
    return f"- Python {v['python']}; " + ", ".join(f"{k} {x}" for k, x in v.items() if k != "python") + note


def cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def timed_section(bench):
    """A fresh quickstart's wall time per step (bench.json's `quickstart` block) and its headline numbers."""
    q = bench["quickstart"]
    t = bench["table"]
    L = [f"`mtplite quickstart{' --quick' if q.get('quick') else ''}` from an empty cache (training budget "
         f"{q['budget_minutes']} min): total "
         f"{q['total_s'] / 60:.1f} min" + (f" (15-min load average at the end {q['loadavg_15min_at_end']:.1f} on "
                                             f"{os.cpu_count()} cores)" if "loadavg_15min_at_end" in q else "")
         + ".", ""]
    if q.get("dtype"):  # older records lack it: distillation speed depends on the CPU's bf16 support
        L += [f"It distilled and trained in {q['dtype']} on a CPU with {q['cpu_capability']} kernels; the head saw "
              f"{q['train_generated_tokens']} self-distilled tokens.", ""]
    L += ["| step | minutes |", "|---|---|"]
    L += [f"| {k} | {v / 60:.1f} |" for k, v in q["steps_s"].items()]
    L += ["", f"Its bench: MTP/plain {bench['ratios']['mtp/plain']['all']:.2f}x at τ "
          f"{t['mtp']['all']['accept_length']:.2f}"
          + (f"; hybrid/plain {bench['ratios']['hybrid/plain']['all']:.2f}x" if "hybrid/plain" in bench["ratios"] else "")
          + f"; plain {t['plain']['all']['decode_tokens_per_s']:.1f} tok/s.", ""]
    return L


def quant_section(rep):
    from mtplite.runtime.quant_report import markdown as qmd

    rows = rep["rows"]
    fl = rows[0]["accept_length"]["all"]
    qat = [r for r in rows if (r.get("head_target_quant") or {}).get("backbone") == "int8"
           and (r.get("quantization") or {}).get("backbone") == "int8"]
    target = []
    if qat:
        d = fl - qat[0]["accept_length"]["all"]
        target = [f"Target (int8 backbone loses ≤ 0.2 τ against float with the quantization-aware head): float "
                  f"{fl:.2f}, int8 + QAT head {qat[0]['accept_length']['all']:.2f}, loss {d:+.2f} → "
                  f"{'met' if d <= 0.2 else 'missed'}.", ""]
    return target + [f"One `mtplite quant-report` run: {rep['prompts']} benchmark prompts, {rep['max_new_tokens']} new tokens "
            "each. Greedy agreement = share of positions where the bundle's backbone, fed the float backbone's greedy "
            "stream, picks the same token. MTP ≠ plain = generations whose speculative output differs from the same "
            "bundle's plain output.", "", qmd(rep), ""]


def soak_section(s):
    return [f"`mtplite soak`: {s['generations']} sequential generations ({s['tokens']} tokens, MTP and plain "
            f"alternating, mixed prompts) on one loaded bundle in {s['seconds'] / 60:.1f} min. RSS after the first "
            f"generation {s['rss_first_bytes'] / 2**20:.0f} MiB, after the last {s['rss_last_bytes'] / 2**20:.0f} MiB "
            f"({100 * s['rss_growth']:+.1f}%); max {s['rss_max_bytes'] / 2**20:.0f} MiB. Repeated prompt identical at "
            f"the start and the end: {s['repeated_prompt_identical']}.", ""]


def reliability_section(r):
    what = {"test_fuzz_tflite": "mutated .tflite (bit flips, truncation, inserted bytes) -> flatbuffer reader",
            "test_fuzz_litertlm": "mutated .litertlm header/sections -> section reader",
            "test_fuzz_manifest": "manifest.json with wrong types/shapes/huge values, then byte-mutated",
            "test_fuzz_head": "mutated head.json / head.safetensors -> load_head",
            "test_fuzz_device_log": "mutated Android device log -> mtplite report",
            "test_kill_during_export_leaves_nothing_final": "kill -9 during export, then rerun",
            "test_kill_during_train_then_resume": "kill -9 during train (self-distillation), then resume",
            "test_kill_during_quantize_leaves_nothing_final": "kill -9 during quantize, then rerun",
            "test_soak_flat_rss_and_repeatable": "200 generations on one tiny bundle: RSS < 5% growth, same output",
            "test_same_seed_same_bytes": "same seed: byte-identical head and bundle (except litertlm uuid/time)"}
    L = [f"`python lab/scripts/reliability_report.py` (tests/test_reliability.py, {r['fuzz_cases']} fuzz cases over "
         f"{r['fuzz_readers']} readers, {r['seconds'] / 60:.1f} min): every case must end in a one-line error "
         "naming the file (no traceback, hang or native crash); a killed command leaves no final artifact.", "",
         "| test | what | result | s |", "|---|---|---|---|"]
    L += [f"| {t['name']} | {what.get(t['name'].split('[')[0], '')} | {t['outcome']} | {t['seconds']:.0f} |"
          for t in r["tests"]]
    return L + [""]


def fakequant_section(runs):
    L = ["Which torch numerics reproduce a quantized LiteRT backbone's greedy tokens (`lab/scripts/fakequant_match.py`, "
         "teacher-forced on the LiteRT graph's own greedy stream); `train --target-quant` uses the best.", "",
         "| LiteRT bundle | tokens | " + " | ".join(runs[0]["agreement_with_litert_greedy"]) + " |",
         "|" + "---|" * (2 + len(runs[0]["agreement_with_litert_greedy"]))]
    for r in runs:
        q = r["quantization"]["backbone"]
        L.append(f"| backbone {q} | {r['tokens']} | "
                 + " | ".join(f"{v:.3f}" for v in r["agreement_with_litert_greedy"].values()) + " |")
    return L + [""]


def copy_section(c):
    return ([f"Does the head copy? (`lab/scripts/copy_probe.py`, {c['positions']} generated positions of "
            f"{c['held_out_rows']} held-out self-distilled rows, first draft vs prompt lookup's first draft)", "",
            "| positions | share | head right | lookup right |", "|---|---|---|---|",
            f"| all | 1.00 | {c['head_acc']:.3f} | {c['share_copyable']:.3f} |",
            f"| lookup finds an earlier match | {c['share_with_match']:.2f} | {c['head_acc_when_match']:.3f} | "
            f"{c['lookup_acc_when_match']:.3f} |",
            f"| ... and the copy is right (copyable) | {c['share_copyable']:.2f} | {c['head_acc_on_copyable']:.3f} | 1.000 |",
            f"| ... and the copy is wrong | {c['share_with_match'] - c['share_copyable']:.2f} | "
            f"{c['head_acc_when_copy_wrong']:.3f} | 0.000 |",
            f"| no earlier match | {1 - c['share_with_match']:.2f} | {c['head_acc_when_no_match']:.3f} | - |", "",
            f"What this says: {100 * c['share_copyable']:.0f}% of what the backbone generates could be copied from "
            f"earlier in its own text, and the head gets {100 * c['head_acc_on_copyable']:.0f}% of those right. The "
            "drafter graph sees no token ids, only activations and the backbone's KV, so whatever copying it does, "
            "its query-only attention learned from the self-distilled data (the experiments below compare heads "
            f"trained on more and less of it). Where lookup has no match the head is right "
            f"{100 * c['head_acc_when_no_match']:.0f}% of the time; where lookup matches, lookup's draft is right "
            f"{100 * c['lookup_acc_when_match']:.0f}% vs the head's {100 * c['head_acc_when_match']:.0f}% and costs "
            "nothing to draft: hence `hybrid` (in our runtime and the Kotlin core), lookup where it matches and the "
            "head elsewhere." + (" By the length of lookup's match:" if c.get("by_match_length") else ""), ""]
            + match_length_rows(c))


def drill_section(runs):
    """Heads trained side by side at equal budget (lab/probes/drill_ablation.py): the JSON carries its own
    description of what the arms differ in."""
    r0 = runs[0]
    tasks = sorted(k for k in next(iter(r0["arms"].values()))["accept_length"]["benchmark_prompts"] if k != "all")
    L = [r0["description"]]
    L += ["", "| seed | head | train tokens (drills) | steps | held-out topics | held-out drills | benchmark all | "
          + " | ".join(f"bench {t}" for t in tasks) + " | copyable right |",
          "|---|---|---|---|---|---|---|" + "---|" * len(tasks) + "---|"]
    for r in runs:
        for name, v in r["arms"].items():
            a = v["accept_length"]
            L.append(f"| {r.get('seed', 0)} | {name} | {v['train_tokens']} ({v['drill_tokens']}) | {v.get('steps', '-')} | "
                     f"{a['heldout_topic_templates']['all']:.2f} | {a['heldout_drill_templates']['all']:.2f} | "
                     f"{a['benchmark_prompts']['all']:.2f} | "
                     + " | ".join(f"{a['benchmark_prompts'][t]:.2f}" for t in tasks)
                     + f" | {v['bench_copy_probe']['head_acc_on_copyable']:.3f} |")
    return L + [""]


# lookup's longest match at a position (copy_probe's "0" and draft_table's "none": no earlier match)
MATCH_NAME = {"0": "no earlier match", "none": "no earlier match", "1": "1-token match", "2": "2-token match",
              "3": "3-token match", "3*": "3-token, earlier matches differ"}


def match_length_rows(c):
    """The copy probe split by the length of the n-gram lookup matched on (0 = no match), when it has that split."""
    by = c.get("by_match_length")
    if not by:
        return []
    return (["| lookup's match | share | head first draft right | lookup first draft right |", "|---|---|---|---|"]
            + [f"| {MATCH_NAME[m]} | {v['share']:.3f} | {v['head_acc']:.3f} | "
               + (f"{v['lookup_acc']:.3f} |" if m != "0" else "- |") for m, v in sorted(by.items())] + [""])


def gap_rows(g):
    """lab/scripts/generalization_gap.py: the head's τ on held-out corpus templates vs the benchmark prompts, per task."""
    rows = [("teacher-forced, held-out training templates", g["teacher_forced"]["held_out"]),
            ("teacher-forced, benchmark prompts", g["teacher_forced"]["benchmark"])]
    if g.get("free_running_torch_float32"):
        rows.append(("free-running torch float32, benchmark prompts", g["free_running_torch_float32"]))
    tasks = sorted({t for _, r in rows for t in r if t != "all"}) + ["all"]
    return ([f"How far the held-out number flatters (`lab/scripts/generalization_gap.py`, {g['held_out_rows']} held-out "
             f"rows, {g['benchmark_prompts']} benchmark prompts, {g['max_new_tokens']} greedy tokens each; a held-out "
             "task with no row is '-'):", "", "| τ | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
            + [f"| {name} | " + " | ".join(f"{r[t]:.2f}" if t in r else "-" for t in tasks) + " |" for name, r in rows]
            + [""])


def met_or_missed(rows):
    """rows: (task, head, lookup). "met" when the head is at least lookup on every task, else the tasks it misses."""
    lose = [(k, h, l) for k, h, l in rows if h < l]
    return "met" if not lose else "missed on " + ", ".join(f"{k} ({h:.2f} vs {l:.2f})" for k, h, l in lose)


def num(r, key):
    """r[key] to two decimals, '-' where the row or the value is missing (a task no cycle drafted)."""
    return f"{r[key]:.2f}" if r and r.get(key) is not None else "-"


def same_cycles_rows(sc):
    """lab/scripts/same_cycles.py: the head and prompt lookup scored on the same cycles of the same greedy stream."""
    on_l, on_h, nm = sc["on_lookup_cycles"], sc["on_head_cycles"], sc["lookup_no_match"]
    tasks = [t for t in on_l if t != "all"] + ["all"]
    verdict = met_or_missed([(t, on_l[t]["head_tau"], on_l[t]["lookup_tau"]) for t in tasks if t != "all"])
    return ([f"The head ({sc['drafter']}, ungated) and prompt lookup on the same cycles of the same greedy stream "
             f"(`lab/scripts/same_cycles.py`, {sc['prompts']} benchmark prompts, {sc['max_new_tokens']} tokens): lookup "
             "drives the run and the head drafts from the same state at each of lookup's cycles; then the head drives "
             "and lookup is scored where it has a match. The bench's τ come from each drafter's own cycles: lookup "
             "sits out the steps its text has no match for. 'The better draft per cycle' is an oracle's τ (the most a "
             "rule choosing between the two each cycle could reach).", "",
             "| task | lookup's cycles | lookup τ | head τ, same cycles | the better draft per cycle | head's cycles "
             "with a match | head τ | lookup τ, same cycles | lookup's no-match steps | head τ there |",
             "|---|" + "---|" * 9]
            + [f"| {t} | {on_l[t]['cycles']} | {num(on_l[t], 'lookup_tau')} | {num(on_l[t], 'head_tau')} | "
               f"{num(on_l[t], 'better_tau')} | "
               f"{on_h.get(t, {}).get('cycles', 0)} | {num(on_h.get(t), 'head_tau')} | {num(on_h.get(t), 'lookup_tau')} | "
               f"{nm.get(t, {}).get('steps', 0)} | {num(nm.get(t), 'head_tau')} |" for t in tasks]
            + ["", f"Head τ >= lookup τ on lookup's own cycles, every task type: {verdict}.", ""])


def replay_rows(rp):
    """lab/scripts/draft_table.py --replay: every drafting rule on one exact-mode greedy stream (the same outputs for all)."""
    rules = rp["rules"]
    tasks = [t for t in next(iter(rules.values())) if t != "all"] + ["all"]
    lk = rules["lookup"]
    head = {n: r for n, r in rules.items() if n.startswith("head")}
    L = [f"Every drafting rule on the same greedy outputs (`lab/scripts/draft_table.py`, {rp['rows']} "
         f"{'benchmark' if rp.get('prompts') in (None, 'benchmark') else 'held-out'} prompts, {rp['max_new_tokens']} "
         "tokens): one exact-mode generation (plain steps through the verify graph, so every rule emits this stream) "
         "records the head's drafts and lookup's at every position; each rule is replayed on it, and its speedup "
         "predicted from calibrate's step costs.", "",
         "| rule | predicted speedup | tokens/pass | " + " | ".join(f"τ {t}" for t in tasks) + " |",
         "|---|---|---|" + "---|" * len(tasks)]
    for name, r in rules.items():
        a = r["all"]
        L.append(f"| {name} | {a['speedup']:.2f}x | {a['tokens'] / max(a['plain'] + a['cycles'], 1):.2f} | "
                 + " | ".join(num(r[t], "tau") for t in tasks) + " |")
    for n, r in head.items():
        L += ["", f"Head ({n}) τ >= lookup τ on these outputs, every task type: "
              + met_or_missed([(t, r[t].get("tau") or 0, lk[t].get("tau") or 0) for t in tasks if t != "all"]) + "."]
    return L + [""] + by_match_rows(rp.get("by_match"))


def by_match_rows(bm):
    """draft_table.py's by_match: accepted drafts per position of the ungated head and of lookup, by lookup's match."""
    if not bm:
        return []
    classes = list(next(iter(bm.values())))
    cell = lambda c: f"{c['head'] / c['positions']:.2f} / {c['lookup'] / c['positions']:.2f} ({c['positions']})" if c["positions"] else "-"  # noqa: E731
    return (["Where each drafter is better, on the same outputs: drafts accepted per position (0-K), the ungated head / "
             "lookup, by the longest match lookup finds there (positions in brackets; lookup drafts nothing without one).",
             "", "| task | " + " | ".join(MATCH_NAME.get(c, c) for c in classes) + " |", "|---|" + "---|" * len(classes)]
            + [f"| {t} | " + " | ".join(cell(cl[c]) for c in classes) + " |" for t, cl in bm.items()] + [""])


def current_section(dirs):
    """The newest head of each backbone (results/<run>/current.json names the runs) against the drafting targets, first."""
    L = ["## The newest heads against the drafting targets", "",
         "τ per task from one bench run each (int8, K=3, the benchmark prompts, which no head trains on); 'same outputs' "
         "replays lookup and the gated head on one exact-mode greedy stream (`lab/scripts/draft_table.py`), since in int8 "
         "lookup's run and the head's emit slightly different text. Full sections further down.", ""]
    for d in map(Path, dirs):
        b = json.loads((d / "bench.json").read_text())
        s = settings_of(d)
        rp = json.loads((d / "draft_replay.json").read_text()) if (d / "draft_replay.json").exists() else None
        t, tasks = b["table"], [k for k in b["tasks"] if k != "all"]
        modes = [m for m in ("lookup", "mtp+ctx", "mtp+ctx+gate", "hybrid+ctx+gate") if m in t]
        gate = f"head, gate {s.get('min_prob')}"
        same = rp and gate in rp["rules"]
        L += [f"**{b['manifest'].get('backbone_spec')}** ({d.name}; calibrate: {s.get('reason', '-')})", "",
              "| task | " + " | ".join(f"{m} τ" for m in modes)
              + (" | same outputs: lookup τ | same outputs: mtp+ctx+gate τ" if same else "") + " |",
              "|---|" + "---|" * (len(modes) + 2 * bool(same))]
        for k in tasks + ["all"]:
            L.append(f"| {k} | " + " | ".join(num(t[m][k], "accept_length") for m in modes)
                     + (f" | {num(rp['rules']['lookup'][k], 'tau')} | {num(rp['rules'][gate][k], 'tau')}" if same else "")
                     + " |")
        rows = [("head (mtp+ctx+gate) τ >= lookup τ, every task type",
                 met_or_missed([(k, t["mtp+ctx+gate"][k].get("accept_length") or 0, t["lookup"][k].get("accept_length") or 0)
                                for k in tasks]))] if "mtp+ctx+gate" in t and "lookup" in t else []
        if same:
            rows.append(("the same on the same outputs", met_or_missed(
                [(k, rp["rules"][gate][k]["tau"] or 0, rp["rules"]["lookup"][k]["tau"] or 0) for k in tasks])))
        if "hybrid+ctx+gate" in t:
            srr = [(k, t["hybrid+ctx+gate"][k]["accept_length"]) for k in ("summarize", "rewrite", "reply")]
            rows.append(("hybrid+ctx+gate τ >= 3.0 on summarize/rewrite/reply",
                         ("met: " if all(v >= 3.0 for _, v in srr) else "missed: ")
                         + ", ".join(f"{k} {v:.2f}" for k, v in srr)))
        ra = b["ratios"]
        rows.append(("speed vs plain (same run)", ", ".join(f"{m} {ra[f'{m}/plain']['all']:.2f}x" for m in modes)))
        L += ["", "| target | this run |", "|---|---|"] + [f"| {a} | {v} |" for a, v in rows] + [""]
    return L


def sampling_section(dirs):
    """Speculative sampling per backbone (<run>/sampling: `mtplite bench --temperature ...` as bench_T*.json and
    lab/scripts/sampling_acceptance.py as acceptance_T*.json): accept length and speed against plain sampling of the
    same bundle in the same run, and how many speculative outputs differ from plain sampling's."""
    L = ["Speculative sampling keeps plain sampling's tokens: the token at each position is a function of the "
         "backbone's logits there and a uniform keyed by (seed, position) (`model/sampling.py`), so verification "
         "accepts a draft exactly where plain sampling would have emitted it. '≠ plain' counts speculative outputs "
         "that differ from plain sampling's at the same seed.", ""]
    for d in map(Path, dirs):
        runs = [json.loads(f.read_text()) for f in sorted((d / "sampling").glob("bench_T*.json"))]
        if not runs:
            continue
        L += [f"**{runs[0]['manifest'].get('backbone_spec')}** ({(runs[0]['manifest'].get('quantization') or {}).get('backbone')}, "
              f"head {runs[0]['manifest'].get('head_fingerprint', '-')[:12]}, K={runs[0]['K']}, "
              f"{runs[0]['table']['plain']['all']['prompts']} benchmark prompts, "
              f"{runs[0]['max_new_tokens']} tokens)", "",
              "| temperature / top-k / top-p | mode | τ | vs plain sampling | ≠ plain (the run's modes together) |", "|---|---|---|---|---|"]
        for b in sorted(runs, key=lambda b: b["sampler"]["temperature"]):
            sm = b["sampler"]
            cfg = (f"{sm['temperature']} / {sm['top_k']} / {sm['top_p']}" if sm["temperature"] else "0 (greedy)")
            n = b["table"]["plain"]["all"]["prompts"]
            mine = [m for m in b["modes"] if m != "plain" and "@" not in m]
            differ = f"{b['spec_vs_plain_mismatches']} of {n * len(mine)}"  # counted over the run's modes together
            for m in mine:
                L.append(f"| {cfg} | {m} | {num(b['table'][m]['all'], 'accept_length')} | "
                         f"{b['ratios'][f'{m}/plain']['all']:.2f}x | {differ} |")
        acc = [json.loads(f.read_text()) for f in sorted((d / "sampling").glob("acceptance_T*.json"))]
        if acc:
            L += ["", "Drafting while sampling, same bundle and prompts (`lab/scripts/sampling_acceptance.py`, the contract "
                  "drafter): τ of the head sampling with the backbone's uniform (coupled), of the head's argmax, and of "
                  "standard rejection sampling (keeps the distribution, not the tokens).", "",
                  "| temperature / top-k / top-p | runs | coupled τ | argmax τ | rejection τ | token-exact runs |",
                  "|---|---|---|---|---|---|"]
            for a in acc:
                sm, t = a["sampler"], a["accept_length"]
                L.append(f"| {sm['temperature']} / {sm['top_k']} / {sm['top_p']} | {a['prompts']} prompts x {a['seeds']} "
                         f"seeds | {t['coupled']:.2f} | {t['argmax']:.2f} | {t['rejection']:.2f} | {a['token_exact_runs']} |")
        L.append("")
    return L


def speculative_runs(bench):
    """Speculative generations of the main bundle in a bench run (every non-plain mode without an @bundle)."""
    return (len([m for m in bench["modes"] if "@" not in m]) - 1) * bench["table"]["plain"]["all"]["prompts"]


def conversation_section(runs):
    """The official engine through its Conversation API, as apps call it (bench JSONs whose engine rows say so)."""
    L = ["Each bundle's `model.litertlm` in the official engine as an app uses it: `Engine` + `create_conversation()` "
         "+ `send_message(prompt)`, the message rendered by the prompt template the bundle carries; speculative "
         "decoding off vs on, the same prompts as our runtime's rows of the same `mtplite bench` run (the engine may "
         "emit up to K tokens past the budget with MTP on, hence text compared whole and up to the budget).", "",
         "| backbone | engine | prompts, budget | MTP off tok/s | MTP on tok/s | on / off | text equal | our runtime, best "
         "mode | answers ended by themselves | tokens in a repeated 4-gram |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    replies = []
    for b in runs:
        e, m = b["engine"], b.get("manifest") or {}
        n = b["table"]["plain"]["all"]["prompts"]
        best = max((k for k in b["ratios"] if "@" not in k), key=lambda k: b["ratios"][k]["all"])
        pl = b["table"]["plain"]["all"]
        loops = (f"{pl['ended_by_itself']}/{n} | {100 * pl['loop_share']:.0f}%" if pl.get("loop_share") is not None
                 else "- | -")
        L.append(f"| {m.get('backbone_spec')} ({(m.get('quantization') or {}).get('backbone')}) | "
                 f"{e.get('engine_version')} | {n}, {b['max_new_tokens']} | {e['engine_plain']['decode_tokens_per_s']:.1f} | "
                 f"{e['engine_mtp']['decode_tokens_per_s']:.1f} | {e['mtp/plain']:.2f}x | {e['text_equal_off']}/{n} "
                 f"({e['text_matches_off']}/{n} up to the budget) | "
                 f"{best.split('/')[0]} {b['ratios'][best]['all']:.2f}x | {loops} |")
        for r in e.get("replies", [])[:3]:
            prompt = r["prompt"] if isinstance(r["prompt"], str) else str(r["prompt"])
            replies.append(f"- {m.get('backbone_spec')}: *{prompt.strip()[:90]!r}* → MTP on: "
                           f"{r['mtp_on'].strip()[:160]!r}" + ("" if r["mtp_on"] == r["mtp_off"] else
                                                               f" (MTP off: {r['mtp_off'].strip()[:160]!r})"))
    return L + ["", "Replies (the first prompts, cut at 160 characters):", ""] + replies + [""]


def engine_section(runs):
    L = ["The same `.litertlm` in the official `litert_lm` engine, speculative decoding off vs on (`mtplite bench`, "
         "Session API on the raw prompt: measured before bundles carried their prompt template):", "",
         "| bundle | engine MTP text = MTP-off text | drafter success rate | engine MTP/plain | our runtime MTP ≠ plain |",
         "|---|---|---|---|---|"]
    for b in runs:
        e = b.get("engine") or {}
        q = (b.get("manifest") or {}).get("quantization") or {}
        n = b["table"]["plain"]["all"]["prompts"]
        if "engine_mtp" in e:
            L.append(f"| backbone {q.get('backbone')} | {e['text_matches_off']}/{n} | "
                     f"{e['engine_mtp'].get('drafter_success_rate', 0):.3f} | {e['mtp/plain']:.2f}x | "
                     f"{b['spec_vs_plain_mismatches']}/{speculative_runs(b)} |")
    return L + [""]


def render(run_dir, extra_runs=(), timed=None, quant=None, soak=None, reliability=None, fakequant=(), copy=None,
           engine=(), backbones=(), torch_mismatch=None, exact_bench=(), drills=(), current=()):
    run = Path(run_dir)
    bench = json.loads((run / "bench.json").read_text())
    head = json.loads((run / "head" / "head.json").read_text()) if (run / "head" / "head.json").exists() else {}
    man_path = run / "manifest.json" if (run / "manifest.json").exists() else Path(bench["bundle"]) / "android" / "manifest.json"
    man = json.loads(man_path.read_text()) if man_path.exists() else {}
    stats = man_path.with_name("export_stats.json")
    if stats.exists():  # export time + RSS live beside the manifest (they vary run to run)
        man = {**man, **json.loads(stats.read_text())}

    L = [f"# Results: {bench['manifest'].get('backbone_spec')}", "",
         "Generated by `python lab/results_page.py` from the JSON files of one results run (reproduce all of it with "
         "`lab/scripts/gemma_results.sh`); do not edit by hand.", "",
         "## Machine and versions", "",
         f"- CPU: {cpu_name()}, {os.cpu_count()} cores; bench threads: {bench['threads']}",
         versions_line(bench), ""]
    if current:
        L += current_section(current)
    L += ["## Head", ""]
    if head:
        c = config_of(head)
        L += [f"- backbone fingerprint `{head.get('backbone_fingerprint')}`; K={c['K']}; {c.get('num_blocks', 1)} block(s) reading "
              f"layers {c['read_layers']}{copy_read(c)}; draft vocabulary {c['draft_vocab_size']} (frequency-ranked)",
              f"- self-distilled training tokens: {head.get('train_generated_tokens')} over {head.get('train_sequences')} "
              f"sequences; training time {head.get('train_s', 0) / 60:.1f} min",
              "- held-out accept length (teacher-forced estimate) per epoch: "
              + ", ".join(f"{h['val_accept_length']:.2f}" for h in head.get("history", []))]
    L += ["", "## Bundle", ""]
    if man:
        fb = man.get("file_bytes", {})
        L += [f"- quantization: {man.get('quantization')}",
              f"- sizes: backbone {fb.get('backbone', 0) / 1e6:.1f} MB, embedder {fb.get('embedder', 0) / 1e6:.1f} MB, "
              f"drafter {fb.get('drafter', 0) / 1e6:.1f} MB; model.litertlm {man.get('litertlm_bytes', 0) / 1e6:.1f} MB",
              f"- export time {man.get('export_seconds')} s; cache length {man.get('cache_length')}; "
              f"prefill lengths {man.get('prefill_lengths')}",
              f"- calibrate: {json.dumps((man.get('settings') or {}).get('measured'))}; chosen K = "
              f"{(man.get('settings') or {}).get('K')} ({(man.get('settings') or {}).get('reason')})"]
    L += ["", "## Decode speed and acceptance (one `mtplite bench` run, modes interleaved per prompt)", "",
          "Every mode of every bundle in this run, on the same prompts:", ""] + mode_table(bench) + [
          "The full table (per task tok/s and every ratio):", "",
          "τ = accept length (tokens emitted per verify pass, bonus included). Ratios are decode tokens/s of the mode "
          "over plain greedy of the same bundle, same run.", "", markdown(bench), "",
          "![bench](bench.png)", ""]
    depth = {m: bench["table"][m]["all"].get("acceptance_per_depth") for m in bench["modes"] if not m.startswith("plain")}
    L += ["Acceptance per draft depth (all tasks): " + "; ".join(
        f"{m} " + ", ".join(f"{x:.2f}" for x in (d or [])) for m, d in depth.items()), ""]
    mtp = bench["table"].get("mtp", {}).get("all", {})
    if mtp:
        L += [f"Per MTP cycle: draft {mtp.get('draft_ms_per_cycle', 0):.1f} ms (K calls of the contract's drafter), verify "
              f"{mtp.get('verify_ms_per_cycle', 0):.1f} ms; plain decode "
              f"{1e3 / bench['table']['plain']['all']['decode_tokens_per_s']:.1f} ms per token"
              + (f"; the K-step drafter (mtp+ctx, one call per cycle) drafts in "
                 f"{bench['table']['mtp+ctx']['all']['draft_ms_per_cycle']:.1f} ms" if "mtp+ctx" in bench["table"] else "")
              + ".", ""]
    L += analysis(bench, man)
    sampled = [d for d in [run, *map(Path, backbones)] if (d / "sampling").is_dir()]
    conversation = [json.loads((d / "conversation.json").read_text()) for d in [run, *map(Path, backbones)]
                    if (d / "conversation.json").exists()]
    conversation += [b for b in timed or () if (b.get("engine") or {}).get("api") == "conversation"]
    drill_titles = dict.fromkeys(r["title"] for r in drills)  # one section per comparison, in the order given
    flat = lambda parts: [line for part in parts for line in part]  # noqa: E731
    sections = [  # (heading or None where the body brings its own, the data, the body): those with data, in order
        ("## Timed runs from an empty cache", timed, lambda: flat(map(timed_section, timed))),
        ("## Quantization", quant, lambda: quant_section(quant)),
        ("### Training against the deployed numerics", fakequant, lambda: fakequant_section(fakequant)),
        ("## Official engine, Conversation API", conversation, lambda: conversation_section(conversation)),
        ("## Official engine", engine, lambda: engine_section(engine)),
        ("## Sampling", sampled, lambda: sampling_section(sampled)),
        ("## Exactness per precision", torch_mismatch or exact_bench,
         lambda: exactness_section(quant, torch_mismatch, exact_bench, backbones)),
        ("## Copying", copy, lambda: copy_section(copy)),
        (None, drills, lambda: flat([f"### {t}", ""] + drill_section([r for r in drills if r["title"] == t])
                                    for t in drill_titles)),
        (None, backbones, lambda: flat(map(backbone_section, backbones))),
        ("## Soak", soak, lambda: soak_section(soak)),
        ("## Reliability", reliability, lambda: reliability_section(reliability)),
    ]
    for heading, data, body in sections:
        if data:
            L += ([heading, ""] if heading else []) + body()
    exps = sorted(d for d in (run / "experiments").glob("*") if (d / "bench.json").exists() and (d / "head.json").exists())
    if exps:
        L += ["## Experiments", "", "Heads trained differently, each benched in one run side by side with the int8 "
              "bundle this page reported at the time (rows marked @NAME).", ""]
        for d in exps:
            L += experiment_section(d, man.get("head_fingerprint"))
    for extra in extra_runs:
        L += [f"## {extra['title']}", "", extra["body"], ""]
    return "\n".join(L)


def settings_of(d):
    """The calibrated settings of a run dir's manifest ({} without a manifest or settings)."""
    man = d / "manifest.json"
    return (json.loads(man.read_text()).get("settings") or {}) if man.exists() else {}


def load_run(d, head_json):
    """bench.json, head.json and the manifest's calibrated settings ({} without a manifest) of a run dir."""
    return json.loads((d / "bench.json").read_text()), json.loads(Path(head_json).read_text()), settings_of(d)


# a run's or an experiment's optional analyses (lab/scripts/generalization_gap.py, same_cycles.py, draft_table.py --replay)
ANALYSES = (("generalization_gap.json", gap_rows), ("same_cycles.json", same_cycles_rows),
            ("draft_replay.json", replay_rows))


def analysis_rows(d):
    """The ANALYSES a run dir holds, rendered in that order."""
    return [line for name, rows in ANALYSES if (d / name).exists() for line in rows(json.loads((d / name).read_text()))]


def copy_read(c):
    n = c.get("copy_heads", 0)
    # copy_ngram: in head.json until its bigram option was retired; a config without it and without copy_follow
    # (which came later) is a bigram head's
    gram = "trigram" if c.get("copy_ngram", 3 if "copy_follow" in c else 2) == 3 else "bigram"
    follow = f", following its match through a {c['copy_follow']}-frequency position code" if c.get("copy_follow") else ""
    extra = len(c.get("copy_ids") or []) or c.get("copy_ids_stripped", 0)  # results/ copies keep the count only
    only = f", {extra:,} more ids it alone can draft" if extra else ""
    return f" + a copy read ({n} {gram} pointer heads over layer 0's V cache{follow}{only})" if n else ""


def config_of(h):
    """A head.json's config with what version 3 derives instead of saving (draft vocabulary size, the copy read's
    follow frequencies) filled in, so heads of every version render alike."""
    from mtplite.model.head import default_follow

    c = dict(h["config"])
    c.setdefault("draft_vocab_size", len(c.get("draft_ids") or []))
    if h.get("version", 1) >= 3 and "copy_follow" not in c:
        c["copy_follow"] = default_follow(c["hidden_size"], c.get("copy_heads", 0))
    return c


def head_summary(h):
    c = config_of(h)
    return (f"Head: K={c['K']}, {c.get('num_blocks', 1)} block(s) reading layers {c['read_layers']}{copy_read(c)}, draft vocabulary "
            f"{c['draft_vocab_size']}; {h.get('train_generated_tokens')} self-distilled tokens over "
            f"{h.get('train_sequences')} sequences, trained {h.get('train_s', 0) / 60:.1f} min"
            + (f" (fine-tuned from {Path(h['init_head']).parent.name}/{Path(h['init_head']).name})" if h.get("init_head") else "")
            + (f"; trained with the context draft space ({c['context']} ids)" if c.get("context") else ""))


def experiment_section(exp, page_head_fp=None):
    """One dir under <run>/experiments: a head trained differently, benched side by side with the page's bundle
    (`mtplite bench NEW --also NAME=PAGE_BUNDLE`), its head.json, manifest.json and optional copy_probe.json.
    An experiment's head can later become the page's: then it says so (same head fingerprint)."""
    exp = Path(exp)
    b, h, s = load_run(exp, exp / "head.json")
    fp = b["manifest"].get("head_fingerprint")
    L = [f"### {exp.name}", ""]
    if fp and fp == page_head_fp:
        L += ["This head is the one the sections above report (same head fingerprint); the rows below are its first "
              "bench, against the page's bundle of the time.", ""]
    hist = ", ".join(f"{x['val_accept_length']:.2f}" for x in h.get("history", []))
    L += [head_summary(h) + (f"; held-out accept length per epoch {hist}" if hist else "")
          + f"; calibrate: {s.get('reason', '-')}. Rows marked @NAME are the bundle NAME run in the same bench.", ""]
    L += mode_table(b)
    if "hybrid+ctx+gate" in b["table"]:  # a run with every drafting mode generate and the app run: the targets too
        L += target_rows(b)
    if (exp / "copy_probe.json").exists():
        cp = json.loads((exp / "copy_probe.json").read_text())
        L += [f"Copy probe ({cp['positions']} positions of {cp['held_out_rows']} held-out rows): head first draft right on "
              f"{100 * cp['head_acc']:.1f}% of all positions, {100 * cp['head_acc_on_copyable']:.1f}% of copyable ones, "
              f"{100 * cp['head_acc_when_no_match']:.1f}% where lookup has no match.", ""] + match_length_rows(cp)
    return L + analysis_rows(exp)


def backbone_section(run):
    """A second backbone's run (a quickstart dir with bench.json, head/head.json): head, per-task modes, targets."""
    run = Path(run)
    b, h, s = load_run(run, run / "head" / "head.json")
    spec = b["manifest"].get("backbone_spec")
    L = [f"## Second backbone: {spec}" + ("" if run.name == spec else f" (run {run.name})"), "",
         head_summary(h) + "; bundle "
         f"{(b['manifest'].get('quantization') or {}).get('backbone')}; calibrate: {s.get('reason', '-')}. Prompts go "
         "through the backbone's chat template (training, benchmark and the official engine alike).", ""]
    L += mode_table(b) + analysis(b, {"settings": s})[2:]
    return L + analysis_rows(run)


def exactness_section(quant, torch_rows, exact_bench, backbones=()):
    """Spec-vs-plain mismatches per precision and runtime, and the exact mode where they are not zero."""
    L = ["Speculative output vs the same model's plain greedy output, per precision. Cause where not zero: plain "
         "decoding runs a 1-row pass and verification a K+1-row pass; their kernels (XNNPACK's dynamic int8/int4 "
         "activation quantization, bf16 GEMM blocking) round differently and near-tie argmaxes flip. Exact mode runs "
         "plain steps as row 0 of the verify pass (`--exact` in `mtplite generate`/`bench`, `exact=True` in the torch "
         "reference), so both come from the same kernels.", "",
         "| backbone | runtime | precision | generations | MTP ≠ plain | exact mode: MTP ≠ plain | exact plain step cost |",
         "|---|---|---|---|---|---|---|"]
    name = (quant or {}).get("backbone") or (torch_rows or {}).get("backbone") or "-"
    for r in (quant or {}).get("rows", []):
        q = (r.get("quantization") or {}).get("backbone")
        qat = " (head trained against int8)" if r.get("head_target_quant") else ""
        L.append(f"| {name} | LiteRT (ours) | {q}{qat} | {quant['prompts']} | {r['spec_vs_plain_mismatches']} | - | - |")
    for b in exact_bench:
        q = ((b.get("manifest") or {}).get("quantization") or {}).get("backbone")
        L.append(f"| {name} | LiteRT (ours), --exact | {q} | {speculative_runs(b)} | - | {b['spec_vs_plain_mismatches']} "
                 "| one verify pass |")
    for r in (torch_rows or {}).get("rows", []):
        L.append(f"| {name} | torch reference | {r['dtype']} | {r['prompts']} | {r['mtp_vs_plain_mismatches']} | "
                 f"{r['exact_mtp_vs_exact_plain_mismatches']} | {r['plain_exact_cost']:.2f}x |")
    for d in backbones:  # other backbones' main bench: every speculative mode against plain
        b = json.loads((Path(d) / "bench.json").read_text())
        q = ((b.get("manifest") or {}).get("quantization") or {}).get("backbone")
        L.append(f"| {b['manifest'].get('backbone_spec')} | LiteRT (ours) | {q} | {speculative_runs(b)} | "
                 f"{b['spec_vs_plain_mismatches']} | - | - |")
    return L + [""]


def quant_label(q):
    """A bundle's weights as the mode table names them: the backbone's recipe, and the head's where it differs."""
    q = q or {}
    bq, hq = q.get("backbone", "?"), q.get("drafter")
    return bq if not hq or hq == bq else f"{bq}, head {hq}"


def mode_table(bench):
    """Modes as rows (every bundle of the run), tasks as columns: tok/s over all tasks, speed vs the same bundle's
    plain decoding, and τ per task type."""
    t, tasks = bench["table"], bench["tasks"]
    main = quant_label((bench.get("manifest") or {}).get("quantization"))
    cpu = any(t[m]["all"].get("cpu_s_per_token") for m in bench["modes"])  # recorded by newer benches only
    L = ["| mode | backbone | tok/s | vs plain (same bundle) | tokens/pass | draft / verify ms per cycle | "
         + ("CPU-ms per token | " if cpu else "") + " | ".join(f"τ {x}" for x in tasks) + " |",
         "|" + "---|" * (6 + cpu + len(tasks))]
    for m in bench["modes"]:
        base, _, n = m.partition("@")
        plain = f"plain@{n}" if n else "plain"
        bq = quant_label(bench.get("extra_bundles", {}).get(n, {}).get("quantization")) if n else main
        hq = bench.get("extra_bundles", {}).get(n, {}).get("head_target_quant") if n else None
        label = base + (f" @{n}" if n else "") + (" (head trained against int8)" if hq else "")
        tps = t[m]["all"]["decode_tokens_per_s"] or 0
        ratio = tps / t[plain]["all"]["decode_tokens_per_s"] if t[plain]["all"]["decode_tokens_per_s"] else 0
        tpp = t[m]["all"].get("tokens_per_pass")
        dm, vm = t[m]["all"].get("draft_ms_per_cycle"), t[m]["all"].get("verify_ms_per_cycle")
        ms = f"{dm:.1f} / {vm:.1f}" if dm is not None and vm is not None else "-"
        c = t[m]["all"].get("cpu_s_per_token")
        ms += (f" | {1e3 * c:.1f}" if c else " | -") if cpu else ""
        L.append(f"| {label} | {bq} | {tps:.1f} | {ratio:.2f}x | {f'{tpp:.2f}' if tpp else '-'} | {ms} | " + " | ".join(
            f"{t[m][x]['accept_length']:.2f}" if t[m][x].get("accept_length") else "-" for x in tasks) + " |")
    e = bench.get("engine") or {}
    if "engine_mtp" in e:
        for k, name in (("engine_plain", "official engine, MTP off"), ("engine_mtp", "official engine, MTP on")):
            r = e[k]["decode_tokens_per_s"] / e["engine_plain"]["decode_tokens_per_s"]
            c = f" {1e3 * e[k]['cpu_s_per_token']:.1f} |" if e[k].get("cpu_s_per_token") else " - |"
            L.append(f"| {name} | {main} | {e[k]['decode_tokens_per_s']:.1f} | {r:.2f}x | - | - |" + (c if cpu else "")
                     + " " + " | ".join("-" for _ in tasks) + " |")
    return L + [""]


def analysis(bench, man):
    """Targets from the issues against this run, and what each cycle costs (all from the JSON)."""
    meas = (man.get("settings") or {}).get("measured") or {}
    t = bench["table"]
    L = ["## Targets and what limits them", ""]
    if meas:
        dec, ver = meas["decode_ms"], meas["verify_ms"]
        K = bench["K"]
        draw = meas.get("draft_cycle_ms", K * meas["drafter_step_ms"])  # older calibrations timed one step
        cyc = draw + ver
        L += [f"Measured by `mtplite calibrate` on this bundle: decode {dec:.1f} ms, verify(K+1={K + 1}) {ver:.1f} ms "
              f"({ver / dec:.2f} decode steps), drafting {draw:.2f} ms per cycle of K={K} ({draw / dec:.3f} of a decode "
              f"step). "
              f"One MTP cycle costs {cyc:.1f} ms = {cyc / dec:.2f} decode steps, so MTP breaks even at τ = "
              f"{cyc / dec:.2f} and needs τ = {2 * cyc / dec:.2f} for 2x. Prompt lookup drafts for free: it breaks "
              f"even at τ = {ver / dec:.2f} and reaches 2x at τ = {2 * ver / dec:.2f}.", ""]
    rows = []
    for task in bench["tasks"]:
        r = [task] + [f"{t[m][task]['accept_length']:.2f}" if t[m][task].get("accept_length") else "-"
                      for m in bench["modes"] if not m.startswith("plain")]
        rows.append("| " + " | ".join(r) + " |")
    L += ["| task | " + " | ".join(f"{m} τ" for m in bench["modes"] if not m.startswith("plain")) + " |",
          "|" + "---|" * (1 + sum(not m.startswith("plain") for m in bench["modes"]))] + rows + [""]
    return L + target_rows(bench)


def target_rows(bench):
    """The issues' targets against one bench run."""
    t = bench["table"]
    ra = bench["ratios"]
    mem = bench["memory"]
    SRR = ("summarize", "rewrite", "reply")

    def srr(m):  # a mode's τ on summarize/rewrite/reply
        return ", ".join(f"{k} {t[m][k]['accept_length']:.2f}" for k in SRR if t[m].get(k, {}).get("accept_length"))

    checks = [("MTP/plain >= 2.0x on summarize/rewrite/reply",
               ", ".join(f"{k} {ra['mtp/plain'].get(k, 0):.2f}x" for k in SRR)),
              ("head τ >= 3.0 at K=3 on summarize/rewrite/reply", srr("mtp"))]
    if "hybrid" in t:
        checks.append(("hybrid τ >= 3.0 on summarize/rewrite/reply", srr("hybrid")))
    if "mtp+ctx" in t:  # the head with the context draft space (drafter_ctx.tflite), the head alone all the same
        checks.append(("head with the context draft space (mtp+ctx) τ >= 3.0 on summarize/rewrite/reply", srr("mtp+ctx")))
    if "lookup" in t:
        def head_vs_lookup(key, m="mtp"):
            return met_or_missed([(k, t[m][k].get(key) or 0, t["lookup"][k].get(key) or 0)
                                  for k in bench["tasks"] if k != "all"])

        checks.append(("head τ >= prompt lookup τ on every task type", head_vs_lookup("accept_length")))
        # τ counts only the cycles that drafted: lookup sits out the cycles it has no match for (plain steps), the head
        # drafts in every one, so the same comparison per backbone pass, plain steps included
        checks.append(("head tokens per backbone pass >= prompt lookup's on every task type (plain steps count)",
                       head_vs_lookup("tokens_per_pass")))
        if "mtp+ctx" in t:
            checks.append(("head with the context draft space τ >= prompt lookup τ on every task type",
                           head_vs_lookup("accept_length", "mtp+ctx")))
        if "mtp+ctx+gate" in t:  # both sit out the steps they have no draft for: lookup without a match, the head unsure
            checks.append(("the same head behind its calibrated gate (mtp+ctx+gate) τ >= prompt lookup τ on every task "
                           "type", head_vs_lookup("accept_length", "mtp+ctx+gate")))
    for m in ("hybrid+ctx", "hybrid+ctx+gate", "hybrid+gate"):
        if m in t:
            checks.append((f"{m} τ >= 3.0 on summarize/rewrite/reply", srr(m)))
    if "hybrid+gate" in t:
        checks.append(("hybrid+gate faster than lookup alone (all tasks)",
                       f"{ra['hybrid+gate/plain']['all']:.2f}x vs {ra['lookup/plain']['all']:.2f}x"))
    if "mtp/standalone" in ra:
        checks.append(("MTP/standalone >= 1.3x", f"{ra['mtp/standalone'].get('all', 0):.2f}x (all tasks)"))
    checks.append(("MTP extra bytes <= 10% of the backbone, zero extra KV",
                   f"{100 * mem['mtp_extra_fraction_of_backbone']:.1f}%, {mem['mtp_extra_kv_bytes']} KV bytes"))
    if "memory_saved_by_mtp_vs_standalone_bytes" in mem:
        checks.append(("memory saved vs the standalone drafter (~130 MB)",
                       f"{mem['memory_saved_by_mtp_vs_standalone_bytes'] / 1e6:.1f} MB per instance"))
    n_spec = speculative_runs(bench)
    checks.append(("speculative output == plain greedy (same bundle)",
                   f"{bench['spec_vs_plain_mismatches']} of {n_spec} speculative generations differ"))
    e = bench.get("engine") or {}
    if "engine_mtp" in e:
        checks.append(("official litert_lm engine: MTP on gives the same text as off",
                       f"{e['text_matches_off']}/{bench['table']['plain']['all']['prompts']} prompts; engine MTP/plain "
                       f"{e['mtp/plain']:.2f}x, drafter success rate {e['engine_mtp'].get('drafter_success_rate')}"))
    return ["| target | this run |", "|---|---|"] + [f"| {a} | {b} |" for a, b in checks] + [""]


AUTO_FILES = {"timed": ["fresh_quickstart_bench.json", "fresh_quickstart_quick_bench.json"],
              "quant": "quant_report.json", "soak": "soak-gemma-int8.json", "reliability": "reliability.json",
              "fakequant": ["fakequant_int8.json", "fakequant_int4.json"], "copy_probe": "copy_probe.json",
              "engine": ["bench.json", "bench_float_engine.json"], "extra": ["notes.json"],
              "torch_mismatch": "torch_mismatch.json", "exact_bench": ["bench_exact_int8.json", "bench_exact_int4.json"],
              "drills": ["drill_ablation.json", "drill_ablation_seed1.json", "copy_ablation.json",
                         "copy_ablation_seed1.json", "copy_ngram_ablation.json",
                         "copy_follow_ablation.json", "copy_vocab_ablation.json"]}


def auto(a):
    """Fill the arguments from the files a results dir holds (so the page, its test and the script agree)."""
    run = Path(a.run_dir)
    for key, names in AUTO_FILES.items():
        if isinstance(names, list):
            getattr(a, key).extend(str(run / n) for n in names if (run / n).exists())
        elif getattr(a, key) is None and (run / names).exists():
            setattr(a, key, str(run / names))
    a.backbone_run += [str(d) for d in sorted(run.parent.iterdir()) if d != run and (d / "bench.json").exists()
                       and (d / "head" / "head.json").exists()]
    if not a.current and (run / "current.json").exists():  # {"runs": [dirs relative to RUN_DIR]}
        a.current = [str(run / d) for d in json.loads((run / "current.json").read_text())["runs"]]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python lab/results_page.py")
    ap.add_argument("run_dir")
    ap.add_argument("--out", default="lab/EXPERIMENTS.md")
    ap.add_argument("--extra", action="append", default=[], help="JSON file {title, body} appended as a section")
    ap.add_argument("--timed", action="append", default=[], help="bench.json of a quickstart run from an empty cache")
    ap.add_argument("--quant", help="JSON of `mtplite quant-report`")
    ap.add_argument("--soak", help="JSON of `mtplite soak`")
    ap.add_argument("--reliability", help="JSON of lab/scripts/reliability_report.py")
    ap.add_argument("--fakequant", action="append", default=[], help="JSON of lab/scripts/fakequant_match.py")
    ap.add_argument("--copy-probe", help="JSON of lab/scripts/copy_probe.py")
    ap.add_argument("--engine", action="append", default=[], help="bench JSON with engine rows (one per bundle)")
    ap.add_argument("--backbone-run", action="append", default=[],
                    help="dir of another backbone's run (bench.json, head/head.json, manifest.json)")
    ap.add_argument("--torch-mismatch", help="JSON of lab/scripts/torch_mismatch.py")
    ap.add_argument("--exact-bench", action="append", default=[], help="bench JSON of a `mtplite bench --exact` run")
    ap.add_argument("--drills", action="append", default=[], help="JSON of lab/probes/drill_ablation.py")
    ap.add_argument("--current", action="append", default=[],
                    help="a run dir (bench.json, manifest.json) whose head leads the page: the newest per backbone")
    ap.add_argument("--auto", action="store_true",
                    help="take every known JSON in RUN_DIR (AUTO_FILES) and sibling runs of other backbones")
    a = ap.parse_args(argv)
    if a.auto:
        auto(a)
    extras = [json.loads(Path(e).read_text()) for e in a.extra]
    load = lambda f: json.loads(Path(f).read_text()) if f else None
    text = render(a.run_dir, extras, timed=[load(f) for f in a.timed], quant=load(a.quant), soak=load(a.soak),
                  reliability=load(a.reliability), fakequant=[load(f) for f in a.fakequant],
                  copy=load(a.copy_probe), engine=[load(f) for f in a.engine], backbones=a.backbone_run,
                  torch_mismatch=load(a.torch_mismatch), exact_bench=[load(f) for f in a.exact_bench],
                  drills=[load(f) for f in a.drills], current=a.current)
    write_text_atomic(a.out, text)
    png = Path(a.run_dir) / "bench.png"
    if png.exists():
        shutil.copyfile(png, Path(a.out).parent / "bench.png")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
