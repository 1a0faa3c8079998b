"""`mtplite inspect`: a bundle's sections and signatures, checked against the MTP contract."""
import json
from pathlib import Path

from mtplite.errors import UserError


def inspect_bundle(out):
    from mtplite.export.contract import check, litertlm_sections

    out = Path(out)
    if not out.exists():
        raise UserError(f"{out}: no such bundle dir; run `mtplite export --out {out}` first")
    man, sigs = check(out / "android" / "manifest.json")
    secs = litertlm_sections(out / "model.litertlm")
    types = [s["model_type"] for s in secs if s["model_type"]]
    for need in ("tf_lite_prefill_decode", "tf_lite_embedder", "tf_lite_mtp_drafter"):
        if need not in types:
            raise UserError(f"{out / 'model.litertlm'}: section {need} is missing (has {types}); re-export")
    info = {"bundle": str(out), "sections": secs, "signatures": sigs, "K": man["K"],
            "cache_length": man["cache_length"], "quantization": man.get("quantization"),
            "engine": man.get("engine"), "exactness": man.get("exactness"),
            "exactness_detail": man.get("exactness_detail"), "ok": True}
    variant = (man.get("engine") or {}).get("variant")
    if variant:  # calibrate wrote it where the engine's MTP did not pay: it must hold no drafter
        vt = [s["model_type"] for s in litertlm_sections(out / variant) if s["model_type"]]
        if "tf_lite_mtp_drafter" in vt or "tf_lite_prefill_decode" not in vt:
            raise UserError(f"{out / variant}: sections {vt} are not the drafter-free variant; re-run `mtplite calibrate {out}`")
        info["variant_sections"] = vt
    return info


def cmd_inspect(a):
    info = inspect_bundle(a.out)
    if a.json:
        print(json.dumps(info, indent=1))
        return
    from mtplite.export.bundle import engine_verdict

    print(f"bundle {info['bundle']}: contract OK (K={info['K']}, cache {info['cache_length']})")
    print(f"  {engine_verdict(info['engine'])}")
    ex = {"bit_identical": "decode is verify's row 0 bit for bit: speculative output is plain output at decode's speed",
          "exact_path_needed": "decode and verify row 0 round differently: the runtime runs plain steps through verify"
          }.get(info["exactness"], "exactness not probed (exported before mtplite probed it); the runtime probes at load")
    print(f"  exactness: {ex}" + (f" ({info['exactness_detail']})" if info["exactness_detail"] else ""))
    q = info["quantization"] or {}
    print("  weights: " + (", ".join(f"{'head' if g == 'drafter' else g} {r}" for g, r in q.items()) or "float"))
    for s in info["sections"]:
        print(f"  section {s['model_type'] or s['data_type']:28s} {s['end'] - s['begin']:>12,d} bytes")
    for g, sig in info["signatures"].items():
        for name, io in sig.items():
            ins = ", ".join(f"{k}{v['shape']}" for k, v in io["inputs"].items() if not k.startswith("kv_cache"))
            nkv = sum(k.startswith("kv_cache") for k in io["inputs"])
            print(f"  {g}.{name}: {ins} + {nkv} kv_cache tensors -> {', '.join(k for k in io['outputs'] if not k.startswith('kv_cache'))}")


def register(sub):
    i = sub.add_parser("inspect", help="list sections/signatures of a bundle and check the MTP contract")
    i.add_argument("out", help="a bundle directory (the --out of export)")
    i.add_argument("--json", action="store_true", help="print one JSON record")
    i.set_defaults(fn=cmd_inspect)
