"""Backbone + head -> LiteRT graphs (litert-torch), a LiteRT-LM bundle (litert-lm-builder) and an Android dir.

OUT/model.litertlm          LlmMetadata, tokenizer, PREFILL_DECODE, EMBEDDER, MTP_DRAFTER
OUT/android/                backbone.tflite, embedder.tflite, drafter.tflite, tokenizer.json, manifest.json
Everything is written into a temporary dir next to OUT and checked against the contract first; the final files are
moved into place only when all of them exist, manifest last, so an interrupted export leaves no bundle behind.
"""
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import torch

from mtplite.errors import UserError
from mtplite.export import graphs as G
from mtplite.export.contract import FORMAT_VERSION, check_contract, read_tflite


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
        progress(f"converting drafter with the context draft space (mtp_drafter_ctx, {context} ids)")
        _convert([("mtp_drafter_ctx", G.DrafterCtxGraph(head), G.drafter_ctx_sample(c, head.c, cache_len, context))],
                 tmp / "drafter_ctx.tflite")
    return time.time() - t0


def export_standalone(sd_model, path, cache_len, prefill_lengths, quant, progress=print):
    """The standalone drafter baseline as its own .tflite (never inside model.litertlm)."""
    c = sd_model.c
    full, nolog = G.StandaloneGraph(sd_model, True), G.StandaloneGraph(sd_model, False)
    sigs = [(f"prefill_{n}", nolog, G.standalone_sample(c, n, cache_len)) for n in prefill_lengths]
    sigs += [("decode", full, G.standalone_sample(c, 1, cache_len))]
    progress("converting standalone drafter baseline")
    _convert(sigs, path)
    if quant and quant.get("drafter", "float") != "float":
        from mtplite.quantize.quantize import quantize_file

        quantize_file(path, path, quant["drafter"])


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


def write_tokenizer(backbone, path):
    tok = backbone.tokenizer
    if not hasattr(tok, "backend_tokenizer"):
        raise UserError(f"{backbone.spec}: only fast (tokenizer.json) tokenizers can be bundled")
    Path(path).write_text(tok.backend_tokenizer.to_str())


def llm_metadata(backbone, cache_len, path):
    llm_metadata_from_manifest({"bos_id": backbone.bos_id, "eos_ids": backbone.eos_ids, "cache_length": cache_len}, path)


def llm_metadata_from_manifest(man, path):
    lines = []
    if man.get("bos_id") is not None:
        lines.append(f"start_token {{ token_ids {{ ids: {man['bos_id']} }} }}")
    for e in man["eos_ids"]:
        lines.append(f"stop_tokens {{ token_ids {{ ids: {e} }} }}")
    lines.append(f"max_num_tokens: {man['cache_length']}")
    lines.append("llm_model_type { generic_model {} }")
    Path(path).write_text("\n".join(lines) + "\n")


def build_litertlm(tmp, out_file):
    from litert_lm_builder import DType, LitertLmFileBuilder, Metadata, TfLiteModelType

    b = LitertLmFileBuilder()
    b.add_system_metadata(Metadata(key="Authors", value="mtplite", dtype=DType.STRING))
    b.add_llm_metadata(str(tmp / "llm_metadata.textproto"))
    b.add_hf_tokenizer(str(tmp / "tokenizer.json"))
    b.add_tflite_model(str(tmp / "backbone.tflite"), TfLiteModelType.PREFILL_DECODE)
    b.add_tflite_model(str(tmp / "embedder.tflite"), TfLiteModelType.EMBEDDER)
    b.add_tflite_model(str(tmp / "drafter.tflite"), TfLiteModelType.MTP_DRAFTER)
    with open(out_file, "wb") as f:
        b.build(f)


def write_bench_prompts(backbone, path):
    """The benchmark prompts pre-tokenized for the Android demo (it has no HF tokenizer)."""
    from mtplite.runtime.bench import default_prompts, load_prompts
    from mtplite.train.distill import format_prompt

    try:
        prompts = load_prompts(default_prompts())
    except UserError:
        prompts = [{"id": "demo-0", "task": "freeform", "prompt": "The three primary colors are"}]
    with open(path, "w") as f:
        for p in prompts:
            f.write(json.dumps({"id": p["id"], "task": p["task"], "ids": format_prompt(backbone, p["prompt"])}) + "\n")


def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def bundle_identity(d):
    shas = {f: file_sha(d / f) for f in ("backbone.tflite", "embedder.tflite", "drafter.tflite", "tokenizer.json",
                                         "standalone.tflite", "drafter_ctx.tflite") if (d / f).exists()}
    return {"files_sha256": shas,
            "bundle_fingerprint": hashlib.sha256(json.dumps(shas, sort_keys=True).encode()).hexdigest()[:16]}


def make_manifest(backbone, head, head_doc, cache_len, prefill_lengths, K, sigs, quant, sizes):
    c = backbone.model.c
    return {
        "format": "mtplite-bundle", "format_version": FORMAT_VERSION, "created_by": "mtplite export",
        "backbone_spec": backbone.spec, "backbone_fingerprint": backbone.fingerprint,
        "head_fingerprint": head_doc.get("head_fingerprint"), "head_target_quant": head_doc.get("target_quant"),
        "head_split": head_doc.get("split"),
        "head_val_templates": head_doc.get("val_templates"),
        "family": c.family,
        "K": K, "cache_length": cache_len, "prefill_lengths": list(prefill_lengths), "vocab_size": c.vocab_size,
        "draft_vocab_size": head.c.draft_vocab_size, "hidden_size": c.hidden_size, "num_layers": c.num_layers,
        "num_kv_heads": c.num_kv_heads, "head_dim": c.head_dim, "read_layers": list(head.c.read_layers),
        "kv_layout": {"k": "[1, num_kv_heads, cache_length, head_dim] (sequence axis 2)",
                      "v": "[1, num_kv_heads, head_dim, cache_length] (sequence axis 3)",
                      "names": ["kv_cache_k_<layer>", "kv_cache_v_<layer>"]},
        "mask": "float32 additive: 0 = attend, -1e9 = masked",
        "drafter_input_pos": "position of the newest token (its KV is not cached yet); same for all K steps",
        "files": {"backbone": "backbone.tflite", "embedder": "embedder.tflite", "drafter": "drafter.tflite",
                  "tokenizer": "tokenizer.json"},
        "file_bytes": sizes,
        "signatures": sigs,
        "quantization": quant,
        "bos_id": backbone.bos_id, "eos_ids": list(backbone.eos_ids),
        "chat_template": backbone.tokenizer.chat_template if backbone.chat else None,
        "settings": {"K": K, "source": "export default (run `mtplite calibrate` to measure)"},
    }


def head_fingerprint(head):
    h = hashlib.sha256()
    for k, v in sorted(head.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def context_manifest(backbone, head, d, M):
    """manifest["context_drafter"]: what the runtime needs to fill drafter_ctx's context inputs."""
    return {"file": "drafter_ctx.tflite", "bytes": (d / "drafter_ctx.tflite").stat().st_size, "max_ids": M,
            "space_ids": head.draft_ids_t.tolist(), "embed_scale": float(backbone.model.c.embed_scale),
            "copy_rows": head.copy is not None, "signatures": read_tflite(d / "drafter_ctx.tflite")[0]}


def export(backbone, head, head_doc, out, cache_len=512, prefill_lengths=(32, 128), K=None, quant=None,
           progress=print, standalone=None, context=128):
    out = Path(out)
    K = K or head.c.K
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
        qinfo = {"backbone": "float", "embedder": "float", "drafter": "float"}
        if quant:
            from mtplite.quantize.quantize import quantize_files

            qinfo = quantize_files(tmp, quant, progress)
        sigs = {g: read_tflite(tmp / f"{g}.tflite")[0] for g in ("backbone", "embedder", "drafter")}
        head_doc = {**head_doc, "head_fingerprint": head_fingerprint(head)}
        write_tokenizer(backbone, tmp / "tokenizer.json")
        sizes = {g: (tmp / f"{g}.tflite").stat().st_size for g in ("backbone", "embedder", "drafter")}
        man = make_manifest(backbone, head, head_doc, cache_len, prefill_lengths, K, sigs, qinfo, sizes)
        if context:
            man["context_drafter"] = context_manifest(backbone, head, tmp, context)
        if standalone is not None:
            export_standalone(standalone, tmp / "standalone.tflite", cache_len, prefill_lengths, quant, progress)
            man["standalone"] = {"file": "standalone.tflite", "bytes": (tmp / "standalone.tflite").stat().st_size,
                                 "num_layers": standalone.c.num_layers,
                                 "signatures": read_tflite(tmp / "standalone.tflite")[0]}
        check_contract(sigs, man, where=str(out))  # refuse before anything final is written
        llm_metadata(backbone, cache_len, tmp / "llm_metadata.textproto")
        progress("packing model.litertlm")
        build_litertlm(tmp, tmp / "model.litertlm")
        man["litertlm_bytes"] = (tmp / "model.litertlm").stat().st_size
        write_bench_prompts(backbone, tmp / "bench_prompts.jsonl")
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
