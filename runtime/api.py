"""The Python API: `mtplite.load(bundle_dir).generate(prompt)`, the loop `mtplite generate` runs on a bundle.

    import mtplite
    model = mtplite.load("out/")
    r = model.generate("Summarize: ...", max_new_tokens=128)
    print(r.text, r.tokens_per_s, r.accept_length, r.stop_reason)
    for piece in model.generate("...", stream=True):
        print(piece, end="")

Prompts go through the backbone's chat template where it has one (a string is one user message; a list of
{"role", "content"} dicts is a conversation). Drafting follows the bundle's calibrated settings (manifest `settings`:
K, who drafts, the confidence gate) unless told otherwise; output is the backbone's own, token for token.
"""
import queue
import threading
from dataclasses import dataclass, field

from mtplite.errors import UserError
from mtplite.model import generate as G
from mtplite.model.sampling import Sampler, check
from mtplite.runtime.lookup import DRAFT_WHO, drafting, source_counts

DRAFTS = ("auto", "mtp", "hybrid", "lookup", "off")


@dataclass
class Generation:
    text: str
    tokens: list
    stop_reason: str  # "eos" | "max_new_tokens" | "stop" | "cache_full"
    tokens_per_s: float | None  # decode speed after the first token
    accept_length: float | None  # tokens per verify pass (None when nothing was drafted)
    ttft_s: float
    draft: str | None  # who drafted: "mtp" | "hybrid" | "lookup"; None = plain decoding
    K: int
    stats: dict = field(default_factory=dict)  # cycles, drafted, accepted, per-depth acceptance, drafts by source


class Model:
    """A loaded bundle: its graphs, tokenizer and drafting settings."""

    def __init__(self, bundle_dir, threads=2, draft="auto", gate=True, context=True, exact=False):
        from mtplite.runtime.litert import Bundle, load_tokenizer

        if draft not in DRAFTS:
            raise UserError(f"draft={draft!r}: choose one of {', '.join(DRAFTS)}")
        self.bundle = b = Bundle(bundle_dir, threads=threads, mtp=draft != "off", exact=exact or None,
                                 context=context)
        self.tokenizer = load_tokenizer(bundle_dir)
        s = b.man.get("settings") or {}
        k = s.get("K", b.K)
        self.K = k if isinstance(k, int) and 1 <= k <= b.K else b.K
        self.draft = (s.get("draft") or "mtp") if draft == "auto" else draft
        if self.draft == "off":
            self.K = 0
            self.why = ("drafting off: `mtplite calibrate` measured no speedup on this device"
                        if draft == "auto" else "drafting off (draft='off')")
        else:
            who = DRAFT_WHO[self.draft].format(n=b.hybrid_min_ngram())
            self.why = f"drafting with {who}, K={self.K} ({s.get('source', 'export default')})"
        # the head drafts only while it is as sure as calibrate found pays, as the Android app runs it
        self.min_prob = b.calibrated_min_prob() if gate and self.draft in ("mtp", "hybrid") else 0.0
        self.last = None  # the Generation of the latest streamed call, once its stream is exhausted

    def encode(self, prompt):
        from mtplite.runtime.litert import encode

        if not prompt:
            raise UserError("the prompt is empty: give the text (or messages) to answer")
        return encode(self.tokenizer, self.bundle.man, prompt)

    def generate(self, prompt, max_new_tokens=256, temperature=0.0, top_k=0, top_p=1.0, seed=0, stop=None,
                 stream=False):
        """The answer to `prompt` (a string or a list of chat messages). stream=True returns an iterator of text
        pieces as tokens are accepted instead (its Generation lands in `model.last`)."""
        check(temperature, top_k, top_p)
        if max_new_tokens < 0:
            raise UserError(f"max_new_tokens={max_new_tokens}: must be >= 0")
        ids = self.encode(prompt)
        if len(ids) >= self.bundle.C:
            raise UserError(f"the prompt is {len(ids)} tokens but the bundle's cache holds {self.bundle.C}; shorten it "
                            "or re-export with a larger --cache-length")
        sampler = Sampler(float(temperature), int(top_k), float(top_p), int(seed))
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        if not stream:
            return self._run(ids, max_new_tokens, sampler, stops, None, lambda: False)
        return self._stream(ids, max_new_tokens, sampler, stops)

    def _run(self, ids, max_new, sampler, stops, on_token, cancelled):
        b, tok = self.bundle, self.tokenizer
        steps = b.steps(sampler)
        who = self.draft if self.K else "mtp"
        steps, on_tok, source = drafting(steps, ids, who, b.hybrid_min_ngram(), on_token)
        b.min_prob = 0.0 if who == "lookup" else self.min_prob

        def should_stop(out):  # decodes only where there are stop strings to look for
            return cancelled() or bool(stops) and any(s in tok.decode(out, skip_special_tokens=True) for s in stops)

        try:
            res = G.run(ids, steps, max_new_tokens=max_new, eos_ids=set(b.man["eos_ids"]), K=self.K, cache_len=b.C,
                        should_stop=should_stop, on_token=on_tok)
        finally:
            b.min_prob = 0.0
        text = tok.decode(res["tokens"], skip_special_tokens=True)
        for s in stops:
            if s in text:
                text = text[: text.index(s)]
        n, dec_s = len(res["tokens"]), res.get("total_s", 0.0) - res["ttft_s"]
        s = G.summary(res, self.K)
        return Generation(text=text, tokens=[int(t) for t in res["tokens"]], stop_reason=res["stop_reason"],
                          tokens_per_s=(n - 1) / dec_s if n > 1 and dec_s > 0 else None,
                          accept_length=s["accept_length"], ttft_s=res["ttft_s"], draft=self.draft if self.K else None,
                          K=self.K, stats={**s, "stop_token": res.get("stop_token"),
                                                     **source_counts(source, res["trace"])})

    def _stream(self, ids, max_new, sampler, stops):
        """Text pieces as they are accepted: the loop runs in a worker thread and hands tokens over a queue; a piece
        is held back while it ends inside a multi-byte character."""
        q, done, stop_flag = queue.Queue(), object(), threading.Event()
        box = {}

        def work():
            try:
                box["gen"] = self._run(ids, max_new, sampler, stops, q.put, stop_flag.is_set)
            except BaseException as e:  # re-raised in the caller's thread
                box["error"] = e
            q.put(done)

        threading.Thread(target=work, daemon=True).start()
        tok, out, sent = self.tokenizer, [], ""
        try:
            while (t := q.get()) is not done:
                out.append(t)
                text = tok.decode(out, skip_special_tokens=True)
                if text.endswith("\ufffd"):  # inside a multi-byte character: wait for the rest of it
                    continue
                for s in stops:
                    if s in text:
                        text = text[: text.index(s)]
                text = text[: len(text) - _stop_prefix(text, stops)]  # what may yet turn into a stop string waits
                if len(text) > len(sent) and text.startswith(sent):
                    yield text[len(sent):]
                    sent = text
        finally:
            stop_flag.set()
        if "error" in box:
            raise box["error"]
        self.last = box["gen"]
        if len(self.last.text) > len(sent) and self.last.text.startswith(sent):
            yield self.last.text[len(sent):]


def _stop_prefix(text, stops):
    """Length of the longest end of `text` that begins a stop string."""
    return max((k for s in stops for k in range(1, min(len(s), len(text) + 1)) if text.endswith(s[:k])), default=0)


def load(bundle_dir, threads=2, draft="auto", gate=True, context=True, exact=False):
    """A bundle (the dir `mtplite export` or quickstart wrote) ready to generate. draft: "auto" follows the bundle's
    calibrated choice; "mtp", "hybrid", "lookup" or "off" override it. gate: the head drafts only while it is as
    sure as calibrate found pays. context: draft with the K-step drafter (the text's own ids too) where the bundle has
    it. exact: plain steps through the verify graph (taken by itself where the load-time probe needs it)."""
    return Model(bundle_dir, threads=threads, draft=draft, gate=gate, context=context, exact=exact)
