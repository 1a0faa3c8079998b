"""`mtplite export` and `mtplite inspect`."""
import json
import sys
from pathlib import Path

from mtplite.errors import UserError


def cmd_export(a):
    from mtplite.export.export import export
    from mtplite.model.head import check_context, load_head
    from mtplite.model.load import load_backbone

    try:
        prefill = sorted({int(x) for x in a.prefill_lengths.split(",") if x.strip()})
    except ValueError:
        raise UserError(f"--prefill-lengths '{a.prefill_lengths}': give comma-separated ints, e.g. 32,128") from None
    if not prefill or min(prefill) < 1:
        raise UserError("--prefill-lengths: give at least one positive length")
    quant = None
    if a.quant and a.quant != "none":
        from mtplite.quantize.quantize import parse_recipe

        quant = parse_recipe(a.quant)
    check_context(a.context)
    bb = load_backbone(a.backbone)
    head, doc = load_head(a.head, bb.fingerprint)
    from mtplite.export.export import load_standalone

    man = export(bb, head, doc, a.out, cache_len=a.cache_length, prefill_lengths=prefill, K=a.k or None, quant=quant,
                 progress=lambda s: print(f"[export] {s}", file=sys.stderr), standalone=load_standalone(a.head, bb),
                 context=a.context)
    print(json.dumps({"out": a.out, "litertlm_bytes": man["litertlm_bytes"], "file_bytes": man["file_bytes"],
                      "quantization": man["quantization"], "export_seconds": man["export_seconds"]}))


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
    return {"bundle": str(out), "sections": secs, "signatures": sigs, "K": man["K"],
            "cache_length": man["cache_length"], "quantization": man.get("quantization"), "ok": True}


def cmd_inspect(a):
    info = inspect_bundle(a.out)
    if a.json:
        print(json.dumps(info, indent=1))
        return
    print(f"bundle {info['bundle']}: contract OK (K={info['K']}, cache {info['cache_length']})")
    for s in info["sections"]:
        print(f"  section {s['model_type'] or s['data_type']:28s} {s['end'] - s['begin']:>12,d} bytes")
    for g, sig in info["signatures"].items():
        for name, io in sig.items():
            ins = ", ".join(f"{k}{v['shape']}" for k, v in io["inputs"].items() if not k.startswith("kv_cache"))
            nkv = sum(k.startswith("kv_cache") for k in io["inputs"])
            print(f"  {g}.{name}: {ins} + {nkv} kv_cache tensors -> {', '.join(k for k in io['outputs'] if not k.startswith('kv_cache'))}")


def register(sub):
    from mtplite.cli import CONTEXT

    e = sub.add_parser("export", help="export backbone + head to LiteRT graphs and a .litertlm bundle")
    e.add_argument("--backbone", default="gemma3-270m")
    e.add_argument("--head", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--quant", default="none", help="none | int8 | int4-b32 | backbone=int8,head=int8,embedder=int8")
    e.add_argument("--cache-length", type=int, default=512)
    e.add_argument("--prefill-lengths", default="32,128")
    e.add_argument("--k", type=int, default=0, help="drafts per cycle (default: the head's K)")
    e.add_argument("--context", type=int, default=CONTEXT,
                   help="also write drafter_ctx.tflite, whose head drafts up to this many ids of the text outside its "
                        "draft vocabulary (our runtime; the .litertlm keeps the plain drafter); 0 = off")
    e.set_defaults(fn=cmd_export)
    i = sub.add_parser("inspect", help="list sections/signatures of a bundle and check the MTP contract")
    i.add_argument("out")
    i.add_argument("--json", action="store_true")
    i.set_defaults(fn=cmd_inspect)
