"""Draft/verify on LiteRT: ai_edge_litert CompiledModel, one set of KV buffers shared by backbone and drafter.

The KV buffers are runtime-owned TensorBuffers created once from the backbone's `decode` signature and bound, by
name, as input AND output of prefill/decode/verify and as the drafter's read-only inputs: nothing is copied between
the two graphs (a test mutates a buffer and watches the drafter's output change). Host-memory buffers would be
cheaper to slice-write, but ai_edge_litert only accepts them for rank-1 tensors and the LiteRT-LM contract fixes the
KV tensors at rank 4 (see lab/notes/PERF.md).

The loop itself is mtplite.model.generate.run, the same code the torch reference runs.
"""
import sys
import time
from collections import OrderedDict
from itertools import islice
from pathlib import Path

import numpy as np

from mtplite.errors import UserError
from mtplite.export.contract import DRAFT_K, draft_k_signature, draft_k_windows_in
from mtplite.model.decoder import NEG_INF
from mtplite.model.sampling import Sampler
from mtplite.paths import cache_dir


def _options(threads, cache_file):
    from ai_edge_litert.cpu_options import CpuOptions
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.options import Options

    # A weight-cache *file* is required for multi-signature graphs: without it every signature packs its own copy.
    return Options(HardwareAccelerator.CPU, cpu_options=CpuOptions(num_threads=threads,
                                                                   xnnpack_weight_cache_path=str(cache_file)))


def _positions_and_mask(n, pos0, T, C):
    """input_pos and mask rows for n real tokens at pos0.. in a T-row signature; unused rows are zero / fully masked
    (the engine zero-fills unused input_pos slots; our graphs write from input_pos[0] on)."""
    pos = np.zeros(T, np.int32)
    pos[:n] = np.arange(pos0, pos0 + n)
    mask = np.full((T, C), NEG_INF, np.float32)
    mask[:n] = _mask(pos[:n], C)
    return pos, mask


def _mask(positions, C):
    """Rows = query positions; row t may see keys 0..positions[t]."""
    m = np.full((len(positions), C), NEG_INF, np.float32)
    for t, p in enumerate(positions):
        m[t, : p + 1] = 0.0
    return m


class Bundle:
    """A loaded OUT/android bundle: three CompiledModels and their buffers. Step functions via `steps()`."""

    def __init__(self, out, threads=2, mtp=True, exact=None, context=False):
        from ai_edge_litert.compiled_model import CompiledModel

        from mtplite.export.contract import check

        out = Path(out)
        adir = out / "android" if (out / "android").is_dir() else out
        # validate in Python before any file reaches native code
        self.man, self.sigs = check(adir / "manifest.json")
        m = self.man
        self.dir, self.K, self.C = adir, m["K"], m["cache_length"]
        # confidence gate for the head's drafts (0 = always draft K); record_probs: a list to append each cycle's probs to
        self.min_prob, self.record_probs, self._draft_idx = 0.0, None, None
        # how tokens are picked from logits (model/sampling.py; greedy by default): set by steps(sampler)
        self.sampler = Sampler()
        self.H, self.V = m["hidden_size"], m["vocab_size"]
        self.prefill_lengths = sorted(m["prefill_lengths"])
        wc = cache_dir() / "xnnpack"
        wc.mkdir(parents=True, exist_ok=True)
        tag = m.get("head_fingerprint") or "x"
        self.models = {}
        t0 = time.perf_counter()
        # context: also load drafter_ctx, the head with the context draft space (the text's own ids outside its
        # draft vocabulary); `use_context` picks which drafter draft() runs
        ctx = m.get("context_drafter") if mtp and context else None
        self.files = files = {**m["files"], **({"drafter_ctx": ctx["file"]} if ctx else {})}
        for g in ("embedder", "backbone") + (("drafter",) if mtp else ()) + (("drafter_ctx",) if ctx else ()):
            fname = adir / files[g]
            # the packed-weight cache must never be shared by two different files: content hash (the manifest's)
            # plus size and nanosecond mtime (by size and whole-second mtime, two same-size graphs written within one
            # second would load each other's packed weights)
            st, sha = fname.stat(), (m.get("files_sha256") or {}).get(fname.name, "x")[:16]
            stamp = f"{g}-{tag}-{m['backbone_fingerprint']}-{sha}-{st.st_size}-{st.st_mtime_ns}-t{threads}"
            try:
                self.models[g] = CompiledModel.from_file(str(fname), options=_options(threads, wc / f"{stamp}.xnn"))
            except Exception as e:
                raise UserError(f"{fname}: LiteRT could not load it ({str(e).splitlines()[0][:120]}); re-export") from None
        self.load_s = time.perf_counter() - t0
        bb = self.models["backbone"]
        self.kv_names = [n for n in self.sigs["backbone"]["decode"]["inputs"] if n.startswith("kv_cache_")]
        self.kv = {n: bb.create_input_buffer_by_name("decode", n) for n in self.kv_names}
        self.io = {}
        for s in ["decode", "verify"] + [f"prefill_{n}" for n in self.prefill_lengths]:
            sig = self.sigs["backbone"][s]
            ins = {n: bb.create_input_buffer_by_name(s, n) for n in sig["inputs"] if not n.startswith("kv_cache_")}
            outs = {n: bb.create_output_buffer_by_name(s, n) for n in sig["outputs"] if not n.startswith("kv_cache_")}
            self.io[s] = (ins, outs)
        em = self.models["embedder"]
        self.emb_io = {s: ({"token_ids": em.create_input_buffer_by_name(s, "token_ids")},
                           {"embeddings": em.create_output_buffer_by_name(s, "embeddings")}) for s in self.sigs["embedder"]}
        if mtp:
            self.dr_in, self.dr_out, self.dr_kv = self._drafter_io("drafter", "mtp_drafter")
        self.use_context = bool(ctx)
        if ctx:
            self.cx_in, self.cx_out, self.cx_kv = self._drafter_io("drafter_ctx", DRAFT_K)
            self.cx_windows = draft_k_windows_in(self.sigs["drafter_ctx"])  # bound to the same buffers as DRAFT_K
            self.space_ids = np.asarray(ctx["space_ids"], np.int64)
            self.space_map = np.full(self.V, len(self.space_ids), np.int32)  # id -> draft-space index
            self.space_map[self.space_ids] = np.arange(len(self.space_ids), dtype=np.int32)
            self.cx_M, self.cx_scale, self.cx_rows = ctx["max_ids"], ctx["embed_scale"], ctx["copy_rows"]
            self.cx_cache = {}  # id -> (embedding row, layer-0 V row): both functions of the token alone
        # Plain and speculative tokens are the same only if decode is verify's row 0, bit for bit. Probed here, on
        # this CPU's kernels; where they differ, plain steps run as row 0 of verify (the exact path: one verify
        # instead of one decode per plain step). exact=True forces that path.
        from mtplite.export.exactness import BIT_IDENTICAL, OutputNotWritten, probe

        try:
            self.exactness, self.exactness_detail = probe(
                bb, self.sigs["backbone"], {s: ({**self.io[s][0], **self.kv}, {**self.io[s][1], **self.kv})
                                            for s in ("decode", "verify")})
        except OutputNotWritten as e:
            raise UserError(f"{adir / files['backbone']}: LiteRT ran it but {e}; load it again in a new process") from None
        self.exact = bool(exact) or self.exactness != BIT_IDENTICAL
        if self.exactness != BIT_IDENTICAL and not exact:
            print(f"mtplite: {adir}: decode and verify round differently on this CPU ({self.exactness_detail}); "
                  "plain steps run through verify so that speculative output stays plain output", file=sys.stderr)
        self.emb_rows = {}
        # A drafter's mask for position p (keys 0..p visible) is a slice of this (drafter_mask): none built per draft.
        self.mask_row = np.concatenate([np.zeros(self.C, np.float32), np.full(self.C, NEG_INF, np.float32)])
        self.kv_bytes = sum(int(np.prod(self.sigs["backbone"]["decode"]["inputs"][n]["shape"])) * 4 for n in self.kv_names)
        self.reset()

    def _drafter_io(self, g, sig):
        """A drafter graph's own input and output buffers, and the shared KV buffers it reads (by name)."""
        m, io = self.models[g], self.sigs[g][sig]
        return ({n: m.create_input_buffer_by_name(sig, n) for n in io["inputs"] if not n.startswith("kv")},
                {n: m.create_output_buffer_by_name(sig, n) for n in io["outputs"]},
                {n: self.kv[n] for n in io["inputs"] if n.startswith("kv")})

    # ---- graph calls --------------------------------------------------------------------------------------------
    def reset(self):
        self.hist = np.zeros(self.C, np.int64)  # the token at each cached position
        self.cx_ids = None
        self.forget_context()
        for n, b in self.kv.items():
            shape = self.sigs["backbone"]["decode"]["inputs"][n]["shape"]
            b.write(np.zeros(int(np.prod(shape)), np.float32))

    def forget_context(self):
        """The context draft space, kept up to date as positions are committed instead of re-scanning the history every
        cycle (that scan, cold after a verify pass, cost ~0.15 ms a draft): each out-of-space id -> its latest
        position, oldest first, for hist[:cx_upto]. Emptied here, refilled by context_space at the next draft."""
        self.cx_seen, self.cx_upto = OrderedDict(), 0

    def embed(self, ids):
        """Token ids -> [T,H] through the embedder graph (which holds the family's embedding scale)."""
        T = len(ids)
        name = "decode_embedder" if T == 1 else next((s for s in (f"prefill_embedder_{n}" for n in self.prefill_lengths)
                                                      if int(s.rsplit("_", 1)[1]) >= T), None)
        if name is None:
            raise ValueError(f"no embedder signature for {T} tokens")
        n = 1 if T == 1 else int(name.rsplit("_", 1)[1])
        ins, outs = self.emb_io[name]
        tok = np.zeros(n, np.int32)
        tok[:T] = ids
        ins["token_ids"].write(tok)
        self.models["embedder"].run_by_name(name, ins, outs)
        return outs["embeddings"].read(n * self.H, np.float32).reshape(n, self.H)[:T]

    def embed_row(self, tok):
        """One token's embedding for a drafter's input, from the decode embedder, kept per id (a function of the id
        alone): a separate graph call per draft cycle otherwise (~0.05 ms). Bounded: cleared at 4,096 ids (10 MB)."""
        row = self.emb_rows.get(tok)
        if row is None:
            if len(self.emb_rows) >= 4096:
                self.emb_rows.clear()
            row = self.emb_rows[tok] = self.embed([tok])[0].copy()
        return row

    def drafter_mask(self, pos):
        """_mask([pos], C) as one row, a view of mask_row."""
        return self.mask_row[self.C - 1 - pos : 2 * self.C - 1 - pos]

    def run_backbone(self, sig, ids, pos0):
        ins, outs = self.io[sig]
        T = int(self.sigs["backbone"][sig]["inputs"]["input_pos"]["shape"][0])
        n = len(ids)
        emb = np.zeros((T, self.H), np.float32)
        emb[:n] = self.embed(ids)
        pos, mask = _positions_and_mask(n, pos0, T, self.C)
        self.hist[pos0 : pos0 + n] = ids[: self.C - pos0]
        if pos0 < self.cx_upto:  # a rewrite of positions the context space has taken in
            self.forget_context()
        ins["embeddings"].write(emb.reshape(-1))
        ins["input_pos"].write(pos)
        ins["mask"].write(mask.reshape(-1))
        self.models["backbone"].run_by_name(sig, {**ins, **self.kv}, {**outs, **self.kv})
        return outs, n

    def prefill_chunks(self, ids):
        """(signature length, offset, chunk): the smallest prefill signature that fits, else the largest, repeated."""
        i = 0
        while i < len(ids):
            n = next((L for L in self.prefill_lengths if L >= len(ids) - i), self.prefill_lengths[-1])
            yield n, i, ids[i : i + n]
            i += n

    def prefill(self, ids, start):
        for n, off, chunk in self.prefill_chunks(ids):
            self.run_backbone(f"prefill_{n}", chunk, start + off)

    def logits_rows(self, outs, n):
        return outs["logits"].read(n * self.V, np.float32).reshape(n, self.V)

    def decode(self, tok, pos):
        if self.exact and pos + self.K < self.C:
            outs, _ = self.run_backbone("verify", [tok], pos)
            act = outs["activations"].read((self.K + 1) * self.H, np.float32)[: self.H]
            return self.sampler.pick(self.logits_rows(outs, 1)[0], pos + 1), act
        outs, _ = self.run_backbone("decode", [tok], pos)
        act = outs["activations"].read(self.H, np.float32)
        return self.sampler.pick(self.logits_rows(outs, 1)[0], pos + 1), act

    def verify(self, toks, pos):
        T = self.K + 1
        if len(toks) != T:
            raise ValueError(f"verify takes exactly K+1={T} tokens")
        outs, _ = self.run_backbone("verify", toks, pos)
        acts = outs["activations"].read(T * self.H, np.float32).reshape(T, self.H)
        self.last_logits = lg = self.logits_rows(outs, T)
        if self.sampler.greedy:
            return lg.argmax(-1).tolist(), acts
        return [self.sampler.pick(row, pos + 1 + j) for j, row in enumerate(lg)], acts

    def context_space(self, pos):
        """Fill drafter_ctx's context inputs for a draft at `pos`: the newest distinct ids of the cached text outside
        the draft space (what model.head.context_ids picks from hist[:pos], kept incrementally). Their rows are cached
        per id: the embedding row (from the embedder graph without its scale) and layer 0's V row (read once from the
        shared cache). Returns the ids, newest first."""
        if pos < self.cx_upto:
            self.forget_context()
        if pos > self.cx_upto:
            seg = self.hist[self.cx_upto : pos]
            seen = self.cx_seen
            for k in np.flatnonzero(self.space_map[seg] >= len(self.space_ids)).tolist():
                t = int(seg[k])
                seen.pop(t, None)
                seen[t] = self.cx_upto + k
            self.cx_upto = pos
        found = list(islice(reversed(self.cx_seen.items()), self.cx_M))
        ids = [t for t, _ in found]
        if ids == self.cx_ids:
            return ids
        new = [(t, j) for t, j in found if t not in self.cx_cache]
        if new:
            rows = [None] * len(new)
            if self.cx_rows:
                from mtplite.model.head import context_rows

                shape = self.sigs["backbone"]["decode"]["inputs"]["kv_cache_v_0"]["shape"]
                v0 = self.kv["kv_cache_v_0"].read(int(np.prod(shape)), np.float32).reshape(shape)
                rows = context_rows(v0, [j for _, j in new]).numpy()
            step = max(self.prefill_lengths)
            for i in range(0, len(new), step):
                chunk = new[i : i + step]
                emb = self.embed([t for t, _ in chunk]) / np.float32(self.cx_scale)
                for k, ((t, _), row) in enumerate(zip(chunk, emb)):
                    self.cx_cache[t] = (row, rows[i + k])
        M, H = self.cx_M, self.H
        emb = np.zeros((M, H), np.float32)
        mask = np.full(M, NEG_INF, np.float32)
        for i, t in enumerate(ids):
            emb[i] = self.cx_cache[t][0]
            mask[i] = 0.0
        cid = np.zeros(M, np.int32)
        cid[: len(ids)] = ids
        self.cx_in["context_emb"].write(emb.reshape(-1))
        self.cx_in["context_mask"].write(mask)
        self.cx_in["context_ids"].write(cid)
        if self.cx_rows:
            dt = self.sigs["drafter_ctx"][DRAFT_K]["inputs"]["context_rows"]["shape"][-1]
            rows = np.zeros((M, dt), np.float32)
            for i, t in enumerate(ids):
                rows[i] = self.cx_cache[t][1]
            self.cx_in["context_rows"].write(rows.reshape(-1))
        self.cx_ids = ids
        return ids

    def draft(self, tok, act, pos, k):
        """k drafts; with `min_prob` set, None (a plain step) where the head gives its first draft less than that
        probability."""
        if self.use_context:
            out, probs = self.draft_k(tok, act, pos)
        else:
            out, probs = self.draft_steps(tok, act, pos, k)
        if self.record_probs is not None:
            self.record_probs.append(probs)
        if not out or (self.min_prob and probs[0] < self.min_prob):
            return None
        return out[:k]

    def draft_k(self, tok, act, pos):
        """All K drafts in one call of drafter_ctx's mtp_draft_k (argmax inside the graph) and their probabilities."""
        self.context_space(pos)
        ins, outs = self.cx_in, self.cx_out
        ins["input_pos"].write(np.array([pos], np.int32))
        ins["mask"].write(self.drafter_mask(pos))
        ins["activations"].write(np.concatenate([self.embed_row(tok), np.asarray(act, np.float32)]))
        self.models["drafter_ctx"].run_by_name(draft_k_signature(self.cx_windows, pos), {**ins, **self.cx_kv}, outs)
        return outs["draft_ids"].read(self.K, np.int32).tolist(), outs["draft_probs"].read(self.K, np.float32).tolist()

    def draft_steps(self, tok, act, pos, k):
        """k drafts from the contract's drafter, one call per step (its logits over the full vocabulary), picked as
        the backbone's sample at that position will be (coupled drafting; greedy: argmax)."""
        dr, ins, outs, kv = self.models["drafter"], self.dr_in, self.dr_out, self.dr_kv
        # the contract's position, as LiteRT-LM passes it: the newest cached token's, one before `tok`'s
        ins["input_pos"].write(np.array([pos - 1], np.int32))
        ins["mask"].write(self.drafter_mask(pos - 1))
        h, out, probs = np.asarray(act, np.float32), [], []
        for j in range(k):
            ins["activations"].write(np.concatenate([self.embed_row(tok), h]))
            dr.run_by_name("mtp_drafter", {**ins, **kv}, outs)
            lg = outs["logits"].read(self.V, np.float32)
            tok = self.sampler.pick(lg, pos + 1 + j)
            if self.min_prob or self.record_probs is not None:
                probs.append(self._top_prob(lg, tok))
                if j == 0 and probs[0] < self.min_prob:
                    break  # the gate declines the cycle at its first draft: later steps would be wasted calls
            h = outs["projected_activations"].read(self.H, np.float32)
            out.append(tok)
        return out, probs

    def _top_prob(self, lg, top):
        """Softmax probability of the argmax. The head scores only its draft vocabulary (the rest of the full-vocabulary
        logits is NEG_INF), so the sum runs over those ids, found once."""
        if self._draft_idx is None:
            self._draft_idx = np.flatnonzero(lg > NEG_INF / 2)
        z = lg[self._draft_idx] - lg[top]
        return float(1.0 / np.exp(z).sum())

    def calibrated_min_prob(self):
        """The head's confidence gate `mtplite calibrate` chose for this device (0 = none)."""
        return float((self.man.get("settings") or {}).get("min_prob") or 0.0)

    def hybrid_min_ngram(self):
        """The shortest lookup match hybrid copies with the drafter in use: calibrate's choice, else the default."""
        from mtplite.export.contract import HYBRID_MIN_NGRAM

        hm = (self.man.get("settings") or {}).get("hybrid_min_ngram") or {}
        return hm.get("drafter_ctx" if self.use_context else "drafter", HYBRID_MIN_NGRAM)

    def steps(self, sampler=None):
        self.reset()
        self.sampler = sampler or Sampler()
        return self.prefill, self.decode, self.verify, self.draft

    # ---- the standalone-drafter baseline: its own graph, embedding and KV cache ------------------------------------
    def load_standalone(self, threads=2):
        from ai_edge_litert.compiled_model import CompiledModel

        info = self.man.get("standalone")
        if not info:
            return False
        f = self.dir / info["file"]
        wc = cache_dir() / "xnnpack" / f"standalone-{self.man.get('head_fingerprint')}-{f.stat().st_size}-t{threads}.xnn"
        self.sd = CompiledModel.from_file(str(f), options=_options(threads, wc))
        sigs = info["signatures"]
        self.sd_sigs = sigs
        self.sd_kv = {n: self.sd.create_input_buffer_by_name("decode", n) for n in sigs["decode"]["inputs"]
                      if n.startswith("kv_cache_")}
        self.sd_io = {s: ({n: self.sd.create_input_buffer_by_name(s, n) for n in sig["inputs"] if not n.startswith("kv")},
                          {n: self.sd.create_output_buffer_by_name(s, n) for n in sig["outputs"] if not n.startswith("kv")})
                      for s, sig in sigs.items()}
        self.sd_kv_bytes = sum(int(np.prod(sigs["decode"]["inputs"][n]["shape"])) * 4 for n in self.sd_kv)
        return True

    def _sd_run(self, sig, ids, pos0):
        ins, outs = self.sd_io[sig]
        T = int(self.sd_sigs[sig]["inputs"]["input_pos"]["shape"][0])
        tok = np.zeros(T, np.int32)
        tok[: len(ids)] = ids
        pos, mask = _positions_and_mask(len(ids), pos0, T, self.C)
        ins["token_ids"].write(tok)
        ins["input_pos"].write(pos)
        ins["mask"].write(mask.reshape(-1))
        self.sd.run_by_name(sig, {**ins, **self.sd_kv}, {**outs, **self.sd_kv})
        return outs

    def standalone_steps(self):
        """Step functions drafting with the standalone LM. It prefills the whole prompt itself (its own cache) and
        decodes every plain step too, so its cache stays in sync; drafts write positions pos.. which accepted tokens
        then already occupy."""
        self.reset()
        for n, b in self.sd_kv.items():
            b.write(np.zeros(int(np.prod(self.sd_sigs["decode"]["inputs"][n]["shape"])), np.float32))

        def prefill(ids, start):
            self.prefill(ids, start)
            for n, off, chunk in self.prefill_chunks(ids):
                self._sd_run(f"prefill_{n}", chunk, start + off)

        def decode(tok, pos):
            self._sd_run("decode", [tok], pos)
            return self.decode(tok, pos)

        def draft(tok, act, pos, k):
            out = []
            for j in range(k):
                o = self._sd_run("decode", [tok], pos + j)
                tok = self.sampler.pick(o["logits"].read(self.V, np.float32), pos + 1 + j)
                out.append(tok)
            return out

        return prefill, decode, self.verify, draft

    def weight_bytes(self):
        return {g: (self.dir / self.files[g]).stat().st_size for g in self.models}


def load_tokenizer(bundle_dir):
    from transformers import PreTrainedTokenizerFast

    p = Path(bundle_dir)
    p = p / "android" if (p / "android").is_dir() else p
    try:
        return PreTrainedTokenizerFast(tokenizer_file=str(p / "tokenizer.json"))
    except Exception as e:
        raise UserError(f"{p / 'tokenizer.json'}: cannot load tokenizer ({str(e).splitlines()[0][:100]})") from None


def encode(tok, man, prompt):
    """Prompt ids as the backbone was trained and deployed: a string or a list of chat messages ({"role", "content"})
    through its chat template when it has one, else BOS + the plain text (a base model continues the messages'
    text)."""
    from mtplite.model.load import template_ids

    msgs = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    if man.get("chat_template"):
        try:
            return template_ids(tok, man["chat_template"], msgs, man.get("bos_id"), man.get("bos_token"))
        except Exception as e:  # a template is code from a file we did not write: its failure is a user error
            raise UserError(f"manifest.json: chat_template failed to render ({str(e).splitlines()[0][:100]})") from None
    ids = list(tok("".join(m["content"] for m in msgs), add_special_tokens=False)["input_ids"])
    return ([man["bos_id"]] if man.get("bos_id") is not None else []) + ids
