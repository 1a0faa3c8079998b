"""Distil a corpus on a machine that has the GGUF file and torch but not this repo's tokenizer stack (a rented GPU).

  prepare: here, tokenize the training prompts with the local backbone and write a job (ids, eos, fingerprint)
  run:     there, load only the model from the GGUF, check its fingerprint against the job's, and add shards to the
           corpus folder (resumable: prompts already in it are skipped)

Tokenizing here keeps the prompts' ids those of the tokenizer training and the runtime use; the GPU never needs
tokenizer files (Gemma's is 33 MB) or the same transformers version's GGUF tokenizer conversion.

  python scripts/distill_device.py prepare --backbone gemma3-270m --out job.json.gz
  python scripts/distill_device.py run --job job.json.gz --gguf model.gguf --corpus corpora/gemma3-270m
"""
import argparse
import gzip
import json
import sys
import time


def prepare(a):
    from mtplite.model.load import load_backbone
    from mtplite.train.distill import corpus_items

    bb = load_backbone(a.backbone)
    items = corpus_items(bb)  # already in the order distill runs them
    job = {"backbone": a.backbone, "backbone_fingerprint": bb.fingerprint, "eos_ids": bb.eos_ids,
           "prompt_format": "chat" if bb.chat else "plain", "items": items}
    with gzip.open(a.out, "wt") as f:
        json.dump(job, f)
    print(f"{a.out}: {len(items)} prompts, fingerprint {bb.fingerprint}")


def run(a):
    from pathlib import Path

    import torch
    from transformers import AutoModelForCausalLM

    from mtplite.model.load import decoder_of, fingerprint
    from mtplite.train.distill import distill_corpus

    with gzip.open(a.job, "rt") as f:
        job = json.load(f)
    if a.threads:
        torch.set_num_threads(a.threads)
    t0 = time.time()
    g = Path(a.gguf)
    dec = decoder_of(AutoModelForCausalLM.from_pretrained(g.parent, gguf_file=g.name, dtype=torch.float32)).eval()
    fp = fingerprint(dec)
    print(f"{job['backbone']}: loaded in {time.time() - t0:.0f} s, fingerprint {fp} (job: {job['backbone_fingerprint']})",
          flush=True)
    if fp != job["backbone_fingerprint"]:
        sys.exit(f"{a.gguf}: fingerprint {fp} is not the job's {job['backbone_fingerprint']}: not the same weights")
    dev = torch.device(a.device if a.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.backends.cuda.matmul.allow_tf32 = False  # plain float32 products, as on the CPU the corpus is checked on
    torch.backends.cudnn.allow_tf32 = False
    dec.to(dev)
    numerics = f"float32 {dev.type}" + (f" ({torch.cuda.get_device_name()}, no TF32)" if dev.type == "cuda" else "")
    meta = {"backbone": job["backbone"], "backbone_fingerprint": fp, "numerics": numerics,
            "settings": {"prompt_format": job["prompt_format"], "torch": torch.__version__}}
    items = job["items"][: a.limit] if a.limit else job["items"]
    t1 = time.time()
    with dev:
        n = distill_corpus(dec, items, a.corpus, meta, a.max_new, job["eos_ids"], batch=a.batch,
                           budget_s=a.budget_minutes * 60 if a.budget_minutes else None, shard_rows=a.shard_rows, progress=True)
    print(json.dumps({"backbone": job["backbone"], "rows_added": n, "seconds": round(time.time() - t1, 1)}), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("prepare")
    s.add_argument("--backbone", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(fn=prepare)
    s = sub.add_parser("run")
    s.add_argument("--job", required=True)
    s.add_argument("--gguf", required=True)
    s.add_argument("--corpus", required=True)
    s.add_argument("--max-new", type=int, default=128)
    s.add_argument("--batch", type=int, default=256)
    s.add_argument("--limit", type=int, default=0)
    s.add_argument("--device", default="auto")
    s.add_argument("--threads", type=int, default=0)
    s.add_argument("--shard-rows", type=int, default=2048)
    s.add_argument("--budget-minutes", type=float, default=None)
    s.set_defaults(fn=run)
    a = p.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
