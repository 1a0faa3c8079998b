"""A user's own prompts (--prompts FILE): one-line errors for bad files, and distil -> train -> export -> bench end to
end on a tiny backbone, the held-out share never trained on and the only thing measured."""
import json
import subprocess
import sys

from mtplite.data.app_prompts import load_app_prompts, split_app_prompts

ITEMS = ["umbrella", "bicycle", "laptop", "garden hose", "coffee grinder", "yoga mat", "desk lamp", "backpack",
         "kettle", "headphones"]


def app_file(path):
    rows = []
    for i, it in enumerate(ITEMS):
        rows.append({"prompt": f"A customer writes: my {it} arrived broken, order {1000 + i}. Draft a short apology.",
                     "task": "support"})
        rows.append({"messages": [{"role": "user", "content": f"List three tips for keeping a {it} in good shape."}],
                     "task": "tips"})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def cli(*args, cwd=None):
    r = subprocess.run([sys.executable, "-m", "mtplite.cli", *args], capture_output=True, text=True, cwd=cwd,
                       timeout=900)
    return r.returncode, r.stdout, r.stderr


def test_bad_prompt_files_are_one_line_errors_before_any_backbone_loads(tmp_path):
    from mtplite.data.benchmark import default_prompts

    first = json.loads(default_prompts().read_text().splitlines()[0])["prompt"]
    cases = {
        "notjson.jsonl": ('{"prompt": "fine"}\nnot json at all\n', ":2: not JSON"),
        "noprompt.jsonl": ('{"text": "where is the prompt"}\n', ":1: no prompt"),
        "empty.jsonl": ("\n\n", "no prompts in it"),
        "dup.jsonl": ('{"prompt": "same"}\n{"prompt": "other"}\n{"prompt": "same"}\n', ":3: the same prompt as line 1"),
        "bench.jsonl": (json.dumps({"prompt": first}) + "\n", ":1: this is one of mtplite's benchmark prompts"),
        "badmsg.jsonl": ('{"messages": [{"role": "user"}]}\n', ':1: "messages" must be'),
    }
    for name, (text, want) in cases.items():
        (tmp_path / name).write_text(text)
        for cmd in (("distill", "--out", str(tmp_path / "c")), ("train", "--out", str(tmp_path / "h"))):
            rc, out, err = cli(cmd[0], "--backbone", "tiny:gemma3", "--prompts", str(tmp_path / name), *cmd[1:])
            lines = [line for line in err.splitlines() if line.strip()]
            assert rc == 2 and "Traceback" not in err and want in lines[-1] and name in lines[-1], (name, err[-500:])
            assert "mtplite: error:" in lines[-1]
    rc, _, err = cli("distill", "--backbone", "tiny:gemma3", "--prompts", str(tmp_path / "missing.jsonl"), "--out", "c")
    assert rc == 2 and "--prompts" in err and "missing.jsonl" in err
    rc, _, err = cli("train", "--backbone", "tiny:gemma3", "--data", str(tmp_path / "nocorpus"), "--out", "h")
    assert rc == 2 and "--data" in err and "nocorpus" in err
    rc, _, err = cli("export", "--backbone", "tiny:gemma3", "--head", str(tmp_path / "nohead"), "--out", "o")
    assert rc == 2 and "--head" in err and "nohead" in err


def test_split_is_deterministic_and_holds_out_a_tenth(tmp_path):
    rows = load_app_prompts(app_file(tmp_path / "app.jsonl"))
    assert len(rows) == 20 and len({r["id"] for r in rows}) == 20
    train, held = split_app_prompts(rows)
    assert len(held) == 2 and len(train) == 18 and not {r["id"] for r in train} & {r["id"] for r in held}
    # the same rows in another order (ids are content hashes) hold out the same prompts
    rev = tmp_path / "rev.jsonl"
    rev.write_text("\n".join(reversed((tmp_path / "app.jsonl").read_text().splitlines())) + "\n")
    assert {r["id"] for r in split_app_prompts(load_app_prompts(rev))[1]} == {r["id"] for r in held}


def test_distill_train_export_bench_on_your_own_prompts(tmp_path):
    app = app_file(tmp_path / "app.jsonl")
    held = {r["id"] for r in split_app_prompts(load_app_prompts(app))[1]}
    rc, out, err = cli("distill", "--backbone", "tiny:gemma3", "--prompts", str(app), "--out", str(tmp_path / "corpus"),
                       "--max-new", "24")
    assert rc == 0, err[-1500:]
    assert json.loads(out.splitlines()[-1])["rows_added"] == 18
    from mtplite.data.corpus import load_corpus

    rows, metas = load_corpus([tmp_path / "corpus"])
    assert not {r["id"] for r in rows} & held and len(rows) == 18
    assert metas[0]["settings"]["prompts"] == "app.jsonl" and {r["id"] for r in metas[0]["eval_prompts"]} == held
    rc, out, err = cli("train", "--backbone", "tiny:gemma3", "--data", str(tmp_path / "corpus"), "--out",
                       str(tmp_path / "head"), "--epochs", "2", "--draft-vocab", "64")
    assert rc == 0, err[-1500:]
    doc = json.loads((tmp_path / "head" / "head.json").read_text())
    assert doc["prompts_file"] == "app.jsonl" and {r["id"] for r in doc["eval_prompts"]} == held
    rc, out, err = cli("export", "--backbone", "tiny:gemma3", "--head", str(tmp_path / "head"), "--out",
                       str(tmp_path / "out"), "--cache-length", "128", "--prefill-lengths", "16,64")
    assert rc == 0, err[-1500:]
    man = json.loads((tmp_path / "out" / "android" / "manifest.json").read_text())
    assert {r["id"] for r in man["eval_prompts"]} == held
    phone = [json.loads(line) for line in (tmp_path / "out" / "android" / "bench_prompts.jsonl").read_text().splitlines()]
    assert {r["id"] for r in phone} == held  # the phone's benchmark runs the held-out prompts too
    # and its engine rows send the prompt's own text (or chat turns) through the Conversation API
    texts = {r["id"]: r["prompt"] for r in load_app_prompts(app)}
    assert all(r["prompt"] == texts[r["id"]] for r in phone)
    rc, out, err = cli("bench", str(tmp_path / "out"), "--no-engine", "--modes", "plain,mtp,mtp+ctx", "--max-new-tokens",
                       "16", "--json", str(tmp_path / "b.json"))
    assert rc == 0, err[-1500:]
    b = json.loads((tmp_path / "b.json").read_text())
    assert {r["id"] for r in b["per_prompt"]["plain"]["all"]} == held and b["spec_vs_plain_mismatches"] == 0
    assert set(b["tasks"]) <= {"support", "tips", "all"}
    # what users would read, beside the speeds: loops, endings and a few answers
    pl = b["table"]["plain"]["all"]
    assert 0 <= pl["loop_share"] <= 1 and 0 <= pl["ended_by_itself"] <= 2
    assert {s["id"] for t in b["samples"].values() for s in t} == held and "answers (plain)" in out
    # what a person reads at a glance: a verdict line, a table under 100 columns with ± over runs, a CSV
    rc, out, err = cli("bench", str(tmp_path / "out"), "--no-engine", "--modes", "plain,mtp,mtp+ctx", "--max-new-tokens",
                       "16", "--repeat", "2", "--compact", "--csv", str(tmp_path / "b.csv"), "--json", str(tmp_path / "r.json"))
    assert rc == 0, err[-1500:]
    lines = out.strip().splitlines()
    assert lines[0].startswith("verdict: ") and "head alone (mtp+ctx)" in lines[0] and "2 runs" in lines[0]
    assert max(map(len, lines[1:])) <= 100 and "±" in out and "mtp+c" in lines[1]
    r = json.loads((tmp_path / "r.json").read_text())
    assert len(r["repeats"]) == 2 and r["machine"]
    rows = (tmp_path / "b.csv").read_text().splitlines()
    assert rows[0].startswith("task,mode,decode_tokens_per_s") and len(rows) == 1 + 3 * len(r["tasks"])


def test_loop_tokens_counts_what_repeats_an_earlier_4gram():
    from mtplite.runtime.bench import loop_tokens

    assert loop_tokens(list(range(12))) == 0
    assert loop_tokens([1, 2, 3, 4, 5, 1, 2, 3, 4, 6]) == 4  # the second "1 2 3 4"
    assert loop_tokens([1, 2, 3, 4] * 3) == 8  # everything after the first occurrence
    assert loop_tokens([7, 7, 7, 7, 7]) == 4  # "7 7 7 7" at 1 repeats the one at 0, so 1..4 lie inside it
