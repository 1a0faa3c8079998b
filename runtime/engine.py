"""The official LiteRT-LM engine (`litert_lm`) as a client of our bundles: its decode speed with MTP off and on.

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

ENGINE_SCRIPT = r"""
import json, sys, time, litert_lm
path, prompts, n, cache = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
litert_lm.set_min_log_severity(litert_lm.LogSeverity.INFO)
out = {}
for on in (False, True):
    eng = litert_lm.Engine(path, backend=litert_lm.Backend.CPU(), cache_dir=cache)
    rows = []
    for p in prompts:
        s = eng.create_session(apply_prompt_template=False, max_output_tokens=n, enable_speculative_decoding=on)
        c = time.process_time(); t = time.perf_counter(); s.run_prefill([p]); t1 = time.perf_counter()
        text = s.run_decode().texts[0]; t2 = time.perf_counter(); cpu = time.process_time() - c; s.close()
        rows.append({"text": text, "prefill_s": t1 - t, "decode_s": t2 - t1, "cpu_s": cpu})
    eng.close()
    sys.stderr.write("MTPLITE_ENGINE_DONE %d\n" % on); sys.stderr.flush()
    out[str(on)] = rows
print("RESULT " + json.dumps(out))
"""

def run_engine(bundle_dir, prompts, max_new, tok):
    """Decode tokens/s of model.litertlm in the engine with MTP off, then on, over `prompts` (raw text), and the
    texts; {"error": last stderr line} when the engine fails."""
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
    out = {}
    for key, name in (("False", "engine_plain"), ("True", "engine_mtp")):
        rows = res[key]
        ntok = [len(tok(x["text"], add_special_tokens=False)["input_ids"]) for x in rows]
        out[name] = {"decode_tokens_per_s": sum(ntok) / max(sum(x["decode_s"] for x in rows), 1e-9),
                     "cpu_s_per_token": sum(x["cpu_s"] for x in rows) / max(sum(ntok), 1),
                     "texts": [x["text"] for x in rows]}
    out["engine_mtp"]["drafter_success_rate"] = rates[-1] if rates else None
    return out


def engine_summary(eng):
    """run_engine's result without the texts, plus MTP/plain and how many MTP texts equal MTP-off's (the engine may
    emit up to K tokens past the budget with MTP on, so the overlap is compared)."""
    if "error" in eng:
        return eng
    out = {k: {kk: vv for kk, vv in v.items() if kk != "texts"} for k, v in eng.items()}
    out["mtp/plain"] = eng["engine_mtp"]["decode_tokens_per_s"] / eng["engine_plain"]["decode_tokens_per_s"]
    out["text_matches_off"] = sum(a.startswith(c) or c.startswith(a)
                                  for a, c in zip(eng["engine_mtp"]["texts"], eng["engine_plain"]["texts"]))
    return out


def engine_check(bundle_dir, prompts, max_new, tok):
    """The manifest's `engine` record: MTP on vs off in the official engine on `prompts` (held-out templates, never
    the benchmark's), and whether it pays; where it does not, the drafter-free variant is written beside the bundle
    (the engine then decodes plainly, at MTP-off speed, from the same graphs)."""

    s = engine_summary(run_engine(bundle_dir, [p["prompt"] for p in prompts], max_new, tok))
    if "error" in s:
        return {"error": s["error"], "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    ratio = s["mtp/plain"]
    rec = {"mtp_over_plain": round(ratio, 3), "pays": ratio > 1.0,
           "plain_tokens_per_s": round(s["engine_plain"]["decode_tokens_per_s"], 2),
           "mtp_tokens_per_s": round(s["engine_mtp"]["decode_tokens_per_s"], 2),
           "text_matches_off": s["text_matches_off"], "prompts": len(prompts), "max_new_tokens": max_new,
           "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    variant = Path(bundle_dir) / NO_DRAFTER
    if rec["pays"]:
        variant.unlink(missing_ok=True)  # a stale one from an earlier calibration would contradict the record
    else:
        build_litertlm_without_drafter(bundle_dir, variant)
        rec["variant"] = NO_DRAFTER
    return rec
