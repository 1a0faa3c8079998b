"""`mtplite generate OUT` on LiteRT, `mtplite bench`, `mtplite calibrate`, `mtplite report`."""
import sys

from mtplite.errors import UserError


def encode(tok, man, text):
    ids = list(tok(text, add_special_tokens=False)["input_ids"])
    return ([man["bos_id"]] if man.get("bos_id") is not None else []) + ids


def settings_K(man, mtp_requested):
    """The K the runtime will use, and why. Speculation never switches itself off silently."""
    s = man.get("settings") or {}
    k = s.get("K", man["K"])
    if not mtp_requested:
        return 0, "plain decoding (--no-mtp)"
    if k == "off":
        return 0, f"MTP off: `mtplite calibrate` measured no speedup on this device ({s.get('reason', 'see manifest')})"
    if not isinstance(k, int) or not 1 <= k <= man["K"]:
        return man["K"], f"settings.K={k!r} invalid; using the exported K={man['K']}"
    return k, f"MTP with K={k} ({s.get('source', 'export default')})"


def generate_bundle(a):
    from mtplite.cli import _print_result
    from mtplite.model import generate as G
    from mtplite.runtime.litert import Bundle, load_tokenizer

    b = Bundle(a.bundle, threads=a.threads if hasattr(a, "threads") else 2, mtp=not a.no_mtp)
    tok = load_tokenizer(a.bundle)
    K, why = settings_K(b.man, not a.no_mtp)
    if a.k and not a.no_mtp:
        if a.k != b.K:
            raise UserError(f"--k {a.k}: this bundle's verify graph checks exactly K={b.K} drafts; re-export with --k")
        K, why = a.k, f"MTP with K={a.k} (--k)"
    print(f"mtplite: {why}", file=sys.stderr)
    ids = encode(tok, b.man, a.prompt)
    if len(ids) >= b.C:
        raise UserError(f"prompt is {len(ids)} tokens but the bundle's cache holds {b.C}; shorten it or re-export "
                        f"with a larger --cache-length")
    stop = (lambda out: any(s in tok.decode(out, skip_special_tokens=True) for s in a.stop)) if a.stop else None
    on_tok = None
    if a.stream:
        on_tok = lambda t: print(tok.decode([t], skip_special_tokens=True), end="", flush=True, file=sys.stderr)
    res = G.run(ids, b.steps(), max_new_tokens=a.max_new_tokens, eos_ids=set(b.man["eos_ids"]), K=K, cache_len=b.C,
                should_stop=stop, on_token=on_tok)
    n = len(res["tokens"])
    dec_s = res["total_s"] - res["ttft_s"]
    extra = {"ttft_s": res["ttft_s"], "decode_tokens_per_s": (n - 1) / dec_s if n > 1 and dec_s > 0 else None,
             "runtime": "litert", "stop_reason": res["stop_reason"]}
    _print_result(tok.decode(res["tokens"], skip_special_tokens=True), res, K, a, extra)


def register(sub):
    pass
