"""Prompt lookup (n-gram copy) drafting, alone or as the first choice of a hybrid with the MTP head.

The base models we target echo their prompt and loop, so copying the continuation of the latest earlier match of the
last 3, 2 or 1 tokens is a strong, free drafter. `history` is the list of every token so far (prompt + emitted).
"""


def lookup(history, k, max_ngram=3):
    """The k tokens that followed the most recent earlier occurrence of the longest trailing n-gram, or None."""
    L = len(history)
    for n in range(min(max_ngram, L - 1), 0, -1):
        tail = history[L - n :]
        for s in range(L - n - 1, -1, -1):
            if history[s : s + n] == tail:
                cont = history[s + n : s + n + k]
                if cont:
                    return (cont + [cont[-1]] * k)[:k]  # verify takes exactly k drafts: pad by repeating
    return None


def lookup_steps(steps, history, k_head=None, mode="lookup"):
    """Wrap step functions: mode 'lookup' drafts only by lookup (None -> plain step), 'hybrid' falls back to the
    head. `history` must be kept up to date by the caller (prompt ids + every emitted token)."""
    prefill, decode, verify, draft = steps
    source = []  # per cycle: 'lookup' | 'head'

    def draft2(tok, act, pos, k):
        d = lookup(history, k)
        if d is not None:
            source.append("lookup")
            return d
        if mode == "hybrid":
            source.append("head")
            return draft(tok, act, pos, k)
        return None

    return (prefill, decode, verify, draft2), source
