"""Run the reliability tests (fuzzing, kill -9 during train/export/quantize, soak, determinism) and record what
ran and how it ended as JSON for the results page.

  python lab/scripts/reliability_report.py --json reliability.json [--fuzz-examples 220]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from mtplite.paths import write_text_atomic


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--fuzz-examples", type=int, default=220)
    a = ap.parse_args()
    root = Path(__file__).resolve().parents[2]  # the repository (this file is lab/scripts/)
    with tempfile.TemporaryDirectory() as d:
        xml = Path(d) / "junit.xml"
        t0 = time.time()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:warnings", "tests/test_reliability.py",
                            f"--junitxml={xml}"], cwd=root, env={**os.environ, "MTPLITE_FUZZ_EXAMPLES": str(a.fuzz_examples)},
                           capture_output=True, text=True)
        tests = []
        for case in ET.parse(xml).getroot().iter("testcase"):
            failed = case.find("failure") is not None or case.find("error") is not None
            tests.append({"name": case.get("name"), "seconds": float(case.get("time", 0)),
                          "outcome": "failed" if failed else ("skipped" if case.find("skipped") is not None else "passed")})
    fuzz = [t for t in tests if t["name"].startswith("test_fuzz")]
    res = {"exit_code": r.returncode, "seconds": round(time.time() - t0, 1), "fuzz_examples_per_reader": a.fuzz_examples,
           "fuzz_readers": len(fuzz), "fuzz_cases": a.fuzz_examples * len(fuzz), "tests": tests}
    write_text_atomic(a.json, json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
