"""Every position's drafts on one greedy stream, and hybrid rules replayed on them.

A LiteRT generation decodes plainly; at every position the head (the drafter generate runs, ungated) drafts K tokens
with their probabilities; prompt lookup's draft is taken from the text so far when a rule is replayed. Since greedy
decoding emits the same stream whoever drafts (the bench checks it), any rule choosing a drafter per cycle can then be
replayed on the table: a cycle at position i accepts what the stream confirms and moves to i + accepted + 1; a declined
draft is a plain step. The replay gives each rule's τ per task and its predicted speed from the bundle's calibrated
step costs, without a LiteRT run per rule.

  python lab/scripts/draft_table.py BUNDLE [--prompts tasks.jsonl] [--json table.json]
  python lab/scripts/draft_table.py --replay table.json [--json rules.json]
"""
import argparse
import json
import platform
import sys
from collections import defaultdict

from mtplite.errors import UserError, run_main
from mtplite.paths import write_text_atomic
from mtplite.runtime.lookup import accepted, lookup


def table(b, ids, K, max_new, eos):
    """The greedy stream (prompt included) and, per drafted position i (the stream index of the first draft), the
    head's K drafts and their probabilities."""
    from mtplite.model import generate as G

    history, heads = list(ids), {}
    prefill, decode, verify, draft = b.steps()
    b.min_prob, b.record_probs = 0.0, []

    def record(tok, act, pos, k):
        heads[len(history)] = (draft(tok, act, pos, k), b.record_probs[-1])
        return None  # always a plain step: the stream is plain greedy decoding

    try:
        res = G.run(ids, (prefill, decode, verify, record), max_new_tokens=max_new + K, eos_ids=eos, K=K,
                    cache_len=b.C, on_token=history.append)
    finally:
        b.record_probs = None
    if res["stop_reason"] == "eos":
        history.append(EOS)  # the step that emits EOS is a step of every rule's run too
    return history, heads


EOS = -1  # the stream's end by an EOS token (no draft matches it: a drafted EOS is rare enough to ignore)


# ---- rules: (stream so far, the head's (draft, probs) here) -> (draft or None, head steps run, source) ------------

def head_gated(dh, ph, gate):
    """The head's draft behind its gate as Bundle.draft runs it: all K drafts, or None where the first is below the
    gate; and the head steps that took (one call of the K-step drafter, counted as K)."""
    return (None if ph[0] < gate else dh), len(ph)


def rule_hybrid(min_ngram, gate):
    def choose(hist, dh, ph):
        dl = lookup(hist, len(dh), min_ngram=min_ngram)
        if dl is not None:
            return dl, 0, "lookup"
        d, steps = head_gated(dh, ph, gate)
        return d, steps, "head"
    return choose


def rule_lookup():
    def choose(hist, dh, ph):
        return lookup(hist, len(dh)), 0, "lookup"
    return choose


def rule_head(gate):
    def choose(hist, dh, ph):
        d, steps = head_gated(dh, ph, gate)
        return d, steps, "head"
    return choose


def replay(rows, choose, K):
    """Per task: tokens, plain steps, cycles, accepted, head steps run."""
    out = defaultdict(lambda: defaultdict(int))
    for r in rows:
        stream, P, heads = r["stream"], r["P"], r["heads"]
        end = min(P + r["max_new"], len(stream))  # an EOS ends the stream early (the step emitting it counts)
        s = out[r["task"]]
        s["plain"] += 1  # the first step after prefill
        i = P + 1
        while i < end:
            dh, ph = heads[i]
            d, steps, src = choose(stream[:i], dh, ph)
            s["head_steps"] += steps
            if d is None:
                s["plain"] += 1
                i += 1
                continue
            a = accepted(d, stream, i, K)
            s["cycles"] += 1
            s["accepted"] += a
            s[f"accepted_{src}"] += a
            s[f"cycles_{src}"] += 1
            i += a + 1
        s["tokens"] += min(i, end) - P
    return out


def score(by_task, t_dec, t_ver, t_dr):
    """replay()'s counts per task and over all tasks, with τ and the speedup the step costs predict."""
    tot = defaultdict(int)
    for s in by_task.values():
        for k, v in s.items():
            tot[k] += v
    out = {}
    for task, s in sorted(by_task.items()) + [("all", tot)]:
        secs = s["plain"] * t_dec + s["cycles"] * t_ver + s["head_steps"] * t_dr
        out[task] = {**s, "tau": 1 + s["accepted"] / s["cycles"] if s["cycles"] else None,
                     "speedup": s["tokens"] * t_dec / secs if secs else None}
    return out


def match_class(hist, K):
    """The position's class by lookup's longest match: "none", "1", "2", "3", or "3*" for a 3-token match whose earlier
    occurrences continue differently (where lookup's latest-wins rule and the head's pointer can part)."""
    L = len(hist)
    for n in (3, 2, 1):
        conts = [hist[s + n : s + n + K] for s in range(L - n - 1, -1, -1) if hist[s : s + n] == hist[L - n :]]
        if conts:
            if n == 3 and any(c[: len(conts[0])] != conts[0][: len(c)] for c in conts[1:]):
                return "3*"
            return str(n)
    return "none"


MATCH_CLASSES = ("none", "1", "2", "3", "3*")


def by_match(rows, K):
    """Per task and match class: positions, drafts the ungated head and lookup get accepted there (the head drafts
    everywhere; lookup nowhere on "none"). Where each drafter is better, on the same outputs."""
    out = defaultdict(lambda: {c: {"positions": 0, "head": 0, "lookup": 0} for c in MATCH_CLASSES})
    for r in rows:
        stream, P, heads = r["stream"], r["P"], r["heads"]
        for i in range(P + 1, min(P + r["max_new"], len(stream))):
            hist = stream[:i]
            s = out[r["task"]][match_class(hist, K)]
            s["positions"] += 1
            s["head"] += accepted(heads[i][0], stream, i, K)
            s["lookup"] += accepted(lookup(hist, K), stream, i, K)
    return {t: out[t] for t in sorted(out)}


def rules(gate):
    """The rules replayed: lookup alone, the head alone and hybrid per shortest match, ungated and behind `gate`."""
    gates = (0.0,) + ((gate,) if gate else ())
    return ([("lookup", rule_lookup())] + [(f"head, gate {g}", rule_head(g)) for g in gates]
            + [(f"hybrid >= {n}, gate {g}", rule_hybrid(n, g)) for g in gates for n in (1, 2, 3)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle", nargs="?")
    ap.add_argument("--prompts", default=None, help="JSONL with id/task/prompt (default: the benchmark prompts)")
    ap.add_argument("--replay", default=None, help="a table this script wrote: replay the rules on it")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.replay:
        try:
            t = json.loads(open(a.replay).read())
            for r in t["rows"]:
                r["heads"] = {int(i): v for i, v in r["heads"].items()}
            m = t["measured"]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise UserError(f"{a.replay}: cannot read a draft table ({type(e).__name__}: {str(e)[:80]}); write one "
                            "with draft_table.py BUNDLE --json")
        t_dec, t_ver, t_dr = m["decode_ms"], m["verify_ms"], m["drafter_step_ms"]
        res = {name: score(replay(t["rows"], choose, t["K"]), t_dec, t_ver, t_dr)
               for name, choose in rules(t.get("min_prob") or 0.0)}
        tasks = [k for k in next(iter(res.values())) if k != "all"] + ["all"]
        print(f"{'rule':22s} {'speed':>6s} " + " ".join(f"{k[:9]:>9s}" for k in tasks))
        for name, r in res.items():
            print(f"{name:22s} {r['all']['speedup']:6.3f} " + " ".join(
                f"{r[k]['tau']:9.2f}" if r[k]['tau'] else f"{'-':>9s}" for k in tasks))
        bm = by_match(t["rows"], t["K"])
        print("\naccepted drafts per position, ungated head / lookup, by lookup's match (3*: earlier matches differ)")
        print(f"{'task':10s} " + " ".join(f"{c:>16s}" for c in MATCH_CLASSES))
        for task, cl in bm.items():
            print(f"{task:10s} " + " ".join(
                f"{c['head'] / c['positions']:5.2f} /{c['lookup'] / c['positions']:5.2f} {c['positions']:4d}"
                if c["positions"] else f"{'-':>16s}" for c in cl.values()))
        if a.json:
            write_text_atomic(a.json, json.dumps({"table": a.replay, "rows": len(t["rows"]), "rules": res, "by_match": bm,
                                                  **{k: t.get(k) for k in ("bundle", "K", "drafter", "max_new_tokens",
                                                                           "min_prob", "measured", "prompts")}},
                                                 indent=1))
        return
    if not a.bundle:
        raise UserError("draft_table.py: pass a bundle directory, or --replay a table")
    from mtplite.data.benchmark import default_prompts, load_prompts
    from mtplite.runtime.litert import encode
    from mtplite.runtime.litert import Bundle, load_tokenizer

    # exact: plain steps run as row 0 of the verify graph, so the stream is the one every rule's cycles emit (int8's
    # 1-row decode rounds differently from verify and would replay a stream no speculative run produces)
    b = Bundle(a.bundle, threads=a.threads, mtp=True, context=True, exact=True)
    b.use_context = "drafter_ctx" in b.models  # the drafter `mtplite generate` runs by default
    tok = load_tokenizer(a.bundle)
    eos = set(b.man["eos_ids"])
    measured = (b.man.get("settings") or {}).get("measured")
    if not measured:
        raise UserError(f"{a.bundle}: no calibrated step costs in its manifest; run `mtplite calibrate {a.bundle}`")
    rows = []
    for p in load_prompts(a.prompts or default_prompts()):
        ids = encode(tok, b.man, p["prompt"])
        if len(ids) + a.max_new_tokens + b.K + 1 >= b.C:
            continue
        stream, heads = table(b, ids, b.K, a.max_new_tokens, eos)
        rows.append({"id": p.get("id"), "task": p["task"], "P": len(ids), "max_new": a.max_new_tokens,
                     "stream": stream, "heads": heads})
        print(f"{p.get('id')}: {len(stream) - len(ids)} tokens", file=sys.stderr)
    if a.json:
        write_text_atomic(a.json, json.dumps({
            "bundle": a.bundle, "K": b.K, "drafter": "drafter_ctx" if b.use_context else "drafter",
            "max_new_tokens": a.max_new_tokens, "threads": a.threads, "measured": measured,
            "min_prob": b.calibrated_min_prob(), "prompts": a.prompts or "benchmark",
            "machine": platform.processor() or platform.machine(), "rows": rows}))


if __name__ == "__main__":
    sys.exit(run_main(main, "draft_table.py"))
