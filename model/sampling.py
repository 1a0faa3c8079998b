"""Seeded sampling defined per position, so that speculative decoding emits plain sampling's very tokens.

The token that will sit at cache position t is a function of the logits that predict it and of one uniform u_t,
drawn from a counter-based generator keyed by (seed, t): no generator state advances, so it does not matter whether
the logits came from a plain decode step, a row of a verify pass, or the head (which drafts with the same u_t, and so
proposes the backbone's own sample wherever its distribution is close). Verification accepts a draft only where it
equals the backbone's sample at that position: accepted blocks are exactly what plain sampling emits.

The sampler (inverse CDF, in float64):
  temperature 0          argmax (the lowest id among equal maxima), u unused: greedy decoding, exactly as before
  otherwise              candidates ordered by logit, high to low, ties by lower id; the top_k first (0 = all);
                         p_i = exp((l_i - l_max) / T), normalized; the shortest prefix whose mass reaches top_p
                         (renormalized); the token is the first candidate whose cumulative mass exceeds u * total.
android_demo/core Sampling.kt implements the same generator and sampler (tests/test_sampling.py: golden traces).
"""
from dataclasses import dataclass

import numpy as np

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def uniform(seed, t):
    """u in [0, 1) for position t: SplitMix64's finalizer over seed + (t + 1) * golden ratio, top 53 bits."""
    z = (int(seed) + (int(t) + 1) * GOLDEN) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    z ^= z >> 31
    return (z >> 11) * (1.0 / (1 << 53))


@dataclass(frozen=True)
class Sampler:
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    @property
    def greedy(self):
        return self.temperature == 0

    def pick(self, logits, t, ids=None):
        """The token for cache position t from `logits` over `ids` (the full vocabulary when None: ids = indices)."""
        lg = np.asarray(logits)
        if self.greedy:
            i = int(lg.argmax())
            return int(ids[i]) if ids is not None else i
        return sample(lg, uniform(self.seed, t), self.temperature, self.top_k, self.top_p, ids)


def check(temperature, top_k, top_p):
    """One-line errors for settings the sampler cannot take."""
    from mtplite.errors import UserError

    if not (temperature >= 0) or temperature != temperature or temperature == float("inf"):
        raise UserError(f"--temperature {temperature}: must be a finite number >= 0 (0 = greedy)")
    if int(top_k) != top_k or top_k < 0:
        raise UserError(f"--top-k {top_k}: must be a whole number >= 0 (0 = no top-k cut)")
    if not (0 < top_p <= 1):
        raise UserError(f"--top-p {top_p}: must be in (0, 1] (1 = no nucleus cut)")


def candidates(lg, ids, top_k):
    """Candidate order: logit high to low, ties by lower token id; only the top_k first when top_k > 0."""
    tid = np.arange(len(lg)) if ids is None else np.asarray(ids)
    n = len(lg)
    if 0 < top_k < n:
        # the k-th largest logit; everything above it is in, and ties at it go by id. Found among the logits within a
        # gap of the maximum once at least top_k lie there (then the k-th largest does too): a partition of all 262k
        # logits per verify row cost more than a Gemma verify pass's sampling could afford
        sub, m = None, lg.max()
        for gap in (4.0, 16.0, 64.0):
            sub = np.flatnonzero(lg >= m - gap)
            if len(sub) >= top_k:
                break
        else:
            sub = np.arange(n)
        kth = np.partition(lg[sub], len(sub) - top_k)[len(sub) - top_k]
        idx = sub[lg[sub] >= kth]
    else:
        idx = np.arange(n)
    order = np.lexsort((tid[idx], -lg[idx].astype(np.float64)))
    idx = idx[order]
    return idx[:top_k] if top_k > 0 else idx


def distribution(lg, temperature, top_k=0, top_p=1.0, ids=None):
    """The sampler's distribution: (indices into lg in candidate order, unnormalized float64 masses)."""
    idx = candidates(lg, ids, top_k)
    z = lg[idx].astype(np.float64)
    p = np.exp((z - z[0]) / temperature)
    if top_p < 1.0:
        c = np.cumsum(p)
        keep = int(np.searchsorted(c, top_p * c[-1])) + 1  # the shortest prefix with mass >= top_p
        idx, p = idx[:keep], p[:keep]
    return idx, p


def sample(lg, u, temperature, top_k=0, top_p=1.0, ids=None):
    idx, p = distribution(lg, temperature, top_k, top_p, ids)
    c = np.cumsum(p)
    i = min(int(np.searchsorted(c, u * c[-1], side="right")), len(p) - 1)
    tok = idx[i]
    return int(ids[tok]) if ids is not None else int(tok)


def add_args(p):
    """--temperature / --top-k / --top-p / --seed for every command that samples."""
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); > 0 samples (seeded, per "
                   "position: MTP on or off gives the same tokens)")
    p.add_argument("--top-k", type=int, default=0, help="sample among the k most likely tokens (0 = all)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus: the smallest set with this much mass (1 = all)")
    p.add_argument("--seed", type=int, default=0, help="the sampler's seed")


def from_args(a):
    check(a.temperature, a.top_k, a.top_p)
    return Sampler(float(a.temperature), int(a.top_k), float(a.top_p), int(a.seed) & MASK64)
