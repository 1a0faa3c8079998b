"""Which torch numerics match a quantized LiteRT backbone's greedy tokens best: float, fake-quantized weights, or
fake-quantized weights + dynamic int8 activations. Teacher-forced on the LiteRT bundle's own greedy stream.

  python lab/scripts/fakequant_match.py --backbone gemma3-270m --bundle OUT_INT8 [--limit 12] [--json out.json]
"""
import argparse
import copy
import json
import sys

import torch

from mtplite.errors import run_main
from mtplite.model import generate as G
from mtplite.model.decoder import causal_mask
from mtplite.model.load import load_backbone
from mtplite.paths import write_text_atomic
from mtplite.quantize.fakequant import fake_quantize_backbone_
from mtplite.data.benchmark import default_prompts, load_prompts
from mtplite.runtime.litert import encode
from mtplite.runtime.litert import Bundle, load_tokenizer


@torch.no_grad()
def tf_argmax(dec, seq):
    L = len(seq)
    pos = torch.arange(L, dtype=torch.int32)
    lg, _, _ = dec(dec.embed(torch.tensor([seq])), pos, causal_mask(pos, L), dec.empty_cache(L))
    return lg[0].argmax(-1).tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backbone", required=True)
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--json")
    a = ap.parse_args()
    b = Bundle(a.bundle, threads=2, mtp=False)
    recipe = b.man["quantization"]
    tok = load_tokenizer(a.bundle)
    bb = load_backbone(a.backbone)
    variants = {"float": bb.model}
    for name, act in (("fake-quant weights", False), ("fake-quant weights + activations", True)):
        variants[name] = copy.deepcopy(bb.model)
        fake_quantize_backbone_(variants[name], recipe, act=act)
    agree = {k: [0, 0] for k in variants}
    for p in load_prompts(default_prompts())[: a.limit]:
        ids = encode(tok, b.man, p["prompt"])
        out = G.run(ids, b.steps(), max_new_tokens=a.max_new_tokens, eos_ids=set(b.man["eos_ids"]), K=0,
                    cache_len=b.C)["tokens"]
        for k, dec in variants.items():
            am = tf_argmax(dec, ids + out)
            agree[k][0] += sum(am[len(ids) - 1 + i] == t for i, t in enumerate(out))
            agree[k][1] += len(out)
    res = {"backbone": a.backbone, "bundle": a.bundle, "quantization": recipe,
           "agreement_with_litert_greedy": {k: v[0] / max(v[1], 1) for k, v in agree.items()}, "tokens": agree["float"][1]}
    print(json.dumps(res, indent=1))
    if a.json:
        write_text_atomic(a.json, json.dumps(res, indent=1))


if __name__ == "__main__":
    sys.exit(run_main(main, "fakequant_match.py"))
