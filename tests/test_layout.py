"""The code reads as load -> train -> export -> quantize -> run: each stage imports only earlier ones, never the
top-level commands, and no module imports itself back through others."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# package -> folder, in data-flow order (mtplite.errors and mtplite.paths are shared helpers, below every stage)
STAGES = [("mtplite.data", "mtplite/data"), ("mtplite.model", "model"), ("mtplite.train", "train"),
          ("mtplite.export", "export"), ("mtplite.quantize", "quantize"), ("mtplite.runtime", "runtime")]
BASE = {"mtplite", "mtplite.errors", "mtplite.paths"}


def modules():
    out = {}
    for pkg, folder in STAGES:
        for f in sorted((ROOT / folder).glob("*.py")):
            out[pkg if f.stem == "__init__" else f"{pkg}.{f.stem}"] = f
    for f in sorted((ROOT / "mtplite").glob("*.py")):
        out["mtplite" if f.stem == "__init__" else f"mtplite.{f.stem}"] = f
    return out


def imports(path, known):
    """Every mtplite module a file imports, at the top or inside a function."""
    found = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("mtplite"):
            found.add(n.module)
            found |= {f"{n.module}.{a.name}" for a in n.names if f"{n.module}.{a.name}" in known}
        elif isinstance(n, ast.Import):
            found |= {a.name for a in n.names if a.name.startswith("mtplite")}
    return {m for m in found if m in known}


def stage(mod):
    return next((i for i, (pkg, _) in enumerate(STAGES) if mod == pkg or mod.startswith(pkg + ".")), None)


def violations(graph):
    bad = []
    for mod, deps in graph.items():
        s = stage(mod)
        if s is None:
            continue
        for d in deps:
            t = stage(d)
            if t is None and d not in BASE:
                bad.append(f"{mod} imports the top-level {d}")
            elif t is not None and t > s:
                bad.append(f"{mod} imports the later stage {d}")
    return bad


def cycles(graph):
    """Import cycles among modules (a package's __init__ importing nothing counts as no edge)."""
    found, state = [], {}

    def visit(m, path):
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                found.append(" -> ".join(path[path.index(d):] + [d]))
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return found


def test_stages_import_only_earlier_stages_and_no_cycles():
    known = modules()
    graph = {m: imports(f, known) - {m} for m, f in known.items()}
    assert not violations(graph), "\n".join(violations(graph))
    assert not cycles(graph), "\n".join(cycles(graph))


def test_the_checks_catch_what_they_look_for():
    graph = {"mtplite.model.head": {"mtplite.runtime.litert"}, "mtplite.runtime.litert": {"mtplite.cli"},
             "mtplite.train.a": {"mtplite.train.b"}, "mtplite.train.b": {"mtplite.train.a", "mtplite.errors"}}
    assert violations(graph) == ["mtplite.model.head imports the later stage mtplite.runtime.litert",
                                 "mtplite.runtime.litert imports the top-level mtplite.cli"]
    assert cycles(graph) == ["mtplite.train.a -> mtplite.train.b -> mtplite.train.a"]


def test_head_config_and_train_options_stay_small():
    import dataclasses

    from mtplite.model.head import HeadConfig

    assert len(dataclasses.fields(HeadConfig)) <= 16, [f.name for f in dataclasses.fields(HeadConfig)]
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "mtplite.cli", "train", "--help"], capture_output=True, text=True,
                       timeout=120)
    opts = re.findall(r"^\s{2}(-{1,2}[\w-]+)", r.stdout, re.M)
    assert r.returncode == 0 and "--data" in opts and len(opts) <= 26, opts  # 25 options and -h


def test_product_code_cites_no_work_log_entries():
    """The story lives in lab/notes/PERF.md; code (Python and Kotlin) says why in a sentence, not which session
    measured it."""
    hits = []
    kotlin = [f for f in (ROOT / "android_demo").rglob("*.kt") if "stubs" not in f.parts]
    for f in [*modules().values(), *kotlin]:
        for i, line in enumerate(f.read_text().splitlines(), 1):
            if re.search(r"\bsessions? \d+|issue #\d+|#\d+'s\b", line, re.I):
                hits.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not hits, "\n".join(hits)


def lab_uses(path):
    """Where a Python file reaches into lab/: an import of it, or a string that starts a path there."""
    import io
    import tokenize

    hits = []
    for n in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""] if isinstance(n, ast.ImportFrom) else []
        hits += [f"{path.name}:{n.lineno}: import {m}" for m in names if m == "lab" or m.startswith("lab.")]
    for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if t.type == tokenize.STRING and re.match(r"""^[rbuf]*['"]+lab(/|['"])""", t.string, re.I):
            hits.append(f"{path.name}:{t.start[0]}: {t.string}")
    return hits


def test_product_code_never_reaches_into_the_lab(tmp_path):
    """lab/ (notes, experiment results, probes, the experiments page) is for the people who measure; the package and
    the product scripts work without it."""
    files = [*modules().values(), *(ROOT / "scripts").glob("*.py")]
    assert len(files) > 40 and not [h for f in files for h in lab_uses(f)]
    assert not (ROOT / "mtplite" / "lab").exists() and "lab" not in (ROOT / "pyproject.toml").read_text().split("packages")[1].split("]")[0]
    bad = tmp_path / "bad.py"  # the check finds both ways in
    bad.write_text("from lab.results_page import render\nPAGE = 'lab/EXPERIMENTS.md'\n")
    assert len(lab_uses(bad)) == 2


def test_nothing_reads_files_beside_the_repository():
    """A plain clone has nothing beside it: no product code, test, script, Kotlin source, CI step or README command
    may name the parent's shared folder."""
    parent = ".." + "/" + "shared"
    hits = []
    for f in sorted(ROOT.rglob("*")):
        if f.suffix in (".py", ".sh", ".kt", ".kts", ".gradle", ".toml") or f.name in ("run", "README.md"):
            if ".git" in f.parts or "build" in f.parts:
                continue
            for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                if parent in line:
                    hits.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not hits, "\n".join(hits)
    from mtplite.data.benchmark import default_prompts, load_prompts

    assert default_prompts().is_relative_to(ROOT / "mtplite") and len(load_prompts(default_prompts())) >= 32


def test_every_option_has_help_and_the_cli_a_version():
    """`mtplite SUB --help` answers: every option and argument of every subcommand says what it is (its default is
    appended where the text does not give it); `mtplite --version` prints the installed version."""
    import argparse
    import subprocess
    import sys

    from mtplite import __version__
    from mtplite.cli import build_parser

    missing = []

    def walk(name, parser):
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for n, sp in a.choices.items():
                    walk(f"{name} {n}".strip(), sp)
            elif not a.help and not isinstance(a, argparse._HelpAction):
                missing.append(f"{name} {'/'.join(a.option_strings) or a.dest}")

    walk("", build_parser())
    assert not missing, missing
    r = subprocess.run([sys.executable, "-m", "mtplite.cli", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == f"mtplite {__version__}"
    r = subprocess.run([sys.executable, "-m", "mtplite.cli", "export", "--help"], capture_output=True, text=True)
    assert "(default: 512)" in " ".join(r.stdout.split())


def test_readme_is_for_users():
    """The README is how-to for users (at most 150 lines, 1,200 words); the design lives in docs/DESIGN.md, the
    story in lab/notes/PERF.md."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150 and len(text.split()) <= 1200, (len(text.splitlines()), len(text.split()))
    assert (ROOT / "docs" / "DESIGN.md").is_file() and "docs/DESIGN.md" in text
    assert not re.search(r"\bsessions? \d+", text, re.I)
