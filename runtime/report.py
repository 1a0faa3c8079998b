"""`mtplite report LOG.jsonl`: device logs from the Android demo -> the same tables and plot as `mtplite bench`."""
import json
from collections import defaultdict
from pathlib import Path

from mtplite.errors import UserError
from mtplite.runtime.bench import aggregate

ENGINE_NUM = ("tokens", "decode_s", "ttft_s")  # what the engine's BenchmarkInfo gives (EngineRecord)
NUM = ENGINE_NUM + ("cycles", "accepted", "draft_ms_per_cycle", "verify_ms_per_cycle")
ENGINE_MODES = ("engine", "engine+mtp")  # the app's runs of model.litertlm in LiteRT-LM, MTP off and on


def read_log(path):
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: device log not found (adb pull it from the app's files dir first)")
    recs = []
    try:
        text = p.read_text()
    except UnicodeDecodeError:
        raise UserError(f"{p}: not a text JSONL file") from None
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{p}:{i}: not JSON ({e.msg}); a truncated last line means the run was killed") from None
        if not isinstance(r, dict) or r.get("schema") != "mtplite-device-log/1":
            raise UserError(f"{p}:{i}: not an mtplite device log record (schema != mtplite-device-log/1)")
        for k in ("mode", "task", "id"):
            if not isinstance(r.get(k), str):
                raise UserError(f"{p}:{i}: field '{k}' must be a string")
        if "error" in r:  # an item the app could not run: logged in its place (BenchFailure)
            if not isinstance(r["error"], str):
                raise UserError(f"{p}:{i}: field 'error' must be a string")
            recs.append(r)
            continue
        for k in (ENGINE_NUM if r["mode"] in ENGINE_MODES else NUM):
            v = r.get(k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 or v != v:
                raise UserError(f"{p}:{i}: field '{k}' must be a non-negative number, got {v!r}")
        for k in ("cpu_s", "energy_nwh"):  # written by app versions that measure them, where the device can
            v = r.get(k, 0)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 or v != v:
                raise UserError(f"{p}:{i}: field '{k}' must be a non-negative number when present, got {v!r}")
        if r["mode"] in ENGINE_MODES:
            if not isinstance(r.get("text"), str):
                raise UserError(f"{p}:{i}: field 'text' must be a string (the engine's reply)")
            recs.append(r)
            continue
        smp = r.get("sampler", {})
        if not isinstance(smp, dict) or not isinstance(smp.get("temperature", 0.0), (int, float)):
            raise UserError(f"{p}:{i}: field 'sampler' must be {{temperature, top_k, top_p, seed}}")
        apd = r.get("acceptance_per_depth")
        if not isinstance(apd, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in apd):
            raise UserError(f"{p}:{i}: field 'acceptance_per_depth' must be a list of numbers")
        recs.append(r)
    if not recs:
        raise UserError(f"{p}: empty device log")
    return recs


def report(path):
    recs = read_log(path)
    failures = [{k: r[k] for k in ("mode", "id", "task", "error")} for r in recs if "error" in r]
    engine = engine_rows([r for r in recs if r["mode"] in ENGINE_MODES and "error" not in r])
    recs = [r for r in recs if "error" not in r and r["mode"] not in ENGINE_MODES]
    if not recs:
        raise UserError(f"{path}: every item failed on the device, e.g. {failures[0]['mode']} {failures[0]['id']}: "
                        f"{failures[0]['error']}")
    per = defaultdict(lambda: defaultdict(list))
    for r in recs:
        per[r["mode"]][r["task"]].append(r)
        per[r["mode"]]["all"].append(r)
    if "plain" not in per:
        raise UserError(f"{path}: no 'plain' records: ratios need the plain baseline from the same run")
    modes = ["plain"] + sorted(m for m in per if m != "plain")
    tasks = sorted({r["task"] for r in recs}) + ["all"]
    table = {m: {t: aggregate(per[m][t]) if per[m][t] else aggregate(per["plain"][t]) | {"decode_tokens_per_s": None}
                 for t in tasks} for m in modes}
    ratios = {f"{m}/plain": {t: table[m][t]["decode_tokens_per_s"] / table["plain"][t]["decode_tokens_per_s"]
                             for t in tasks if table[m][t]["decode_tokens_per_s"] and table["plain"][t]["decode_tokens_per_s"]}
              for m in modes if m != "plain"}
    last = {m: per[m]["all"][-1] for m in modes}
    mtp_rec = last.get("mtp", last["plain"])
    memory = {"backbone_bytes": last["plain"].get("weight_bytes", 0), "embedder_bytes": 0,
              "drafter_bytes": max(mtp_rec.get("weight_bytes", 0) - last["plain"].get("weight_bytes", 0), 0),
              "kv_bytes": last["plain"].get("kv_bytes", 0), "mtp_extra_kv_bytes": 0,
              "mtp_extra_fraction_of_backbone": (max(mtp_rec.get("weight_bytes", 0) - last["plain"].get("weight_bytes", 0), 0)
                                                 / max(last["plain"].get("weight_bytes", 1), 1)),
              "peak_rss_bytes": max(r.get("pss_after_load_bytes", 0) for r in recs),
              "memory_saved_vs_standalone_bytes": mtp_rec.get("memory_saved_vs_standalone_bytes")}
    return {"source": str(path), "device": recs[0].get("device"), "K": max(len(r["acceptance_per_depth"]) for r in recs),
            "max_new_tokens": max(r["tokens"] for r in recs), "threads": "device", "modes": modes, "tasks": tasks,
            "table": table, "ratios": ratios, "memory": memory, "spec_vs_plain_mismatches": "n/a (device log)",
            "sampler": recs[0].get("sampler") or {},  # the app logs it (absent: greedy, from older app versions)
            "manifest": {"backbone_spec": recs[0].get("device")}, "failures": failures,
            **({"engine": engine} if engine else {})}


def engine_rows(recs):
    """The engine's rows summarised as `mtplite bench` summarises its own engine run (decode tok/s over all prompts,
    MTP on / off, replies equal), on the prompts both modes answered: None unless both modes ran."""
    from mtplite.runtime.engine import engine_summary

    by = {m: {r["id"]: r for r in recs if r["mode"] == m} for m in ENGINE_MODES}
    ids = [i for i in by["engine"] if i in by["engine+mtp"]]
    if not ids:
        return None
    rows = {("engine_plain" if m == "engine" else "engine_mtp"): [by[m][i] for i in ids] for m in ENGINE_MODES}
    out = engine_summary({"api": "conversation (device)", **{
        k: {"decode_tokens_per_s": sum(r["tokens"] for r in rs) / max(sum(r["decode_s"] for r in rs), 1e-9),
            "texts": [r["text"] for r in rs]} for k, rs in rows.items()}})
    return {**out, "prompts": len(ids)}


def device_settings(res, old, date):
    """The bundle's settings from a device log's report: the mode that ran fastest on the phone, if it beat plain by
    PAYS, else drafting off. The log measures every mode the app can run side by side, so its speeds decide directly;
    calibrate's cost model is only needed where a mode was not run. `old`: the manifest's settings (the gate and
    hybrid's match length the app ran with are kept; K is the bundle's)."""
    from mtplite.runtime.calibrate import PAYS
    from mtplite.runtime.summary import mean_speedups

    sp = {m: x for m, x in mean_speedups(res).items() if m != "engine"}
    if not sp:
        raise UserError(f"{res['source']}: no drafting mode besides plain; run the app's bench with MTP modes")
    best = max(sp, key=sp.get)
    x = sp[best]
    draft = ("hybrid" if best.startswith("hybrid") else "mtp") if x > PAYS else "off"
    how = f"{best} ran {x:.2f}x plain" + ("" if x > PAYS else f", not over the {PAYS:.2f}x it must beat")
    pl = res["table"]["plain"]["all"]
    return {**old, "draft": draft, "min_prob": old.get("min_prob", 0.0) if "+gate" in best else 0.0,
            "drafter": "drafter_ctx" if "+ctx" in best else "drafter",
            "source": f"device {res['device']}, {date}", "reason": f"measured on {res['device']}: {how}",
            "measured_speedup_per_mode": {m: round(v, 3) for m, v in sorted(sp.items())},
            "measured_on_device": {"decode_tokens_per_s": pl["decode_tokens_per_s"],
                                   "draft_ms_per_cycle": {m: res["table"][m]["all"].get("draft_ms_per_cycle")
                                                          for m in sp},
                                   "verify_ms_per_cycle": {m: res["table"][m]["all"].get("verify_ms_per_cycle")
                                                           for m in sp},
                                   "accept_length": {m: res["table"][m]["all"].get("accept_length") for m in sp}},
            "calibrated_at": date}


def calibrate_from_log(res, bundle):
    """Write device_settings into the bundle's manifest (atomically); returns them."""
    import time

    from mtplite.export.contract import check
    from mtplite.paths import write_text_atomic

    d = Path(bundle)
    d = d / "android" if (d / "android").is_dir() else d
    check(d / "manifest.json")  # a bundle, before anything is written into it
    man = json.loads((d / "manifest.json").read_text())
    man["settings"] = device_settings(res, man.get("settings") or {}, time.strftime("%Y-%m-%d", time.gmtime()))
    write_text_atomic(d / "manifest.json", json.dumps(man, indent=1))
    return man["settings"]


def register(sub):
    r = sub.add_parser("report", help="turn Android device logs (JSONL) into the bench tables and plot")
    r.add_argument("log", help="the JSONL log the Android demo's benchmark wrote")
    r.add_argument("--plot", metavar="PNG", help="also draw the speeds into this PNG")
    r.add_argument("--json", metavar="FILE", help="also write the report as JSON here")
    r.add_argument("--calibrate", metavar="BUNDLE", help="write the bundle's drafting settings from this device's "
                   "measured speeds (the mode that ran fastest, or off), with source 'device <model>, <date>'; push "
                   "the bundle again")
    from mtplite.runtime.cli import add_view_args

    add_view_args(r)
    r.set_defaults(fn=cmd_report)


def cmd_report(a):
    from mtplite.paths import write_text_atomic
    from mtplite.runtime.bench import markdown, plot

    from mtplite.runtime.summary import compact, to_csv, verdict

    res = report(a.log)
    print(verdict(res, where=res["device"]))
    print(compact(res) if a.compact else markdown(res))
    if a.csv:
        write_text_atomic(a.csv, to_csv(res))
    if a.calibrate:
        st = calibrate_from_log(res, a.calibrate)
        print(f"wrote settings.draft={st['draft']} into {a.calibrate} ({st['reason']}); push the bundle again")
    for f in res["failures"]:
        print(f"failed on the device: {f['mode']} {f['id']} ({f['task']}): {f['error']}")
    if a.json:
        write_text_atomic(a.json, json.dumps(res, indent=1))
    if a.plot:
        plot(res, a.plot)
