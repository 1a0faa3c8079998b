"""The Android demo's pure-Kotlin core: compiled with kotlinc and unit-tested with JUnit 5, driven by golden traces
and manifest fixtures that the Python runtime writes here, so Python and Kotlin provably run the same loop."""
import copy
import json
import shutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import toolchain
from conftest import PROMPTS, trained
from test_export_runtime import C, bundle

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "android_demo" / "core" / "src"


def record_steps(steps, log):
    """Wrap step functions so every call and its result is written as a golden-trace line."""
    prefill, decode, verify, draft = steps

    def p(ids, start):
        log.append(f"prefill {start} " + " ".join(map(str, ids)))
        return prefill(ids, start)

    def d(tok, pos):
        y, a = decode(tok, pos)
        log.append(f"decode {tok} {pos} {y}")
        return y, a

    def v(toks, pos):
        ys, acts = verify(toks, pos)
        log.append(f"verify {pos} {' '.join(map(str, toks))}|{' '.join(map(str, ys))}")
        return ys, acts

    def dr(tok, act, pos, k):
        out = draft(tok, act, pos, k)
        log.append(f"draft {tok} {pos} {k} " + ("none" if out is None else " ".join(map(str, out))))
        return out

    return p, d, v, dr


def write_golden(dirpath):
    from mtplite.model import generate as G
    from mtplite.runtime.litert import Bundle
    from mtplite.runtime.lookup import lookup_steps

    bb, head, *_ = trained("tiny:gemma3")
    b = Bundle(bundle("tiny:gemma3"), threads=1, context=True)
    b.use_context = False  # the traces replay the contract's drafter
    n = gated_plain = 0
    for i, prompt in enumerate(PROMPTS[:8]):
        ids = bb.encode(prompt)
        full = G.run(ids, b.steps(), max_new_tokens=30, eos_ids=set(), K=0, cache_len=C)["tokens"]
        cases = [("mtp", 3, 7 + 3 * i, set()), ("plain", 0, 9, set()), ("hybrid", 3, 20, set()),
                 ("mtp-gate", 3, 24, set())]  # declined (none) and kept drafts
        if len(full) > 12:
            cases.append(("mtp-eos", 3, 30, {full[11]}))
        for mode, K, budget, eos in cases:
            log = []
            history = list(ids)
            steps = b.steps()
            if mode == "hybrid":
                steps, _ = lookup_steps(steps, history, mode="hybrid")
            b.min_prob = 0.3 if mode == "mtp-gate" else 0.0
            res = G.run(ids, record_steps(steps, log), max_new_tokens=budget, eos_ids=eos, K=K, cache_len=C,
                        on_token=history.append)
            b.min_prob = 0.0
            gated_plain += res["plain_steps"] if mode == "mtp-gate" else 0
            lines = [f"prompt {' '.join(map(str, ids))}", f"params {K} {budget} {C}", f"eos {' '.join(map(str, eos))}"]
            lines += log
            for c in res["trace"]:
                lines.append(f"cycle {c['pos']} {c['accepted']} | {' '.join(map(str, c['drafted']))} | "
                             f"{' '.join(map(str, c['verify']))} | {' '.join(map(str, c['emitted']))}")
            lines += [f"tokens {' '.join(map(str, res['tokens']))}", f"stop {res['stop_reason']}"]
            (dirpath / f"{i:02d}-{mode}.trace").write_text("\n".join(lines) + "\n")
            n += 1
    assert gated_plain > 0  # the gate really declined some drafts, so the traces exercise it
    write_context_golden(dirpath, b)
    from test_sampling import write_sampling_golden

    write_sampling_golden(dirpath / "sampling.golden")
    return n


def write_context_golden(dirpath, b):
    """Python's context draft space picks on random histories, for ContextSpaceTest (max 8 ids, so the cap binds)."""
    import numpy as np

    from mtplite.model.head import context_ids

    M, S = 8, len(b.space_ids)
    rng = np.random.default_rng(0)
    lines = [f"space {' '.join(map(str, b.space_ids))}", f"vocab {b.V}", f"max {M}"]
    for _ in range(24):
        h = rng.integers(0, b.V, int(rng.integers(2, 60))).tolist()
        pos = int(rng.integers(0, len(h) + 1))
        got = context_ids(h[:pos], b.space_map, S, M)
        lines.append(f"case {pos} | {' '.join(map(str, h))} | {' '.join(f'{t}@{j}' for t, j in got)}")
    (dirpath / "context.golden").write_text("\n".join(lines) + "\n")


def _ctx_io(m):
    return m["context_drafter"]["signatures"]["mtp_draft_k"]


def write_manifest_fixtures(dirpath):
    """Good and hand-broken manifests; `.expect` holds Python's decision and the name its refusal gives."""
    from mtplite.errors import UserError
    from mtplite.export.contract import check_manifest_dict

    good = json.loads((bundle("tiny:gemma3") / "android" / "manifest.json").read_text())
    kv = next(n for n in good["signatures"]["drafter"]["mtp_drafter"]["inputs"] if n.startswith("kv_cache_k_"))

    def mut(f):
        m = copy.deepcopy(good)
        f(m)
        return m

    cases = {
        "good": (good, None),
        "format-version": (mut(lambda m: m.update(format_version=2)), "format_version"),
        "k-string": (mut(lambda m: m.update(K="3")), "'K'"),
        "huge-cache": (mut(lambda m: m.update(cache_length=1 << 30)), "cache_length"),
        "drafter-kv-shape": (mut(lambda m: m["signatures"]["drafter"]["mtp_drafter"]["inputs"][kv].update(shape=[1, 1, 64, 16])), kv),
        "drafter-kv-dtype": (mut(lambda m: m["signatures"]["drafter"]["mtp_drafter"]["inputs"][kv].update(dtype="float16")), kv),
        "verify-len": (mut(lambda m: m["signatures"]["backbone"]["verify"]["inputs"]["input_pos"].update(shape=[3])), "input_pos"),
        "bool-mask": (mut(lambda m: m["signatures"]["backbone"]["verify"]["inputs"]["mask"].update(dtype="bool")), "mask"),
        "path-escape": (mut(lambda m: m["files"].update(backbone="../backbone.tflite")), "files.backbone"),
        "read-layer": (mut(lambda m: m.update(read_layers=[99])), "read_layers"),
        "eos-range": (mut(lambda m: m.update(eos_ids=[10 ** 6])), "eos_ids"),
        "no-decode": (mut(lambda m: m["signatures"]["backbone"].pop("decode")), "decode"),
        "two-drafter-sigs": (mut(lambda m: m["signatures"]["drafter"].update(extra=m["signatures"]["drafter"]["mtp_drafter"])), "mtp_drafter"),
        "prefill-list": (mut(lambda m: m.update(prefill_lengths="32")), "prefill_lengths"),
        "gate-ok": (mut(lambda m: m.update(settings={"K": 3, "min_prob": 0.4})), None),
        "gate-string": (mut(lambda m: m.update(settings={"K": 3, "min_prob": "high"})), "min_prob"),
        "gate-range": (mut(lambda m: m.update(settings={"K": 3, "min_prob": 1.5})), "min_prob"),
        "drafter-bad": (mut(lambda m: m.update(settings={"K": 3, "drafter": "drafter_k"})), "settings.drafter"),
        "chat-turn-ok": (mut(lambda m: m.update(chat_turn={"before_ids": [1, 2], "after_ids": [3]})), None),
        "chat-turn-range": (mut(lambda m: m.update(chat_turn={"before_ids": [1], "after_ids": [10 ** 6]})), "chat_turn"),
        "chat-turn-type": (mut(lambda m: m.update(chat_turn="<|im_start|>")), "chat_turn"),
        "hybrid-ok": (mut(lambda m: m.update(settings={"K": 3, "hybrid_min_ngram": {"drafter": 1, "drafter_ctx": 3}})), None),
        "hybrid-range": (mut(lambda m: m.update(settings={"K": 3, "hybrid_min_ngram": {"drafter_ctx": 4}})), "hybrid_min_ngram"),
        "hybrid-key": (mut(lambda m: m.update(settings={"K": 3, "hybrid_min_ngram": {"head": 2}})), "hybrid_min_ngram"),
        "hybrid-list": (mut(lambda m: m.update(settings={"K": 3, "hybrid_min_ngram": [3]})), "hybrid_min_ngram"),
        "draft-ok": (mut(lambda m: m.update(settings={"K": 3, "draft": "lookup"})), None),
        "draft-bad": (mut(lambda m: m.update(settings={"K": 3, "draft": "tree"})), "settings.draft"),
        "context-path": (mut(lambda m: m["context_drafter"].update(file="../drafter_ctx.tflite")), "context_drafter.file"),
        "context-ids": (mut(lambda m: m["context_drafter"].update(space_ids=[-1])), "context_drafter.space_ids"),
        "context-max": (mut(lambda m: m["context_drafter"].update(max_ids=0)), "context_drafter.max_ids"),
        "context-drafts": (mut(lambda m: _ctx_io(m)["outputs"]["draft_ids"].update(shape=[1, 7])), "draft_ids"),
        "context-ids-dtype": (mut(lambda m: _ctx_io(m)["inputs"]["context_ids"].update(dtype="float32")), "int32"),
        "context-kv": (mut(lambda m: _ctx_io(m)["inputs"][kv].update(shape=[1, 1, 64, 16])), kv),
        "context-window-io": (mut(lambda m: m["context_drafter"]["signatures"]["mtp_draft_k_32"]["outputs"]["draft_ids"]
                                  .update(shape=[1, 2])), "mtp_draft_k_32"),
        "context-no-kv": (mut(lambda m: [_ctx_io(m)["inputs"].pop(n) for n in list(_ctx_io(m)["inputs"]) if n.startswith("kv")]),
                          "reads no kv_cache"),
    }
    decisions = {}
    for name, (m, key) in cases.items():
        (dirpath / f"{name}.json").write_text(json.dumps(m))
        try:
            check_manifest_dict(m, f"{name}.json")
            got = None
        except UserError as e:
            got = str(e)
            assert key and key in got, (name, got)
        assert (got is None) == (key is None), (name, got)
        (dirpath / f"{name}.expect").write_text("ok" if key is None else f"refuse {key}")
        decisions[name] = got
    (dirpath / "not-json.json").write_text("{not json")
    (dirpath / "not-json.expect").write_text("refuse JSON")
    return decisions


def test_kotlin_core(tmp_path):
    kotlinc, jars = toolchain.kotlinc(), toolchain.junit()
    golden, manifests = tmp_path / "golden", tmp_path / "manifests"
    golden.mkdir()
    manifests.mkdir()
    n = write_golden(golden)
    assert n >= 20
    write_manifest_fixtures(manifests)
    jar = tmp_path / "core.jar"
    cp = ":".join(str(jars / j) for j in ("junit-jupiter-api.jar", "apiguardian-api.jar",
                                                              "opentest4j.jar"))
    srcs = [str(p) for p in CORE.rglob("*.kt")]
    r = subprocess.run([str(kotlinc), "-d", str(jar), "-cp", cp, "-jvm-target", "17", "-nowarn", *srcs],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    stdlib = kotlinc.parent.parent / "lib" / "kotlin-stdlib.jar"
    log = tmp_path / "device.jsonl"
    r = subprocess.run(["java", f"-Dmtplite.golden={golden}", f"-Dmtplite.manifests={manifests}",
                        f"-Dmtplite.logOut={log}", "-jar", str(jars / "junit-platform-console-standalone.jar"), "--class-path", f"{jar}:{stdlib}",
                        "--scan-classpath", "--fail-if-no-tests", "--disable-banner", "--details=tree"],
                       capture_output=True, text=True, timeout=600)
    ok = re.search(r"(\d+) tests successful", r.stdout)
    bad = re.search(r"(\d+) tests failed", r.stdout)
    print(f"{ok.group(1) if ok else 0} passed, {bad.group(1) if bad else '?'} failed (Kotlin core, JUnit 5)")
    fails = [l for l in r.stdout.splitlines() if "✘" in l or "=>" in l or "expected" in l][:20]
    assert r.returncode == 0 and bad and bad.group(1) == "0", "\n".join(fails) or r.stdout[-4000:]
    assert int(ok.group(1)) >= 9
    # the sample device log the Kotlin writer produced goes through `mtplite report`
    assert log.exists() and len(log.read_text().splitlines()) == 13  # 4 records, 8 engine records and a failure
    png = tmp_path / "report.png"
    r = subprocess.run([sys.executable, "-m", "mtplite.cli", "report", str(log), "--plot", str(png)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "mtp/plain" in r.stdout and "summarize" in r.stdout and png.stat().st_size > 1000
    assert "failed on the device: mtp p4 (code): IllegalArgumentException: prompt is 600 tokens" in r.stdout
    # the engine's rows beside our loop: its own MTP on / off ratio, and which replies MTP left unchanged
    assert "official litert_lm engine: plain 40.0 tok/s, MTP 50.0 tok/s (1.25x), MTP text = plain text on 3/4" in r.stdout
    assert "official engine 1.25x" in r.stdout.splitlines()[0]  # the verdict line names it
    # the phone's own log sets the bundle's settings (report --calibrate), named by its source
    b = tmp_path / "b"
    shutil.copytree(bundle("tiny:gemma3") / "android", b)
    r = subprocess.run([sys.executable, "-m", "mtplite.cli", "report", str(log), "--calibrate", str(b)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    st = json.loads((b / "manifest.json").read_text())["settings"]
    assert st["source"].startswith("device JVM test (ToyModel), 20") and "mtp" in st["measured_speedup_per_mode"]
    # CPU time per token from the app's cpu_s (0.01 s per token in the sample): the same line as the desktop bench
    assert "process CPU-ms per generated token (user + system, prefill included): plain 10.0, mtp 10.0" in r.stdout


def test_report_rejects_bad_logs(tmp_path):
    bad = tmp_path / "bad.jsonl"
    for content, needle in [('{"schema": "x"}\n', "schema"), ("{trunc", "not JSON"), ("", "empty"),
                            ('{"schema": "mtplite-device-log/1", "mode": "mtp", "id": "a", "task": "t", "tokens": -1}\n',
                             "tokens"),
                            ('{"schema": "mtplite-device-log/1", "mode": "mtp", "id": "a", "task": "t", "error": 1}\n',
                             "error"),
                            ('{"schema": "mtplite-device-log/1", "mode": "mtp", "id": "a", "task": "t", "error": "x"}\n',
                             "every item failed")]:
        bad.write_text(content)
        r = subprocess.run([sys.executable, "-m", "mtplite.cli", "report", str(bad)], capture_output=True, text=True)
        assert r.returncode == 2 and "Traceback" not in r.stderr and needle in r.stderr, r.stderr


APP = ROOT / "android_demo" / "app" / "src" / "main"
STUBS = ROOT / "android_demo" / "stubs"


def _r_class(out):
    """R.java for the app's resources: R.layout.<file> and R.id.<name> for every @+id/ in res/ (aapt's ids; the values
    only need to be distinct ints for type-checking)."""
    layouts = sorted(p.stem for p in (APP / "res" / "layout").glob("*.xml"))
    ids = sorted({m for p in (APP / "res").rglob("*.xml") for m in re.findall(r'@\+id/(\w+)', p.read_text())})
    body = "".join(f"    public static final class {cls} {{\n" + "".join(
        f"        public static final int {n} = 0x7f0{k}{i:04x};\n" for i, n in enumerate(names)) + "    }\n"
        for k, (cls, names) in enumerate((("layout", layouts), ("id", ids)), 1))
    src = out / "dev" / "mtplite" / "demo" / "R.java"
    src.parent.mkdir(parents=True)
    src.write_text(f"package dev.mtplite.demo;\npublic final class R {{\n{body}}}\n")
    return src


def _stubs(tmp_path, kotlinc):
    """The Android API stubs (javac) and the LiteRT and LiteRT-LM stubs (kotlinc, each its own module, so internal
    members stay hidden as in the real AARs) -> their class paths."""
    android = tmp_path / "android-classes"
    r = subprocess.run(["javac", "-d", str(android), "-nowarn", *map(str, (STUBS / "android").rglob("*.java")),
                        str(_r_class(tmp_path / "r-src"))], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    litert = tmp_path / "litert.jar"
    r = subprocess.run([str(kotlinc), "-d", str(litert), "-module-name", "litert", "-jvm-target", "17", "-nowarn",
                        "-cp", str(android), *map(str, (STUBS / "litert").rglob("*.kt"))],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    litertlm = tmp_path / "litertlm.jar"  # the LiteRT-LM engine's Kotlin API, its own module too
    r = subprocess.run([str(kotlinc), "-d", str(litertlm), "-module-name", "litertlm", "-jvm-target", "17", "-nowarn",
                        *map(str, (STUBS / "litertlm").rglob("*.kt"))], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return f"{android}:{litert}:{litertlm}"


def _kotlinc_app(kotlinc, cp, srcs, out):
    return subprocess.run([str(kotlinc), "-d", str(out), "-module-name", "app", "-jvm-target", "17", "-cp", cp,
                           *map(str, srcs)], capture_output=True, text=True, timeout=600)


def test_android_app_typechecks(tmp_path):
    """The app module compiles, with the core, against the API it targets (Android 35, LiteRT as pinned)."""
    import time

    kotlinc = toolchain.kotlinc()
    t0 = time.time()
    cp = _stubs(tmp_path, kotlinc)
    r = _kotlinc_app(kotlinc, cp, [*(APP / "java").rglob("*.kt"), *(CORE / "main").rglob("*.kt")], tmp_path / "app.jar")
    errors = [l for l in r.stderr.splitlines() if "error:" in l]
    print(f"app type-check: {time.time() - t0:.0f} s, {len(errors)} errors")
    assert r.returncode == 0 and not errors, "\n".join(errors) or r.stderr[-3000:]
    # the stubs hide what the AAR hides: an app reaching for an internal constructor does not compile
    bad = tmp_path / "Bad.kt"
    for leak, name in (("com.google.ai.edge.litert.TensorBuffer(0L)", "TensorBuffer"),
                       ("com.google.ai.edge.litertlm.Conversation(0L)", "Conversation")):
        bad.write_text(f"package dev.mtplite.demo\nfun leak() = {leak}\n")
        r = _kotlinc_app(kotlinc, cp, [bad], tmp_path / "bad.jar")
        assert r.returncode != 0 and name in r.stderr, r.stderr[-2000:]


def _device_log(path, speeds):
    """A device log in the app's schema: 4 prompts per mode at the given decode tok/s."""
    recs = []
    for mode, tps in speeds.items():
        for i in range(4):
            recs.append({"schema": "mtplite-device-log/1", "device": "Google Pixel 8 (Android 15)", "mode": mode,
                         "id": f"p{i}", "task": "summarize", "tokens": 65, "decode_s": 64 / tps, "ttft_s": 0.1,
                         "cycles": 0 if mode == "plain" else 30, "accepted": 0 if mode == "plain" else 34,
                         "draft_ms_per_cycle": 0.0 if mode == "plain" else 9.0, "verify_ms_per_cycle": 0.0 if mode == "plain" else 40.0,
                         "accept_length": None if mode == "plain" else 2.1,
                         "acceptance_per_depth": [] if mode == "plain" else [0.6, 0.3, 0.2]})
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_report_calibrate_follows_the_phone_s_measured_speeds(tmp_path):
    """report --calibrate: where every drafting mode ran slower on the phone than plain, the settings say off (a
    host calibration had said the head pays); where hybrid+ctx ran fastest, hybrid with the K-step drafter."""
    from mtplite.runtime.report import calibrate_from_log, report

    b = tmp_path / "b"
    shutil.copytree(bundle("tiny:gemma3") / "android", b)
    man = json.loads((b / "manifest.json").read_text())
    man["settings"] = {"K": 3, "draft": "mtp", "min_prob": 0.3, "source": "mtplite calibrate"}
    (b / "manifest.json").write_text(json.dumps(man))
    log = tmp_path / "slow.jsonl"
    _device_log(log, {"plain": 20.0, "mtp": 14.0, "hybrid": 19.5, "mtp+ctx": 20.5})
    st = calibrate_from_log(report(log), b)
    assert st["draft"] == "off" and "mtp+ctx ran 1.02x plain" in st["reason"]
    assert st["source"].startswith("device Google Pixel 8 (Android 15), ")
    _device_log(log, {"plain": 20.0, "mtp+gate": 26.0, "hybrid+ctx": 31.0})
    st = calibrate_from_log(report(log), b)
    assert (st["draft"], st["drafter"], st["min_prob"]) == ("hybrid", "drafter_ctx", 0.0)
    assert st["measured_speedup_per_mode"] == {"hybrid+ctx": 1.55, "mtp+gate": 1.3}
    from mtplite.export.contract import check

    check(b / "manifest.json")  # still a valid bundle
