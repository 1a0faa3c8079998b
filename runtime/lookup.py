"""Prompt lookup (n-gram copy) drafting, alone or as the first choice of a hybrid with the MTP head.

The base models we target echo their prompt and loop, so copying the continuation of the latest earlier match of the
last 3, 2 or 1 tokens is a strong, free drafter. `history` is the list of every token so far (prompt + emitted).
"""


from mtplite.export.contract import HYBRID_MIN_NGRAM


def lookup(history, k, max_ngram=3, min_ngram=1):
    """The k tokens that followed the most recent earlier occurrence of the longest trailing n-gram, or None."""
    L = len(history)
    for n in range(min(max_ngram, L - 1), min_ngram - 1, -1):
        tail = history[L - n :]
        for s in range(L - n - 1, -1, -1):
            if history[s : s + n] == tail:
                cont = history[s + n : s + n + k]
                if cont:
                    return (cont + [cont[-1]] * k)[:k]  # verify takes exactly k drafts: pad by repeating
    return None


def accepted(d, stream, i, k):
    """How many of draft d the greedy `stream` confirms from position i (0 without a draft): a drafter scored on a
    stream it did not produce (lab/scripts/same_cycles.py, lab/scripts/draft_table.py)."""
    a = 0
    while d is not None and a < k and i + a < len(stream) and d[a] == stream[i + a]:
        a += 1
    return a


def lookup_steps(steps, history, mode="lookup", min_ngram=None):
    """Wrap step functions: mode 'lookup' drafts only by lookup (None -> plain step), 'hybrid' takes lookup's
    draft on a match of `min_ngram` (default HYBRID_MIN_NGRAM) or more tokens and the head's otherwise. `history`
    must be kept up to date by the caller (prompt ids + every emitted token)."""
    prefill, decode, verify, draft = steps
    source = []  # per cycle: 'lookup' | 'head'

    # Which matches to copy depends on the head and the device: a weak head (head-880k) lost to lookup even on 1-token
    # matches, which lookup drafts for free (hybrid+gate 1.02x / 0.98x lookup's speed copying on any match, 0.96x /
    # 0.95x leaving them to the head; lab/results/micro/hybrid_rule_gemma*.json); with the context space the best length
    # moved between 1 and 3 with backbone and timing (lab/notes/PERF.md). Hence a measured, per-bundle choice.
    min_ngram = (min_ngram or HYBRID_MIN_NGRAM) if mode == "hybrid" else 1

    def draft2(tok, act, pos, k):
        d = lookup(history, k, min_ngram=min_ngram)
        if d is not None:
            source.append("lookup")
            return d
        if mode == "hybrid":
            source.append("head")
            return draft(tok, act, pos, k)
        return None

    return (prefill, decode, verify, draft2), source


def drafting(steps, ids, draft, min_ngram=None, on_token=None):
    """Step functions for `draft` ('mtp' | 'hybrid' | 'lookup'), the token callback that keeps lookup's history
    (chained with `on_token`), and the per-cycle source list hybrid fills."""
    if draft == "mtp":
        return steps, on_token, []
    history = list(ids)
    steps, source = lookup_steps(steps, history, mode=draft, min_ngram=min_ngram)

    def on_tok(t):
        history.append(t)
        if on_token:
            on_token(t)

    return steps, on_tok, source


def source_counts(source, trace):
    """{"accepted_by_source": {drafter: {accepted, cycles}}} of a hybrid run's cycles ({} when none was recorded)."""
    out = {}
    for src, c in zip(source, trace):
        o = out.setdefault(src, {"accepted": 0, "cycles": 0})
        o["accepted"] += c["accepted"]
        o["cycles"] += 1
    return {"accepted_by_source": out} if out else {}


DRAFT_WHO = {"mtp": "the MTP head", "hybrid": "prompt lookup on matches of >= {n} tokens, else the MTP head",
             "lookup": "prompt lookup alone (plain steps where the text does not repeat)"}
