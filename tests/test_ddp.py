"""`torchrun --nproc_per_node 2` (gloo, CPU) trains the same head as one process, within tolerance."""
import os
import subprocess
import sys

import torch

SCRIPT = r"""
import os, sys, torch
from mtplite.model.load import load_backbone
from mtplite.data import training_prompts
from mtplite.train.distill import distill
from mtplite.train.train import train_head
bb = load_backbone("tiny:llama")
rows = distill(bb, training_prompts(limit=48), os.path.join(sys.argv[2], "ddp.jsonl"), max_new=16, batch=16,
               progress=False)
head, _ = train_head(bb, rows, K=2, draft_vocab_size=96, epochs=2, batch=6, lr=1e-3, progress=False, seed=0)
if int(os.environ.get("RANK", "0")) == 0:
    torch.save(head.state_dict(), sys.argv[1])
"""


def test_two_process_gloo_matches_one(tmp_path):
    script = tmp_path / "ddp_train.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MTPLITE_CACHE": str(tmp_path)}
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    r = subprocess.run([sys.executable, str(script), str(one), str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                        "29533", str(script), str(two), str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    a, b = torch.load(one), torch.load(two)
    worst = max(float((a[k] - b[k]).abs().max()) for k in a)
    moved = max(float(a[k].abs().max()) for k in a)
    print(f"max |param diff| 1 process vs 2 gloo processes: {worst:.2e}")
    assert worst < 1e-3 and moved > 0
