"""What a bundle says about itself: its manifest, identity hashes, LiteRT-LM metadata and the .litertlm packing.

Export writes these for a new bundle and quantize rewrites them for a re-quantized copy, so both use this module.
"""
import hashlib
import json
from pathlib import Path

from mtplite.errors import UserError
from mtplite.export.contract import FORMAT_VERSION, read_tflite
from mtplite.model.load import chat_turn


def write_tokenizer(backbone, path):
    tok = backbone.tokenizer
    if not hasattr(tok, "backend_tokenizer"):
        raise UserError(f"{backbone.spec}: only fast (tokenizer.json) tokenizers can be bundled")
    Path(path).write_text(tok.backend_tokenizer.to_str())


# LiteRT-LM's Conversation API hands the template each message's content as a list of typed parts where Hugging Face
# templates expect a string, so the text parts are joined first; BOS is placed as model/load.py template_ids places it.
TEMPLATE_PREAMBLE = """{%- set mt = namespace(list=[]) -%}
{%- for m in messages -%}
{%- set t = namespace(s='') -%}
{%- if m['content'] is string -%}{%- set t.s = m['content'] -%}
{%- else -%}{%- for c in m['content'] -%}{%- if c['type'] == 'text' -%}{%- set t.s = t.s + c['text'] -%}{%- endif -%}\
{%- endfor -%}{%- endif -%}
{%- set mt.list = mt.list + [{'role': m['role'], 'content': t.s}] -%}
{%- endfor -%}
{%- set messages = mt.list -%}
"""
# a base model (no chat template) continues the raw text, as it was trained and as mtplite's runtime feeds it
BASE_TEMPLATE = "{%- for message in messages -%}{{ message['content'] }}{%- endfor -%}"


def prompt_template(man):
    """The Jinja template the official engine's Conversation API renders messages with."""
    bos = "" if man.get("bos_id") is not None else (man.get("bos_token") or "")
    return (TEMPLATE_PREAMBLE + "{%- set bos_token = " + json.dumps(bos) + " -%}\n"
            + (man.get("chat_template") or BASE_TEMPLATE))


def llm_metadata(man):
    """LiteRT-LM's LlmMetadata textproto for a bundle's manifest (the template goes in beside it)."""
    lines = []
    if man.get("bos_id") is not None:
        lines.append(f"start_token {{ token_ids {{ ids: {man['bos_id']} }} }}")
    for e in man["eos_ids"]:
        lines.append(f"stop_tokens {{ token_ids {{ ids: {e} }} }}")
    lines.append(f"max_num_tokens: {man['cache_length']}")
    lines.append("llm_model_type { gemma3 {} }" if man.get("family") == "gemma3" else "llm_model_type { generic_model {} }")
    return "\n".join(lines) + "\n"


def pack_litertlm(graphs, man, out_file, drafter=True):
    """Pack the graphs in dir `graphs`, its tokenizer.json and the manifest's LlmMetadata and prompt template into a
    .litertlm; drafter=False leaves the MTP_DRAFTER section out (the engine then decodes plainly)."""
    import tempfile

    from litert_lm_builder import DType, LitertLmFileBuilder, Metadata, TfLiteModelType

    graphs = Path(graphs)
    with tempfile.TemporaryDirectory() as t:
        meta, tmpl = Path(t) / "llm_metadata.textproto", Path(t) / "prompt_template.jinja"
        meta.write_text(llm_metadata(man))
        tmpl.write_text(prompt_template(man))
        b = LitertLmFileBuilder()
        b.add_system_metadata(Metadata(key="Authors", value="mtplite", dtype=DType.STRING))
        b.add_llm_metadata(str(meta), jinja_prompt_template_path=str(tmpl))
        b.add_hf_tokenizer(str(graphs / "tokenizer.json"))
        b.add_tflite_model(str(graphs / "backbone.tflite"), TfLiteModelType.PREFILL_DECODE)
        b.add_tflite_model(str(graphs / "embedder.tflite"), TfLiteModelType.EMBEDDER)
        if drafter:
            b.add_tflite_model(str(graphs / "drafter.tflite"), TfLiteModelType.MTP_DRAFTER)
        with open(out_file, "wb") as f:
            b.build(f)


# the drafter-free variant `mtplite calibrate` writes where the official engine's MTP does not pay
NO_DRAFTER = "model-nodrafter.litertlm"


def build_litertlm_without_drafter(bundle_dir, out_file):
    """The bundle's .litertlm without its MTP_DRAFTER section, from the same graphs (OUT/android), written atomically:
    for the official engine where its MTP measured slower than its plain decoding."""
    from mtplite.paths import atomic_path

    d = Path(bundle_dir)
    man = json.loads((d / "android" / "manifest.json").read_text())
    with atomic_path(out_file) as part:
        pack_litertlm(d / "android", man, part, drafter=False)


def write_bench_prompts(backbone, path, prompts=None):
    """The benchmark prompts (or the head's held-out app prompts) pre-tokenized for the Android demo (it has no HF
    tokenizer), with their text for the official engine's Conversation API (it applies the template itself)."""
    from mtplite.data.benchmark import default_prompts, load_prompts
    from mtplite.model.load import format_prompt

    prompts = prompts or load_prompts(default_prompts())
    with open(path, "w") as f:
        for p in prompts:
            f.write(json.dumps({"id": p["id"], "task": p["task"], "ids": format_prompt(backbone, p["prompt"]),
                                "prompt": p["prompt"]}) + "\n")


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
        # the head's held-out share of the user's own prompts: what calibrate, bench and the phone measure it on
        "eval_prompts": head_doc.get("eval_prompts"), "prompts_file": head_doc.get("prompts_file"),
        "family": c.family,
        "K": K, "cache_length": cache_len, "prefill_lengths": list(prefill_lengths), "vocab_size": c.vocab_size,
        "draft_vocab_size": head.c.draft_vocab_size, "hidden_size": c.hidden_size, "num_layers": c.num_layers,
        "num_kv_heads": c.num_kv_heads, "head_dim": c.head_dim, "read_layers": list(head.c.read_layers),
        "kv_layout": {"k": "[1, num_kv_heads, cache_length, head_dim] (sequence axis 2)",
                      "v": "[1, num_kv_heads, head_dim, cache_length] (sequence axis 3)",
                      "names": ["kv_cache_k_<layer>", "kv_cache_v_<layer>"]},
        "mask": "float32 additive: 0 = attend, -1e9 = masked",
        "drafter_input_pos": "mtp_drafter: the newest cached token's position, as LiteRT-LM passes it; same for all K steps",
        "files": {"backbone": "backbone.tflite", "embedder": "embedder.tflite", "drafter": "drafter.tflite",
                  "tokenizer": "tokenizer.json"},
        "file_bytes": sizes,
        "signatures": sigs,
        "quantization": quant,
        "bos_id": backbone.bos_id, "eos_ids": list(backbone.eos_ids),
        "chat_template": backbone.tokenizer.chat_template if backbone.chat else None,
        "bos_token": backbone.tokenizer.bos_token, "chat_turn": chat_turn(backbone),
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


def engine_verdict(rec):
    """One plain line about the engine record, for inspect and quickstart's summary."""
    if not rec:
        return "official engine: not measured (run `mtplite calibrate` on this bundle)"
    if "error" in rec:
        return f"official engine: could not be measured ({rec['error']})"
    head = (f"official engine: MTP {rec['mtp_over_plain']:.2f}x plain on {rec['prompts']} held-out prompts "
            f"({rec['mtp_tokens_per_s']:.1f} vs {rec['plain_tokens_per_s']:.1f} tok/s)")
    if rec["pays"]:
        return head + ": MTP pays there; ship model.litertlm"
    return (head + ": MTP does NOT pay in the engine; ship " + rec.get("variant", NO_DRAFTER)
            + " (no drafter section, plain decoding) to the engine, and model.litertlm only to mtplite's runtime")
