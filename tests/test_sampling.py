"""Speculative sampling that emits plain sampling's very tokens: the seeded per-position sampler (model/sampling.py),
the torch reference and the LiteRT runtime (float and int8), its statistics, and the CLI's refusals."""
import subprocess
import sys

import numpy as np
import pytest

from conftest import PROMPTS, trained
from test_export_runtime import C, bundle
from test_quantize import qbundle

SETTINGS = [dict(temperature=0.7, top_p=0.8), dict(temperature=1.0, top_k=64, top_p=0.95)]  # top-p alone; Gemma's settings
SEEDS = (1, 2, 3)


def test_sampler_definition():
    from mtplite.model.sampling import Sampler, sample, uniform

    us = [uniform(7, t) for t in range(1000)]
    assert all(0 <= u < 1 for u in us) and len(set(us)) == 1000
    assert uniform(7, 5) == uniform(7, 5) != uniform(8, 5)
    lg = np.array([0.5, 2.0, 2.0, -1.0], np.float32)
    assert Sampler().pick(lg, 0) == 1  # greedy: the first maximum
    assert all(sample(lg, u, 1.0, top_k=1) == 1 for u in (0.0, 0.5, 0.999))  # tie goes to the lower id
    assert {sample(lg, u, 1.0, top_k=2) for u in np.linspace(0, 0.999, 50)} == {1, 2}
    # top_p: id 1 alone holds 0.44 of the mass, so p = 0.4 keeps only it (0.5 keeps ids 1 and 2)
    assert {sample(lg, u, 1.0, top_p=0.4) for u in np.linspace(0, 0.999, 50)} == {1}
    assert {sample(lg, u, 1.0, top_p=0.5) for u in np.linspace(0, 0.999, 50)} == {1, 2}
    # over ids: ties by id, the returned token is the id
    assert sample(lg, 0.0, 1.0, top_k=1, ids=np.array([40, 30, 20, 10])) == 20


def test_top_k_candidates_are_the_full_sort_s():
    """The candidate search looks only near the maximum; it must give exactly what a full sort gives, ties and
    masked (NEG_INF) logits included, whether or not top_k logits lie within its first gap."""
    from mtplite.model.decoder import NEG_INF
    from mtplite.model.sampling import candidates

    rng = np.random.default_rng(0)
    for case in range(300):
        n = int(rng.integers(2, 3000))
        lg = (rng.standard_normal(n) * rng.choice([0.1, 3, 40])).astype(np.float32)
        if case % 3 == 0:
            lg = np.round(lg)  # many ties
        if case % 5 == 0:
            lg[rng.random(n) < 0.7] = NEG_INF
        ids = rng.permutation(n) if case % 2 else None
        tid = np.arange(n) if ids is None else ids
        for k in (1, 8, 64, n - 1, n):
            full = np.lexsort((tid, -lg.astype(np.float64)))[:k]
            assert candidates(lg, ids, k).tolist() == full.tolist(), (case, k)


def test_first_token_frequencies_match_the_distribution():
    """Chi-square over 4,000 seeds on a tiny model's first sampled token (T = 1, top-k 8): fixed seeds, no flakes."""
    import torch

    from mtplite.model import generate as G
    from mtplite.model.decoder import causal_mask
    from mtplite.model.sampling import Sampler

    bb, *_ = trained("tiny:gemma3")
    dec = bb.model
    ids = bb.encode(PROMPTS[2])
    pos = torch.arange(len(ids), dtype=torch.int32)
    with torch.no_grad():
        lg = dec(dec.embed(torch.tensor([ids])), pos, causal_mask(pos, C), dec.empty_cache(C))[0][0, -1].numpy()
    top = np.argsort(-lg.astype(np.float64), kind="stable")[:8]
    p = np.exp(lg[top].astype(np.float64) - lg[top].max())
    p /= p.sum()
    n = 4000
    counts = {int(t): 0 for t in top}
    for seed in range(n):
        counts[Sampler(1.0, 8, 1.0, seed).pick(lg, len(ids))] += 1
    obs = np.array([counts[int(t)] for t in top], float)
    chi2 = float(((obs - n * p) ** 2 / (n * p)).sum())
    assert chi2 < 24.3, (chi2, obs, n * p)  # chi-square, 7 degrees of freedom, p = 0.001
    # the loop picks the first token the same way
    steps = G.torch_steps(bb, None, C, sampler=Sampler(1.0, 8, 1.0, 11))
    first = G.run(ids, steps, max_new_tokens=1, K=0, cache_len=C)["tokens"][0]
    assert first == Sampler(1.0, 8, 1.0, 11).pick(lg, len(ids))


def _runs(steps_fn, ids, K, eos, n=16):
    from mtplite.model import generate as G

    return G.run(ids, steps_fn(), max_new_tokens=n, eos_ids=eos, K=K, cache_len=C)


@pytest.mark.parametrize("spec", ["tiny:gemma3"])  # its head drafts with the context space; LiteRT runs both drafters
def test_speculative_sampling_is_plain_sampling_torch(spec):
    from mtplite.model import generate as G
    from mtplite.model.sampling import Sampler

    bb, head, *_ = trained(spec)
    eos, outs = set(bb.eos_ids), set()
    accepted = 0
    for p in PROMPTS[:20]:
        ids = bb.encode(p)
        for kw in SETTINGS:
            for seed in SEEDS:
                s = Sampler(seed=seed, **kw)
                mk = lambda: G.torch_steps(bb, head, C, sampler=s, context=head.c.context)
                plain, spec_ = _runs(mk, ids, 0, eos), _runs(mk, ids, head.c.K, eos)
                assert spec_["tokens"] == plain["tokens"], (p, kw, seed)
                outs.add(tuple(plain["tokens"]))
                accepted += spec_["accepted"]
    assert len(outs) > 0.8 * 20 * len(SETTINGS) * len(SEEDS)  # seeds give different texts
    assert accepted > 0  # the head's coupled drafts were accepted, not only bonus tokens


@pytest.mark.parametrize("recipe", ["float", "int8"])
def test_speculative_sampling_is_plain_sampling_litert(recipe, tmp_path_factory):
    from mtplite.model import generate as G
    from mtplite.model.sampling import Sampler
    from mtplite.runtime.litert import Bundle

    bb, head, *_ = trained("tiny:gemma3")
    d = bundle("tiny:gemma3") if recipe == "float" else qbundle(recipe, tmp_path_factory)
    b = Bundle(d, threads=1, context=True)
    eos, same_as_torch, n = set(bb.eos_ids), 0, 0
    for p in PROMPTS[:20]:
        ids = bb.encode(p)
        for kw in SETTINGS:
            for seed in SEEDS:
                s = Sampler(seed=seed, **kw)
                for ctx in ((False, True) if recipe == "float" else (True,)):  # int8: the drafter our runtime uses
                    b.use_context = ctx
                    plain, spec_ = _runs(lambda: b.steps(s), ids, 0, eos), _runs(lambda: b.steps(s), ids, 3, eos)
                    assert spec_["tokens"] == plain["tokens"], (recipe, p, kw, seed, ctx)
                if recipe == "float":  # LiteRT float == the torch reference
                    ref = _runs(lambda: G.torch_steps(bb, None, C, sampler=s), ids, 0, eos)
                    same_as_torch += ref["tokens"] == plain["tokens"]
                    n += 1
    if recipe == "float":
        assert same_as_torch == n


def test_cli_refuses_bad_sampler_settings():
    for flag, val in (("--temperature", "-1"), ("--top-p", "0"), ("--top-p", "1.5"), ("--top-k", "-3"),
                      ("--temperature", "nan")):
        r = subprocess.run([sys.executable, "-m", "mtplite.cli", "generate", "--backbone", "tiny:gemma3", "--no-mtp",
                            "--prompt", "x", flag, val], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2, (flag, val, r.stderr[-500:])
        assert "Traceback" not in r.stderr and flag in r.stderr.strip().splitlines()[-1], r.stderr[-500:]


def write_sampling_golden(path):
    """Logits rows (float32, exact reprs), settings, seed, position and Python's token: Kotlin's Sampler must agree."""
    from mtplite.model.sampling import Sampler

    rng = np.random.default_rng(0)
    lines = []
    for case in range(300):
        V = int(rng.integers(2, 300))
        lg = (rng.standard_normal(V) * rng.uniform(0.1, 8)).astype(np.float32)
        if case % 7 == 0:  # ties
            lg[rng.integers(0, V, 3)] = lg.max()
        T = [0.0, 0.3, 0.7, 1.0, 1.5][case % 5]
        k = [0, 1, 5, 64][case % 4]
        p = [1.0, 0.95, 0.5][case % 3]
        seed = int(rng.integers(-2**63, 2**63 - 1))
        t = int(rng.integers(0, 4096))
        tok = Sampler(T, k, p, seed).pick(lg, t)
        lines.append(f"{T!r} {k} {p!r} {seed} {t} {tok} | " + " ".join(repr(float(x)) for x in lg))
    path.write_text("\n".join(lines) + "\n")
    return len(lines)


def test_batched_inverse_cdf_is_the_sampler():
    """train/sampled.py draws many rows at once; each must be model/sampling.py's sample() of that row."""
    import torch

    from mtplite.model.sampling import sample
    from mtplite.train.sampled import inverse_cdf

    rng = np.random.default_rng(0)
    lg = rng.normal(0, 3, (64, 300))
    ids = np.stack([rng.permutation(1000)[:300] for _ in range(64)])
    ids[:, -20:] = -1  # columns that cannot be drawn (unseen context slots)
    u = rng.random(64)
    for T, k, p in [(1.0, 0, 1.0), (1.0, 64, 0.95), (0.7, 16, 0.9), (1.5, 0, 0.5)]:
        got = inverse_cdf(torch.tensor(lg), torch.tensor(ids), torch.tensor(u), T, k, p).tolist()
        want = [sample(lg[i, :-20], u[i], T, k, p, ids[i, :-20]) for i in range(64)]
        assert got == want, (T, k, p)


@pytest.mark.parametrize("spec", ["tiny:gemma3", "tiny:llama"])
def test_teacher_forced_coupled_acceptance_is_the_runtime_s(spec):
    """A row whose tokens after a prompt are the head's own coupled drafts (the runtime's draft step, at the row's
    seed) is accepted K deep at that anchor, teacher-forced; the argmax drafts of a sampled row are not."""
    from mtplite.model.generate import torch_steps
    from mtplite.model.load import format_prompt
    from mtplite.model.sampling import Sampler
    from mtplite.train.sampled import coupled_runs
    from mtplite.train.train import features, space_of

    bb, head = trained(spec)[:2]
    K, T = head.c.K, (1.0, 64, 0.95)
    rows = []
    for i, text in enumerate(PROMPTS[:3]):
        ids, seed = format_prompt(bb, text), 1000 + i
        P = len(ids)
        prefill, decode, _, draft = torch_steps(bb, head, cache_len=P + K + 2, sampler=Sampler(*T, seed),
                                                context=head.c.context)
        prefill(ids[:-1], 0)
        tok, act = decode(ids[-1], P - 1)
        rows.append({"id": str(i), "task": "t", "prompt_len": P, "tokens": ids + [tok] + draft(tok, act, P, K),
                     "sampled": True, "seed": seed, "sampler": T})
    f = features(bb, rows, head.kv_layers, v_only=head.v_only_layers, space=space_of(head))
    runs = coupled_runs(head, f, K, rows)
    # anchors are the generated positions of each row in order: the first (the sampled token) drafts the K after it
    assert [float(a) for a in runs["coupled"][:: K + 1]] == [K] * 3
    assert runs["coupled"].sum() >= runs["argmax"].sum()
