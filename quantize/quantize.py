"""Weight quantization of exported graphs with ai-edge-quantizer recipes, per graph.

Recipes: float | int8 (channelwise dynamic range) | int4-b32 | int4-b64 | int4-b128 (blockwise dynamic range).
A recipe string names one recipe for every graph ("int8") or one per graph
("backbone=int4-b32,head=int8,embedder=int8"; `head` and `drafter` are the same graph).
Weight-only int4 blockwise is refused: ai-edge-quantizer 0.10 leaves such a model float without an error, and every
quantized graph is checked afterwards for real int8/int4 weight tensors.
"""
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


def parse_recipe(text):
    text = (text or "").strip()
    if not text or text == "none":
        return None
    out = {}
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if len(parts) == 1 and "=" not in parts[0]:
        parts = [f"{g}={parts[0]}" for g in GRAPHS]
    for p in parts:
        if "=" not in p:
            raise UserError(f"--quant '{text}': write one recipe (int8) or graph=recipe pairs (backbone=int4-b32,head=int8)")
        g, r = (x.strip() for x in p.split("=", 1))
        g = "drafter" if g == "head" else g
        if g not in GRAPHS:
            raise UserError(f"--quant: unknown graph '{g}' (backbone, embedder, head)")
        if r in REFUSED:
            raise UserError(f"--quant {g}={r}: refused: {REFUSED[r]}")
        if r not in RECIPES:
            raise UserError(f"--quant {g}={r}: unknown recipe (choose {', '.join(k for k in RECIPES if k not in REFUSED)})")
        out[g] = r
    return {g: out.get(g, "float") for g in GRAPHS}


def quantize_file(src, dst, recipe_name):
    from ai_edge_quantizer import quantizer, recipe

    from mtplite.export.contract import read_tflite

    if recipe_name == "float":
        if Path(src) != Path(dst):
            shutil.copyfile(src, dst)
        return
    qt = quantizer.Quantizer(str(src))
    qt.load_quantization_recipe(getattr(recipe, RECIPES[recipe_name])())
    res = qt.quantize()
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
    return {g: recipe_map.get(g, "float") for g in GRAPHS}
