"""Do the exported `decode` and row 0 of `verify` compute the same bits? The probe export and the runtime both run.

Speculative output equals plain output only if the 1-row and the K+1-row graphs round alike: row 0 of verify must
be decode, bit for bit, or an accepted block can differ from what plain decoding would have emitted. Our graphs are
written so that they do (model/decoder.py RMSNorm); this probe checks it on the kernels at hand, since a quantizer
recipe or a CPU's kernels can break it. It runs both signatures on the same cache contents and the same row-0
embedding (random, fixed seed) at a few positions and compares logits and activations bitwise.
"""
import numpy as np

BIT_IDENTICAL, EXACT_PATH_NEEDED = "bit_identical", "exact_path_needed"


def _buffers(model, sig, sigs):
    io = sigs[sig]
    return ({n: model.create_input_buffer_by_name(sig, n) for n in io["inputs"]},
            {n: model.create_output_buffer_by_name(sig, n) for n in io["outputs"]})


def _run(model, sig, sigs, bufs, kv, emb, pos, C):
    from mtplite.model.decoder import NEG_INF

    io, (ins, outs) = sigs[sig], bufs
    T = int(io["inputs"]["input_pos"]["shape"][0])
    H = int(io["outputs"]["activations"]["shape"][-1])
    V = int(io["outputs"]["logits"]["shape"][-1])
    for n, a in kv.items():
        ins[n].write(a)
    ins["embeddings"].write(emb[:T].reshape(-1))
    ins["input_pos"].write(np.arange(pos, pos + T, dtype=np.int32))
    mask = np.full((T, C), NEG_INF, np.float32)
    for t in range(T):
        mask[t, : pos + t + 1] = 0.0
    ins["mask"].write(mask.reshape(-1))
    # NaN in the outputs first: a run that leaves an output unwritten must not pass for one that wrote it
    outs["logits"].write(np.full(T * V, np.nan, np.float32))
    outs["activations"].write(np.full(T * H, np.nan, np.float32))
    model.run_by_name(sig, ins, outs)
    lg, act = outs["logits"].read(T * V, np.float32)[:V], outs["activations"].read(T * H, np.float32)[:H]
    for name, a in (("logits", lg), ("activations", act)):
        if np.isnan(a).all():
            raise OutputNotWritten(f"the {sig} signature left its {name} output unwritten")
    return lg, act


class OutputNotWritten(RuntimeError):
    """A signature's run did not write an output buffer (measured in ai-edge-litert 2.3: lab/notes/PERF.md)."""


def probe(model, sigs, io=None, draws=4, seed=0):
    """model: a CompiledModel of backbone.tflite; sigs: its signatures (export.contract.read_tflite); io: the
    (inputs, outputs) buffers to run each signature with, KV included. A live model must be probed with the buffers
    it keeps: freeing buffers a model has run with breaks that model's later runs (1 load in ~40 then never wrote
    verify's logits again). Without io the probe makes its own, for a model that dies with them. Returns
    (verdict, detail): BIT_IDENTICAL when decode and verify row 0 agree in every logit and activation bit at each of
    `draws` random cache states and positions, else EXACT_PATH_NEEDED with where they first differed."""
    dec = sigs["decode"]
    C = int(dec["inputs"]["mask"]["shape"][-1])
    H = int(dec["inputs"]["embeddings"]["shape"][-1])
    T = int(sigs["verify"]["inputs"]["input_pos"]["shape"][0])
    rng = np.random.default_rng(seed)
    io = io or {s: _buffers(model, s, sigs) for s in ("decode", "verify")}
    for d in range(draws):
        kv = {n: rng.standard_normal(int(np.prod(s["shape"]))).astype(np.float32)
              for n, s in dec["inputs"].items() if n.startswith("kv_cache_")}
        emb = rng.standard_normal((T, H)).astype(np.float32)
        pos = int(rng.integers(0, C - T))
        l1, a1 = _run(model, "decode", sigs, io["decode"], kv, emb, pos, C)
        lT, aT = _run(model, "verify", sigs, io["verify"], kv, emb, pos, C)
        bad = int((l1.view(np.int32) != lT.view(np.int32)).sum()) + int((a1.view(np.int32) != aT.view(np.int32)).sum())
        if bad:
            return EXACT_PATH_NEEDED, f"draw {d} (position {pos}): {bad} of {l1.size + a1.size} logit/activation values differ"
    return BIT_IDENTICAL, f"{draws} draws, every logit and activation bit equal"


def probe_file(path, sigs):
    """probe() on a backbone .tflite file (export and quantize call this on what they wrote)."""
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.cpu_options import CpuOptions
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.options import Options

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as t:  # a weight-cache file keeps multi-signature graphs to one weight copy
        opts = Options(HardwareAccelerator.CPU, cpu_options=CpuOptions(num_threads=2, xnnpack_weight_cache_path=str(Path(t) / "w.xnn")))
        model = CompiledModel.from_file(str(path), options=opts)
        return probe(model, sigs)
