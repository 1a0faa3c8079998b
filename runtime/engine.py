"""The official LiteRT-LM engine (`litert_lm`) as a client of our bundles: its decode speed with MTP off and on,
through the Conversation API apps use.

A user who ships our `.litertlm` through the engine cannot gate per cycle or fall back to lookup, so the engine's own
MTP/plain ratio decides whether the drafter section belongs in the file at all (`calibrate` records it).
The engine runs in a child process: it logs to fd 2 from C++ and a crash there must not take the caller with it.
"""
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from mtplite.export.bundle import NO_DRAFTER, build_litertlm_without_drafter

# Through the Conversation API, as apps call it: each prompt a user message the bundle's own template renders.
# LiteRT-LM 0.19 replaces enable_speculative_decoding= with SpeculativeDecodingConfig(mode=OFF|ON|ADAPTIVE).
ENGINE_SCRIPT = r"""
import json, sys, time, importlib.metadata as md, litert_lm
path, msgs, n, cache = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
litert_lm.set_min_log_severity(litert_lm.LogSeverity.INFO)
new = hasattr(litert_lm, "SpeculativeDecodingConfig")
modes = ["OFF", "ON"] + (["ADAPTIVE"] if new and hasattr(litert_lm.SpeculativeDecodingMode, "ADAPTIVE") else [])
def spec(mode):
    if new:
        m = getattr(litert_lm.SpeculativeDecodingMode, mode)
        return {"speculative_decoding_config": litert_lm.SpeculativeDecodingConfig(mode=m)}
    return {"enable_speculative_decoding": mode == "ON"}
version = None
for dist in ("litert-lm-api", "litert-lm-api-nightly"):
    try:
        version = dist + " " + md.version(dist); break
    except md.PackageNotFoundError:
        pass
out = {"version": version, "modes": modes}
for mode in modes:
    eng = litert_lm.Engine(path, backend=litert_lm.Backend.CPU(), cache_dir=cache, enable_benchmark=True)
    rows = []
    for m in msgs:
        past, m = (m[:-1], m[-1]) if isinstance(m, list) else ([], m)  # a conversation: its history, then its turn
        conv = eng.create_conversation(messages=past or None, max_output_tokens=n, **spec(mode))
        c = time.process_time(); t = time.perf_counter()
        reply = conv.send_message(m).to_json()
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        b = conv.get_benchmark_info()
        text = "".join(p.get("text", "") for p in reply.get("content", []) if p.get("type") == "text")
        rows.append({"text": text, "wall_s": wall, "cpu_s": cpu, "ttft_s": b.time_to_first_token_in_second,
                     "decode_tokens": b.last_decode_token_count, "decode_tokens_per_s": b.last_decode_tokens_per_second})
        conv.close()
    eng.close()
    sys.stderr.write("MTPLITE_ENGINE_DONE %s\n" % mode); sys.stderr.flush()
    out[mode] = rows
print("RESULT " + json.dumps(out))
"""
ROWS = {"OFF": "engine_plain", "ON": "engine_mtp", "ADAPTIVE": "engine_adaptive"}


def run_engine(bundle_dir, prompts, max_new):
    """The official engine on model.litertlm through its Conversation API, speculative decoding off, on (and adaptive
    where the installed engine has it), each prompt (a string or a message dict) sent as an app sends it: decode
    tokens/s per mode and the replies; {"error": last stderr line} when the engine fails."""
    path = Path(bundle_dir) / "model.litertlm"
    cache = Path(bundle_dir) / ".engine-cache"
    cache.mkdir(exist_ok=True)
    r = subprocess.run([sys.executable, "-c", ENGINE_SCRIPT, str(path), json.dumps(prompts), str(max_new), str(cache)],
                       capture_output=True, text=True, timeout=3600)
    line = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
    if not line:
        return {"error": (r.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    res = json.loads(line[0][7:])
    rates = [float(x) for x in re.findall(r"Success rate: ([0-9.eE+-]+)", r.stderr)]
    out = {"api": "conversation", "engine_version": res["version"]}
    for mode in res["modes"]:
        rows = res[mode]
        ntok = sum(x["decode_tokens"] for x in rows)
        dec_s = sum(x["decode_tokens"] / x["decode_tokens_per_s"] for x in rows if x["decode_tokens_per_s"])
        out[ROWS[mode]] = {"decode_tokens_per_s": ntok / max(dec_s, 1e-9),
                           "cpu_s_per_token": sum(x["cpu_s"] for x in rows) / max(ntok, 1),
                           "ttft_s": sum(x["ttft_s"] for x in rows) / len(rows),
                           "texts": [x["text"] for x in rows]}
    out["engine_mtp"]["drafter_success_rate"] = rates[-1] if rates else None
    return out


def engine_summary(eng, prompts=None):
    """run_engine's result without the texts, plus MTP/plain, how many MTP texts equal MTP-off's (exactly, and on
    their overlap: the engine may emit up to K tokens past the budget with MTP on) and a few replies."""
    if "error" in eng:
        return eng
    out = {k: ({kk: vv for kk, vv in v.items() if kk != "texts"} if isinstance(v, dict) else v) for k, v in eng.items()}
    off = eng["engine_plain"]
    for k in ("engine_mtp", "engine_adaptive"):
        if k in eng:
            name = "mtp/plain" if k == "engine_mtp" else "adaptive/plain"
            out[name] = eng[k]["decode_tokens_per_s"] / off["decode_tokens_per_s"]
    on = eng["engine_mtp"]["texts"]
    out["text_equal_off"] = sum(a == c for a, c in zip(on, off["texts"]))
    out["text_matches_off"] = sum(a.startswith(c) or c.startswith(a) for a, c in zip(on, off["texts"]))
    out["replies"] = [{"prompt": p if isinstance(p, str) else p[-1]["content"], "mtp_off": a, "mtp_on": c}
                      for p, a, c in zip(prompts or [], off["texts"], on)][:4]
    return out


def engine_check(bundle_dir, prompts, max_new):
    """The manifest's `engine` record: MTP on vs off in the official engine on `prompts` (held-out templates, never
    the benchmark's), and whether it pays; where it does not, the drafter-free variant is written beside the bundle
    (the engine then decodes plainly, at MTP-off speed, from the same graphs)."""

    s = engine_summary(run_engine(bundle_dir, [p["prompt"] for p in prompts], max_new))
    if "error" in s:
        return {"error": s["error"], "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    ratio = s["mtp/plain"]
    rec = {"mtp_over_plain": round(ratio, 3), "pays": ratio > 1.0,
           "plain_tokens_per_s": round(s["engine_plain"]["decode_tokens_per_s"], 2),
           "mtp_tokens_per_s": round(s["engine_mtp"]["decode_tokens_per_s"], 2),
           "text_matches_off": s["text_matches_off"], "text_equal_off": s["text_equal_off"], "api": "conversation",
           "prompts": len(prompts), "max_new_tokens": max_new,
           "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    variant = Path(bundle_dir) / NO_DRAFTER
    if rec["pays"]:
        variant.unlink(missing_ok=True)  # a stale one from an earlier calibration would contradict the record
    else:
        build_litertlm_without_drafter(bundle_dir, variant)
        rec["variant"] = NO_DRAFTER
    return rec
