"""Weight quantization of exported graphs with ai-edge-quantizer recipes, per graph.

Recipes: float | int8 (channelwise dynamic range) | int4-b32 | int4-b64 | int4-b128 (blockwise dynamic range).
A recipe string names one recipe for every graph ("int8") or one per graph
("backbone=int4-b32,head=int8,embedder=int8"; `head` and `drafter` are the same graph), or a preset (PRESETS).
Weight-only int4 blockwise is refused: ai-edge-quantizer 0.10 leaves such a model float without an error, and every
quantized graph is checked afterwards for real int8/int4 weight tensors.
"""
import re
import shutil
import time
from pathlib import Path

from mtplite.errors import UserError

RECIPES = {"float": None, "int8": "dynamic_wi8_afp32", "int4-b32": "dynamic_wi4b32_afp32",
           "int4-b64": "dynamic_wi4b64_afp32", "int4-b128": None}
REFUSED = {"wo-int4": "weight-only int4 blockwise is a silent no-op in ai-edge-quantizer 0.10 (the file stays float)",
           "weight-only-int4": "weight-only int4 blockwise is a silent no-op in ai-edge-quantizer 0.10",
           "int4-b128": "ai-edge-quantizer 0.10 ships no block-128 recipe; use int4-b32 or int4-b64"}
GRAPHS = ("backbone", "embedder", "drafter")
# int8-h4, the default of quickstart and the rebuild scripts: the head's weights are most of what a draft reads once
# a verify pass has evicted them, and int4 blocks halve them at the same accept length (measured in lab/notes/PERF.md).
PRESETS = {"int8-h4": "backbone=int8,embedder=int8,head=int4-b32"}


def parse_recipe(text, flag="--quant"):
    """A recipe string -> {graph: recipe}; errors quote what the user typed, under the flag they typed it with."""
    typed = text
    text = (text or "").strip()
    text = PRESETS.get(text, text)
    if not text or text == "none":
        return None
    out = {}
    parts = [p.strip() for p in text.split(",") if p.strip()]
    single = len(parts) == 1 and "=" not in parts[0]
    if single:
        parts = [f"{g}={parts[0]}" for g in GRAPHS]
    choices = ", ".join(list(PRESETS) + [k for k in RECIPES if k not in REFUSED])
    for p in parts:
        if "=" not in p:
            raise UserError(f"{flag} {typed}: write one recipe (int8) or graph=recipe pairs (backbone=int4-b32,head=int8)")
        g, r = (x.strip() for x in p.split("=", 1))
        g = "drafter" if g == "head" else g
        if g not in GRAPHS:
            raise UserError(f"{flag} {typed}: unknown graph '{g}' (backbone, embedder, head)")
        if r in REFUSED:
            raise UserError(f"{flag} {typed}: refused: {REFUSED[r]}")
        if r not in RECIPES:
            raise UserError(f"{flag} {typed}: unknown recipe '{r}' (choose {choices})")
        out[g] = r
    return {g: out.get(g, "float") for g in GRAPHS}


def unblockable_scopes(path, block):
    """Scopes (output tensor names, as ai-edge-quantizer names an op) of the ops whose constant weight's last
    dim is not a multiple of `block`."""
    from ai_edge_quantizer.utils import tfl_flatbuffer_utils as fb

    model = fb.read_model(Path(path))
    out = []
    for sg in model.subgraphs:
        for op in sg.operators:
            name = fb.TFL_OP_CODE_TO_NAME.get(model.operatorCodes[op.opcodeIndex].builtinCode)
            if name not in ("FULLY_CONNECTED", "BATCH_MATMUL", "EMBEDDING_LOOKUP", "CONV_2D") or len(op.inputs) < 2:
                continue
            w = sg.tensors[op.inputs[1]] if op.inputs[1] >= 0 else None
            if w is None or not len(model.buffers[w.buffer].data if model.buffers[w.buffer].data is not None else []):
                continue  # not a constant weight
            if int(w.shape[-1]) % block:
                out.append(fb.get_op_scope(op, sg.tensors))
    return out


def quantize_file(src, dst, recipe_name):
    from ai_edge_quantizer import quantizer, recipe

    from mtplite.export.contract import read_tflite

    if recipe_name == "float":
        if Path(src) != Path(dst):
            shutil.copyfile(src, dst)
        return
    qt = quantizer.Quantizer(str(src))
    entries = getattr(recipe, RECIPES[recipe_name])()
    if recipe_name.startswith("int4-b"):
        # a weight whose input dim is not a multiple of the block (the copy read's [3n, K] step-role table) cannot be
        # blocked; the quantizer fails on it, so those few small ops get channelwise int8 (the latest match wins)
        int8 = recipe.dynamic_wi8_afp32()[0]
        entries += [{**int8, "regex": "^" + re.escape(scope) + "$"}
                    for scope in unblockable_scopes(src, int(recipe_name.split("-b")[1]))]
    qt.load_quantization_recipe(entries)
    graph = Path(src).stem if Path(src).stem in ("backbone", "embedder") else "head"
    try:
        res = qt.quantize()
    except ValueError as e:  # the quantizer's own refusal, not ours: one line naming the graph and a way round it
        raise UserError(f"{src}: ai-edge-quantizer cannot apply {recipe_name} to this graph ({e}); quantize it "
                        f"another way, e.g. --quant {graph}=int8") from None
    tmp = Path(str(dst) + ".qtmp")
    res.export_model(str(tmp), overwrite=True)
    _, wb = read_tflite(tmp)
    want = "int8" if recipe_name == "int8" else "int4"
    if wb.get(want, 0) == 0:
        tmp.unlink()
        raise UserError(f"{src}: quantization with {recipe_name} produced no {want} weights (the quantizer silently "
                        "left the graph float); refusing to ship it")
    tmp.replace(dst)


def quantize_files(d, recipe_map, progress=print):
    d = Path(d)
    for g in GRAPHS:
        r = recipe_map.get(g, "float")
        if r != "float":
            t = time.time()
            progress(f"quantizing {g} ({r})")
            quantize_file(d / f"{g}.tflite", d / f"{g}.tflite", r)
            progress(f"quantized {g} in {time.time() - t:.0f}s")
    for f in ("drafter_ctx.tflite", "standalone.tflite"):  # drafters beside the contract's: the head's recipe
        if (d / f).exists() and recipe_map.get("drafter", "float") != "float":
            quantize_file(d / f, d / f, recipe_map["drafter"])
    return {g: recipe_map.get(g, "float") for g in GRAPHS}


def quantizer(recipe_map, progress=print):
    """The `quantize` step export runs on its staging dir (None for a float export)."""
    if not recipe_map:
        return None
    return lambda d: quantize_files(d, recipe_map, progress)


def quantize_bundle(src, dst, recipe_map, progress=print):
    """OUT -> OUT2 with the graphs re-quantized: new .tflite files, model.litertlm and manifest, written atomically
    (a temp dir renamed into place at the end)."""
    import json
    import os

    from mtplite.export.bundle import bundle_identity, pack_litertlm
    from mtplite.export.contract import check, read_tflite
    from mtplite.export.exactness import probe_file

    src, dst = Path(src), Path(dst)
    man, _ = check(src / "android" / "manifest.json")
    if any(v not in ("float", "float32") for v in (man.get("quantization") or {}).values()):
        raise UserError(f"{src}: already quantized ({man['quantization']}); quantize the float export instead")
    if dst.exists():
        raise UserError(f"{dst}: already exists; choose a new --out")
    for old in dst.parent.glob(f".{dst.name}.tmp*"):  # left by a killed run: nothing in it was ever final
        shutil.rmtree(old, ignore_errors=True)
    tmp = dst.with_name(f".{dst.name}.tmp{os.getpid()}")
    try:
        (tmp / "android").mkdir(parents=True)
        for f in (src / "android").iterdir():
            if f.is_file():
                shutil.copyfile(f, tmp / "android" / f.name)
        quantize_files(tmp / "android", recipe_map, progress)
        man["quantization"] = {g: recipe_map.get(g, "float") for g in GRAPHS}
        man["file_bytes"] = {g: (tmp / "android" / f"{g}.tflite").stat().st_size for g in GRAPHS}
        man["signatures"] = {g: read_tflite(tmp / "android" / f"{g}.tflite")[0] for g in GRAPHS}
        man["exactness"], man["exactness_detail"] = probe_file(tmp / "android" / "backbone.tflite",
                                                               man["signatures"]["backbone"])
        if man.get("standalone"):
            man["standalone"]["bytes"] = (tmp / "android" / "standalone.tflite").stat().st_size
        if man.get("context_drafter"):
            f = tmp / "android" / man["context_drafter"]["file"]
            man["context_drafter"].update(bytes=f.stat().st_size, signatures=read_tflite(f)[0])
        man["settings"] = {"K": man["K"], "source": "export default (run `mtplite calibrate` to measure)"}
        man.pop("engine", None)  # the engine was timed on the source's graphs: calibrate measures these anew
        man.update(bundle_identity(tmp / "android"))
        (tmp / "android" / "manifest.json").write_text(json.dumps(man, indent=1))
        pack_litertlm(tmp / "android", man, tmp / "model.litertlm")
        os.replace(tmp, dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return man


def register(sub):
    q = sub.add_parser("quantize", help="re-quantize an exported float bundle into a new dir")
    q.add_argument("out", help="a float bundle directory (export --quant none)")
    q.add_argument("--recipe", required=True, help="int8 | int4-b32 | backbone=int4-b32,head=int8,embedder=int8")
    q.add_argument("--out", dest="dst", required=True, help="the new bundle directory (must not exist)")
    q.set_defaults(fn=cmd_quantize)


def cmd_quantize(a):
    import json
    import sys

    recipe = parse_recipe(a.recipe, "--recipe")
    if recipe is None:
        raise UserError("--recipe none: nothing to do")
    man = quantize_bundle(a.out, a.dst, recipe, progress=lambda s: print(f"[quantize] {s}", file=sys.stderr))
    print(json.dumps({"out": a.dst, "quantization": man["quantization"], "file_bytes": man["file_bytes"]}))
