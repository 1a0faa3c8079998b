"""Backbone + head -> LiteRT graphs (litert-torch), a LiteRT-LM bundle (litert-lm-builder) and an Android dir.

OUT/model.litertlm          LlmMetadata, tokenizer, PREFILL_DECODE, EMBEDDER, MTP_DRAFTER
OUT/android/                backbone.tflite, embedder.tflite, drafter.tflite, tokenizer.json, manifest.json
Everything is written into a temporary dir next to OUT and checked against the contract first; the final files are
moved into place only when all of them exist, manifest last, so an interrupted export leaves no bundle behind.
"""
import json
import os
import shutil
import time
from pathlib import Path

import torch

from mtplite.errors import UserError
from mtplite.export import graphs as G
from mtplite.export.bundle import (bundle_identity, context_manifest, head_fingerprint, make_manifest, pack_litertlm,
                                   write_bench_prompts, write_tokenizer)
from mtplite.export.contract import DRAFT_K, check_contract, draft_k_windows, read_tflite
from mtplite.export.exactness import probe_file


def _convert(signatures, path, quant_config=None):
    """signatures: [(name, module, sample_kwargs)] -> one multi-signature .tflite."""
    import litert_torch

    conv = litert_torch
    for name, mod, sample in signatures:
        conv = conv.signature(name, mod.eval(), sample_kwargs=sample)
    kw = {"quant_config": quant_config} if quant_config is not None else {}
    model = conv.convert(**kw)
    model.export(str(path))


def export_graphs(backbone, head, tmp, cache_len, prefill_lengths, K, progress=print, context=0):
    dec, c = backbone.model, backbone.model.c
    dec.float().eval()
    head.float().eval()
    t0 = time.time()
    progress(f"converting embedder ({len(prefill_lengths) + 1} signatures)")
    emb = G.EmbedderGraph(dec)
    sigs = [("decode_embedder", emb, {"token_ids": torch.zeros(1, 1, dtype=torch.int32)})]
    sigs += [(f"prefill_embedder_{n}", emb, {"token_ids": torch.zeros(1, n, dtype=torch.int32)}) for n in prefill_lengths]
    _convert(sigs, tmp / "embedder.tflite")
    progress(f"converting backbone (prefill {prefill_lengths}, decode, verify T={K + 1})")
    full, nolog = G.BackboneGraph(dec, True), G.BackboneGraph(dec, False)
    sigs = [(f"prefill_{n}", nolog, G.backbone_sample(c, n, cache_len)) for n in prefill_lengths]
    sigs += [("decode", full, G.backbone_sample(c, 1, cache_len)), ("verify", full, G.backbone_sample(c, K + 1, cache_len))]
    _convert(sigs, tmp / "backbone.tflite")
    progress("converting drafter (mtp_drafter)")
    _convert([("mtp_drafter", G.DrafterGraph(head), G.drafter_sample(c, head.c, cache_len))], tmp / "drafter.tflite")
    if context:
        progress(f"converting the K-step drafter with the context draft space ({DRAFT_K}, {context} ids)")
        sample = G.drafter_ctx_sample(c, head.c, cache_len, context)
        sigs = [(DRAFT_K, G.DraftKGraph(head, dec), sample)]
        sigs += [(f"{DRAFT_K}_{w}", G.DraftKGraph(head, dec, w), sample) for w in draft_k_windows(cache_len)]
        _convert(sigs, tmp / "drafter_ctx.tflite")
    return time.time() - t0


def export_standalone(sd_model, path, cache_len, prefill_lengths, progress=print):
    """The standalone drafter baseline as its own .tflite (never inside model.litertlm)."""
    c = sd_model.c
    full, nolog = G.StandaloneGraph(sd_model, True), G.StandaloneGraph(sd_model, False)
    sigs = [(f"prefill_{n}", nolog, G.standalone_sample(c, n, cache_len)) for n in prefill_lengths]
    sigs += [("decode", full, G.standalone_sample(c, 1, cache_len))]
    progress("converting standalone drafter baseline")
    _convert(sigs, path)


def load_standalone(head_dir, backbone):
    """standalone.safetensors + standalone.json written by `mtplite train --standalone`, or None."""
    from safetensors.torch import load_file

    from mtplite.train.standalone import build_standalone

    d = Path(head_dir)
    if not (d / "standalone.json").exists():
        return None
    doc = json.loads((d / "standalone.json").read_text())
    if doc.get("backbone_fingerprint") != backbone.fingerprint:
        raise UserError(f"{d / 'standalone.json'}: trained for backbone {doc.get('backbone_fingerprint')}, "
                        f"not {backbone.fingerprint}")
    m = build_standalone(backbone, doc["num_layers"])
    try:
        sd = load_file(str(d / "standalone.safetensors"))
        sd["lm_head.weight"] = sd["embed_tokens.weight"]
        m.load_state_dict(sd)
    except Exception as e:
        raise UserError(f"{d / 'standalone.safetensors'}: cannot load ({str(e).splitlines()[0][:100]})") from None
    m.lm_head.weight = m.embed_tokens.weight
    return m.eval()


def export(backbone, head, head_doc, out, cache_len=512, prefill_lengths=(32, 128), quantize=None, progress=print,
           standalone=None):
    """K and the context draft space's size are the head's own (head.json). `quantize(dir)`, when given, rewrites
    the float graphs in the staging dir and returns the recipe per graph (mtplite.quantize.quantize.quantizer): a
    later stage handed in by the caller, so the bundle is checked and moved into place only once, quantized."""
    out = Path(out)
    K, context = head.c.K, head.c.context
    if cache_len < max(prefill_lengths) or cache_len < K + 2:
        raise UserError(f"--cache-length {cache_len} must be >= the largest prefill length {max(prefill_lengths)}")
    if K < 1:
        raise UserError(f"K={K}: must be >= 1")
    from mtplite.model.load import fingerprint

    # the bundle records the backbone's fingerprint as the deployed one: refuse weights that drifted in memory
    # (a bf16 round trip for fast distillation changed SmolLM2's outputs before quickstart kept a float copy)
    now = fingerprint(backbone.model.float())
    if now != backbone.fingerprint:
        raise UserError(f"{backbone.spec}: the backbone's weights in memory (fingerprint {now}) are not the loaded "
                        f"ones ({backbone.fingerprint}); export from a freshly loaded backbone")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(".export-tmp-*"):  # left by an export that was killed: nothing in it was ever final
        shutil.rmtree(old, ignore_errors=True)
    tmp = Path(os.path.join(out, f".export-tmp-{os.getpid()}"))
    tmp.mkdir()
    try:
        t = export_graphs(backbone, head, tmp, cache_len, prefill_lengths, K, progress, context)
        if standalone is not None:
            export_standalone(standalone, tmp / "standalone.tflite", cache_len, prefill_lengths, progress)
        qinfo = quantize(tmp) if quantize else {"backbone": "float", "embedder": "float", "drafter": "float"}
        sigs = {g: read_tflite(tmp / f"{g}.tflite")[0] for g in ("backbone", "embedder", "drafter")}
        head_doc = {**head_doc, "head_fingerprint": head_fingerprint(head)}
        write_tokenizer(backbone, tmp / "tokenizer.json")
        sizes = {g: (tmp / f"{g}.tflite").stat().st_size for g in ("backbone", "embedder", "drafter")}
        man = make_manifest(backbone, head, head_doc, cache_len, prefill_lengths, K, sigs, qinfo, sizes)
        progress("probing decode against verify row 0")
        man["exactness"], man["exactness_detail"] = probe_file(tmp / "backbone.tflite", sigs["backbone"])
        if context:
            man["context_drafter"] = context_manifest(backbone, head, tmp, context)
        if standalone is not None:
            man["standalone"] = {"file": "standalone.tflite", "bytes": (tmp / "standalone.tflite").stat().st_size,
                                 "num_layers": standalone.c.num_layers,
                                 "signatures": read_tflite(tmp / "standalone.tflite")[0]}
        check_contract(sigs, man, where=str(out))  # refuse before anything final is written
        progress("packing model.litertlm")
        pack_litertlm(tmp, man, tmp / "model.litertlm")
        man["litertlm_bytes"] = (tmp / "model.litertlm").stat().st_size
        write_bench_prompts(backbone, tmp / "bench_prompts.jsonl", head_doc.get("eval_prompts"))
        # the bundle's identity: hashes of everything the runtime reads. model.litertlm is left out on purpose:
        # litert-lm-builder stamps a fresh uuid4 and creation time into its system metadata on every build, so it
        # is the only output that differs between two exports of the same head (tests/test_reliability.py)
        man.update(bundle_identity(tmp))
        (tmp / "manifest.json").write_text(json.dumps(man, indent=1))
        import resource

        # run statistics vary from run to run, so they live beside the manifest, not in it
        stats = {"export_seconds": round(t, 1),
                 "process_peak_rss_bytes_after_export": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
        (tmp / "export_stats.json").write_text(json.dumps(stats, indent=1))
        android = out / "android"
        android.mkdir(exist_ok=True)
        # manifest last: a bundle is complete exactly when its manifest exists
        for stale in (android / "manifest.json", out / "model.litertlm"):
            if stale.exists():
                stale.unlink()
        for f in ("backbone.tflite", "embedder.tflite", "drafter.tflite", "tokenizer.json", "bench_prompts.jsonl",
                  "standalone.tflite", "export_stats.json", "drafter_ctx.tflite"):
            if not (tmp / f).exists():
                (android / f).unlink(missing_ok=True)  # a stale baseline from an earlier export must not linger
                continue
            os.replace(tmp / f, android / f)
        os.replace(tmp / "model.litertlm", out / "model.litertlm")
        os.replace(tmp / "manifest.json", android / "manifest.json")
        return {**man, **stats}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
