"""Read signatures out of .tflite / .litertlm files without native code, and check the shared-KV contract.

Everything here parses flatbuffers in Python (ai_edge_litert.schema_py_generated, litert_lm_builder's header schema),
so a hostile or truncated file becomes a one-line UserError instead of a crash inside the LiteRT runtime. The same
checks run before `export` writes anything, in `inspect`, and before the runtime hands a file to LiteRT.
"""
import json
import mmap
import struct
from pathlib import Path

from mtplite.errors import UserError

DTYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 6: "bool", 7: "int16", 9: "int8", 17: "int4",
          10: "float64", 16: "uint32"}
FORMAT_VERSION = 1
# The manifest's drafting settings (written by `mtplite calibrate`, read by the runtimes):
DRAFTS = ("mtp", "hybrid", "lookup")  # settings.draft: who drafts (also `generate --draft`), or "off" for none
DRAFT_K = "mtp_draft_k"  # drafter_ctx.tflite's: all K head steps in one call (export/graphs.py); see draft_k_windows
HYBRID_NGRAMS = (1, 2, 3)  # settings.hybrid_min_ngram: the shortest lookup match hybrid copies (at most 3 tokens)
HYBRID_MIN_NGRAM = 1  # where the bundle holds no measured choice


def _tflite_signatures(buf, where):
    from ai_edge_litert import schema_py_generated as S

    if len(buf) < 8 or bytes(buf[4:8]) != b"TFL3":
        raise UserError(f"{where}: not a TFLite flatbuffer (missing TFL3 identifier); re-export it")
    try:
        m = S.Model.GetRootAsModel(buf, 0)
        # a flipped length field would make the loops below run for billions of steps: cap them first
        if m.SubgraphsLength() > 64 or m.SignatureDefsLength() > 256 or m.BuffersLength() > 1 << 20:
            raise UserError(f"{where}: corrupt TFLite file (implausible table sizes); re-export it")
        for si in range(m.SubgraphsLength()):
            if m.Subgraphs(si).TensorsLength() > 1 << 20:
                raise UserError(f"{where}: corrupt TFLite file (implausible tensor count); re-export it")
        sigs = {}
        for i in range(m.SignatureDefsLength()):
            sd = m.SignatureDefs(i)
            sub = m.Subgraphs(sd.SubgraphIndex())

            def io(n, get):
                out = {}
                for j in range(n):
                    t = get(j)
                    ten = sub.Tensors(t.TensorIndex())
                    if ten.ShapeLength() > 8:
                        raise UserError(f"{where}: corrupt TFLite file (tensor rank {ten.ShapeLength()})")
                    shape = [int(x) for x in ten.ShapeAsNumpy()] if ten.ShapeLength() else []
                    out[t.Name().decode()] = {"shape": shape, "dtype": DTYPES.get(ten.Type(), f"type{ten.Type()}")}
                return out

            if sd.InputsLength() > 4096 or sd.OutputsLength() > 4096:
                raise UserError(f"{where}: corrupt TFLite file (implausible signature size); re-export it")
            sigs[sd.SignatureKey().decode()] = {"inputs": io(sd.InputsLength(), sd.Inputs),
                                                "outputs": io(sd.OutputsLength(), sd.Outputs)}
        weights = weight_bytes(m)
    except UserError:
        raise
    except Exception as e:  # a corrupt flatbuffer can fail anywhere inside the generated accessors
        raise UserError(f"{where}: corrupt TFLite file ({type(e).__name__}); re-export it") from None
    return sigs, weights


def weight_bytes(m):
    """Bytes of constant tensors by dtype: how we tell a really quantized graph from a float one."""
    out = {}
    for s in range(m.SubgraphsLength()):
        sub = m.Subgraphs(s)
        for t in range(sub.TensorsLength()):
            ten = sub.Tensors(t)
            b = m.Buffers(ten.Buffer())
            n = b.DataLength() or int(b.Size())
            if n > 0:
                k = DTYPES.get(ten.Type(), str(ten.Type()))
                out[k] = out.get(k, 0) + n
    return out


def read_tflite(path):
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: missing; re-run `mtplite export`")
    with open(path, "rb") as f:
        if path.stat().st_size < 16:
            raise UserError(f"{path}: truncated ({path.stat().st_size} bytes); re-export it")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return _tflite_signatures(mm, path)


def litertlm_sections(path):
    """Section list of a .litertlm: [(model_type or data type, begin, end)], validated against the file size."""
    from litert_lm_builder import litertlm_header_schema_py_generated as H

    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: missing; re-run `mtplite export`")
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(32)
        if len(head) < 32 or head[:8] != b"LITERTLM":
            raise UserError(f"{path}: not a .litertlm file (bad magic); re-export it")
        hdr_end = struct.unpack("<Q", head[24:32])[0]
        if not 32 <= hdr_end <= min(size, 1 << 26):
            raise UserError(f"{path}: corrupt header (end offset {hdr_end}, file {size} bytes); re-export it")
        f.seek(32)
        hdr = f.read(hdr_end - 32)
    try:
        from litert_lm_builder.litertlm_peek import get_model_type

        root = H.LiteRTLMMetaData.GetRootAs(hdr, 0)
        objs = root.SectionMetadata()
        if objs.ObjectsLength() > 1024:
            raise UserError(f"{path}: corrupt section table (implausible section count); re-export it")
        names = {v: k for k, v in vars(H.AnySectionDataType).items() if not k.startswith("_")}
        out = []
        for i in range(objs.ObjectsLength()):
            o = objs.Objects(i)
            out.append({"data_type": names.get(o.DataType(), str(o.DataType())), "model_type": get_model_type(o),
                        "begin": o.BeginOffset(), "end": o.EndOffset()})
    except Exception as e:
        raise UserError(f"{path}: corrupt section table ({type(e).__name__}); re-export it") from None
    for s in out:
        if not (hdr_end <= s["begin"] <= s["end"] <= size):
            raise UserError(f"{path}: section {s['model_type'] or s['data_type']} runs past the end of the file "
                            f"({s['end']} > {size} bytes): the file is truncated; re-export it")
    return out


def check(manifest_path):
    """Validate OUT/android/manifest.json and the graphs it names. Returns (manifest, {graph: signatures})."""
    mpath = Path(manifest_path)
    if not mpath.is_file():
        raise UserError(f"{mpath}: missing; run `mtplite export` to create the bundle")
    try:
        man = json.loads(mpath.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{mpath}: not valid JSON ({e}); re-run `mtplite export`") from None
    m = _manifest_fields(man, mpath)
    sigs = {}
    for g in ("backbone", "embedder", "drafter"):
        sigs[g], _ = read_tflite(mpath.parent / m["files"][g])
    check_contract(sigs, m, mpath)
    if m.get("context_drafter") is not None:
        sigs["drafter_ctx"], _ = read_tflite(mpath.parent / m["context_drafter"]["file"])
        check_context(sigs["drafter_ctx"], sigs["backbone"]["decode"]["inputs"], m, mpath)
    return man, sigs


def draft_k_windows(C):
    """drafter_ctx also holds mtp_draft_k_<W> for these W: the same graph over the cache's first W slots only. A draft
    at pos reads slots < pos, so up to pos = W it is the same computation, without attending over the C - W slots
    that hold no token yet."""
    return [C // 8, C // 4, C // 2] if C >= 128 else []


def draft_k_windows_in(names):
    """The W of the mtp_draft_k_<W> signatures among `names` (drafter_ctx's), sorted: read once at load."""
    return sorted(int(n[len(DRAFT_K) + 1:]) for n in names
                  if n.startswith(DRAFT_K + "_") and n[len(DRAFT_K) + 1:].isdigit())


def draft_k_signature(windows, pos):
    """The mtp_draft_k signature to run for a draft at `pos` (windows: draft_k_windows_in's): the narrowest window
    that holds every slot the draft reads, else the full graph."""
    return next((f"{DRAFT_K}_{w}" for w in windows if pos <= w), DRAFT_K)


def check_context(sig, kv_ref, m, where):
    """drafter_ctx.tflite (the context draft space, our runtime only) against the manifest and the backbone's KV."""
    cd = m["context_drafter"]
    d = sig.get(DRAFT_K)
    if d is None:
        raise UserError(f"{where}: {cd['file']} lacks signature '{DRAFT_K}' (has {sorted(sig)}); re-export")
    M, H, K = cd["max_ids"], m["hidden_size"], m["K"]
    check_drafter_io(d, kv_ref, {("inputs", "activations"): [1, 1, 2 * H], ("inputs", "context_emb"): [1, M, H],
                                 ("inputs", "context_mask"): [1, 1, M], ("inputs", "context_ids"): [1, M],
                                 ("outputs", "draft_ids"): [1, K], ("outputs", "draft_probs"): [1, K],
                                 ("outputs", "projected_activations"): [1, 1, H]}, where, cd["file"])
    if d["outputs"]["draft_ids"]["dtype"] != "int32" or d["inputs"]["context_ids"]["dtype"] != "int32":
        raise UserError(f"{where}: {cd['file']}: draft_ids and context_ids must be int32; re-export")
    for name in sig:  # the windowed variants bind the very same buffers
        if name.startswith(DRAFT_K + "_") and sig[name] != d:
            raise UserError(f"{where}: {cd['file']}: signature '{name}' has other inputs or outputs than '{DRAFT_K}'; "
                            "re-export")


def check_drafter_io(d, kv_ref, expect, where, label="drafter"):
    """A drafter signature reads the backbone's own KV buffers (same names, shapes, dtypes) and has `expect`'s
    {(io, name): shape}."""
    kv_in = [n for n in d["inputs"] if n.startswith("kv")]
    if not kv_in:
        raise UserError(f"{where}: {label} reads no kv_cache_* tensor")
    for name in kv_in:
        t, ref = d["inputs"][name], kv_ref.get(name)
        if ref is None:
            raise UserError(f"{where}: {label} input {name} {t['shape']} has no backbone tensor of that name")
        if t["shape"] != ref["shape"] or t["dtype"] != ref["dtype"]:
            raise UserError(f"{where}: {label} {name} is {t['dtype']}{t['shape']} but backbone {name} is "
                            f"{ref['dtype']}{ref['shape']}: the KV buffers cannot be shared")
    for (io, name), shape in expect.items():
        t = d[io].get(name)
        if t is None or t["shape"] != shape:
            raise UserError(f"{where}: {label} {io[:-1]} {name} is {t and t['shape']}, expected {shape}")


def _need(man, key, typ, where):
    v = man.get(key) if isinstance(man, dict) else None
    if not isinstance(v, typ) or isinstance(v, bool) and typ is not bool:
        raise UserError(f"{where}: field '{key}' must be {typ.__name__ if not isinstance(typ, tuple) else typ[0].__name__}"
                        f", got {type(v).__name__}; re-run `mtplite export`")
    return v


def _manifest_fields(man, where):
    if not isinstance(man, dict) or man.get("format") != "mtplite-bundle":
        raise UserError(f"{where}: not an mtplite manifest (format != 'mtplite-bundle')")
    if man.get("format_version") != FORMAT_VERSION:
        raise UserError(f"{where}: format_version {man.get('format_version')!r} is not supported "
                        f"(this mtplite reads {FORMAT_VERSION}); re-export with this version")
    for key in ("K", "cache_length", "vocab_size", "hidden_size", "num_layers", "draft_vocab_size"):
        v = _need(man, key, int, where)
        if not 0 < v < (1 << 24):
            raise UserError(f"{where}: field '{key}' = {v} is out of range")
    pl = _need(man, "prefill_lengths", list, where)
    if not pl or not all(isinstance(x, int) and not isinstance(x, bool) and 0 < x <= man["cache_length"] for x in pl):
        raise UserError(f"{where}: 'prefill_lengths' must be positive ints <= cache_length")
    files = _need(man, "files", dict, where)
    for g in ("backbone", "embedder", "drafter", "tokenizer"):
        f = files.get(g)
        if not isinstance(f, str) or "/" in f or "\\" in f or f.startswith("."):
            raise UserError(f"{where}: files.{g} must be a plain file name next to the manifest")
    rl = _need(man, "read_layers", list, where)
    if not rl or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < man["num_layers"] for x in rl):
        raise UserError(f"{where}: 'read_layers' must be layer indices < num_layers")
    eos = _need(man, "eos_ids", list, where)
    if not all(isinstance(x, int) and 0 <= x < man["vocab_size"] for x in eos):
        raise UserError(f"{where}: 'eos_ids' must be token ids < vocab_size")
    cd = man.get("context_drafter")
    if cd is not None:
        if not isinstance(cd, dict):
            raise UserError(f"{where}: field 'context_drafter' must be an object; re-run `mtplite export`")
        f, M, ids = cd.get("file"), cd.get("max_ids"), cd.get("space_ids")
        if not isinstance(f, str) or "/" in f or "\\" in f or f.startswith("."):
            raise UserError(f"{where}: context_drafter.file must be a plain file name next to the manifest")
        if isinstance(M, bool) or not isinstance(M, int) or not 0 < M < (1 << 16):
            raise UserError(f"{where}: context_drafter.max_ids = {M!r} must be a positive int")
        if not isinstance(ids, list) or not ids or not all(isinstance(x, int) and 0 <= x < man["vocab_size"] for x in ids):
            raise UserError(f"{where}: context_drafter.space_ids must be token ids < vocab_size")
        e = cd.get("embed_scale")
        if isinstance(e, bool) or not isinstance(e, (int, float)) or not e > 0:
            raise UserError(f"{where}: context_drafter.embed_scale = {e!r} must be a positive number")
    settings = man.get("settings")
    if settings is not None and not isinstance(settings, dict):
        raise UserError(f"{where}: field 'settings' must be an object; re-run `mtplite calibrate`")
    g = (settings or {}).get("min_prob", 0.0)
    if isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 <= g <= 1:
        raise UserError(f"{where}: settings.min_prob = {g!r} must be a number in [0, 1]; re-run `mtplite calibrate`")
    if (settings or {}).get("K") == "off":  # calibrations before settings.draft could say "off"
        settings.update(K=man["K"], draft="off")
    d = (settings or {}).get("draft", "mtp")
    if d not in DRAFTS + ("off",):
        raise UserError(f"{where}: settings.draft = {d!r} must be mtp, hybrid, lookup or off; re-run `mtplite calibrate`")
    hm = (settings or {}).get("hybrid_min_ngram", {})
    if not isinstance(hm, dict) or any(k not in ("drafter", "drafter_ctx") or isinstance(v, bool) or v not in HYBRID_NGRAMS
                                       for k, v in hm.items()):
        raise UserError(f"{where}: settings.hybrid_min_ngram = {hm!r} must map drafter / drafter_ctx to 1, 2 or 3; "
                        f"re-run `mtplite calibrate`")
    dr = (settings or {}).get("drafter", "drafter")
    if dr not in ("drafter", "drafter_ctx"):
        raise UserError(f"{where}: settings.drafter = {dr!r} must be drafter or drafter_ctx; re-run `mtplite calibrate`")
    return man


def _shape(sig, io, name):
    return sig[io].get(name)


def check_contract(sigs, m, where="bundle"):
    """The LiteRT-LM MTP contract. Every mismatch names the tensor and both shapes."""
    bb, emb, dr = sigs["backbone"], sigs["embedder"], sigs["drafter"]
    K, C, H, V = m["K"], m["cache_length"], m["hidden_size"], m["vocab_size"]
    for s in ["decode", "verify"] + [f"prefill_{n}" for n in m["prefill_lengths"]]:
        if s not in bb:
            raise UserError(f"{where}: backbone lacks signature '{s}' (has {sorted(bb)})")
    if "decode_embedder" not in emb:
        raise UserError(f"{where}: embedder lacks signature 'decode_embedder' (has {sorted(emb)})")
    if list(dr) != ["mtp_drafter"]:
        raise UserError(f"{where}: drafter must have exactly one signature 'mtp_drafter' (has {sorted(dr)})")
    d = dr["mtp_drafter"]
    vt = bb["verify"]["inputs"].get("input_pos")
    if vt is None or vt["shape"] != [K + 1]:
        raise UserError(f"{where}: verify input_pos is {vt and vt['shape']} but K={K} needs [{K + 1}] (T = K+1)")
    kv_ref = bb["decode"]["inputs"]
    for sname, sig in bb.items():
        for io in ("inputs", "outputs"):
            for name, t in sig[io].items():
                if name.startswith("kv_cache_") and (t["shape"] != kv_ref.get(name, {}).get("shape")
                                                     or t["dtype"] != kv_ref[name]["dtype"]):
                    raise UserError(f"{where}: backbone {sname} {io[:-1]} {name} is {t['dtype']}{t['shape']} but "
                                    f"decode has {kv_ref.get(name, {}).get('dtype')}{kv_ref.get(name, {}).get('shape')}")
            if "mask" in sig["inputs"] and sig["inputs"]["mask"]["dtype"] != "float32":
                raise UserError(f"{where}: backbone {sname} mask is {sig['inputs']['mask']['dtype']}; LiteRT-LM "
                                "needs a float additive mask (a bool mask masks nothing)")
    check_drafter_io(d, kv_ref, {("inputs", "activations"): [1, 1, 2 * H], ("inputs", "input_pos"): [1],
                                 ("inputs", "mask"): [1, 1, 1, C], ("outputs", "logits"): [1, 1, V],
                                 ("outputs", "projected_activations"): [1, 1, H]}, where)
    if d["inputs"]["mask"]["dtype"] != "float32" or d["inputs"]["activations"]["dtype"] != "float32":
        raise UserError(f"{where}: drafter mask and activations must be float32")
    for s in ("decode", "verify"):
        a = bb[s]["outputs"].get("activations")
        T = 1 if s == "decode" else K + 1
        if a is None or a["shape"] != [1, T, H] or a["dtype"] != "float32":
            raise UserError(f"{where}: backbone {s} activations is {a and (a['dtype'], a['shape'])}, expected "
                            f"float32[1, {T}, {H}]")
    mk = bb["decode"]["inputs"].get("mask")
    if mk is None or mk["shape"] != [1, 1, 1, C]:
        raise UserError(f"{where}: decode mask is {mk and mk['shape']}, expected [1, 1, 1, {C}] (cache_length)")
    return True


def check_manifest_dict(man, where="manifest.json"):
    """The checks the Kotlin core can also run: manifest fields + the contract on the recorded signatures."""
    m = _manifest_fields(man, where)
    if m.get("chat_template") is not None and not isinstance(m["chat_template"], str):
        raise UserError(f"{where}: field 'chat_template' must be a string or null; re-run `mtplite export`")
    turn = m.get("chat_turn")
    if turn is not None:
        ids_ok = lambda v: isinstance(v, list) and all(type(t) is int and 0 <= t < m["vocab_size"] for t in v)  # noqa: E731
        if not isinstance(turn, dict) or not all(ids_ok(turn.get(k)) for k in ("before_ids", "after_ids")):
            raise UserError(f"{where}: chat_turn.before_ids / after_ids must be lists of token ids < vocab_size; "
                            "re-run `mtplite export`")
    sigs = m.get("signatures")
    if not isinstance(sigs, dict) or not all(isinstance(sigs.get(g), dict) for g in ("backbone", "embedder", "drafter")):
        raise UserError(f"{where}: field 'signatures' missing; re-run `mtplite export`")
    try:
        check_contract(sigs, m, where)
        if m.get("context_drafter") is not None:  # the manifest records drafter_ctx's signatures too
            cs = m["context_drafter"].get("signatures")
            if not isinstance(cs, dict):
                raise UserError(f"{where}: context_drafter.signatures lacks '{DRAFT_K}'; re-run `mtplite export`")
            check_context(cs, sigs["backbone"]["decode"]["inputs"], m, where)
    except (KeyError, TypeError, AttributeError) as e:
        raise UserError(f"{where}: malformed signatures ({type(e).__name__}: {e})") from None
    return m
