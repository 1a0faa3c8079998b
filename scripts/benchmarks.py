"""Render BENCHMARKS.md: the current run of each backbone, every number from that run's `mtplite bench` JSON.

  python scripts/benchmarks.py [--results results] [--out BENCHMARKS.md]

results/<backbone>.json is one `mtplite bench --json` output plus a "run" entry saying how it was made (the command,
the date, the machine). Earlier runs, ablations and probes live in lab/ (lab/EXPERIMENTS.md).
"""
import argparse
import json
import sys
from pathlib import Path

from mtplite.paths import write_text_atomic
from mtplite.runtime.bench import markdown
from mtplite.runtime.summary import verdict

HEAD = ("# Benchmarks\n\nOne `mtplite bench` run per backbone, each section from that run's JSON in `results/` "
        "(rendered by `python scripts/benchmarks.py`; do not edit by hand). Speed-ups are measured side by side in "
        "one process on the machine named; earlier runs and experiments are in [lab/EXPERIMENTS.md]"
        "(lab/EXPERIMENTS.md).\n")


def samples(res, per_task=1, chars=240):
    out = []
    for task, rows in (res.get("samples") or {}).items():
        for r in rows[:per_task]:
            text = " ".join(r["text"].split())
            text = text if len(text) <= chars else text[:chars] + " …"
            out.append(f"- {task} (`{r['id']}`, {'ended by itself' if r.get('ended') else 'cut at the budget'}): {text}")
    return out


def section(name, res):
    run = res.get("run") or {}
    lines = [f"## {name}", "",
             f"- run: `{run.get('command', 'mtplite bench')}` on {run.get('date', '?')}, "
             f"{run.get('machine') or res.get('machine') or 'machine not recorded'}",
             "- versions: " + ", ".join(f"{k} {v}" for k, v in sorted((res.get("versions") or {}).items())),
             f"- outputs equal to plain decoding: {res['spec_vs_plain_mismatches'] == 0} "
             f"({res['spec_vs_plain_mismatches']} of {sum(t['all']['prompts'] for m, t in res['table'].items() if m != 'plain')} "
             "outputs differ)",
             "", f"**{verdict(res, where=run.get('machine') or res.get('machine'))}**", "", markdown(res)]
    if res.get("samples"):
        lines += ["", "Sample outputs (plain decoding; every mode's are the same):", "", *samples(res)]
    return "\n".join(lines) + "\n"


def render(results_dir):
    files = sorted(Path(results_dir).glob("*.json"))
    if not files:
        raise SystemExit(f"{results_dir}: no <backbone>.json results to render")
    return HEAD + "".join("\n" + section(f.stem, json.loads(f.read_text())) for f in files)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results", help="dir of <backbone>.json bench results (default: results)")
    ap.add_argument("--out", default="BENCHMARKS.md", help="the page to write (default: BENCHMARKS.md)")
    a = ap.parse_args(argv)
    write_text_atomic(a.out, render(a.results))
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
