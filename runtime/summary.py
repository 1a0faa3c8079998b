"""What a person reads first of a bench or report result: one verdict line, a table under 100 columns (± over
repeated runs), and the same table as CSV."""
import csv
import io
import statistics

SHORT = (("hybrid", "hyb"), ("+ctx", "+c"), ("+gate", "+g"))  # column labels, so all modes fit 100 columns


def machine():
    """This machine in a few words: CPU model and core count (the bench JSON records it)."""
    import os
    import platform

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores"


def speedups(res):
    """{mode: {task: [ratio over plain, one per run]}} of a result and its repeats (res["repeats"])."""
    runs = [r["ratios"] for r in res.get("repeats") or [res]]
    out = {}
    for k in res["ratios"]:
        if k.endswith("/plain"):
            out[k[: -len("/plain")]] = {t: [r[k][t] for r in runs if t in r.get(k, {})] for t in res["ratios"][k]}
    e = res.get("engine")
    if e and "mtp/plain" in e:
        out["engine"] = {"all": [r["engine"]["mtp/plain"] for r in res.get("repeats") or [res] if "engine" in r]}
    return out


def mean_speedups(res):
    """{mode: speedup over plain on all prompts, averaged over the runs} (the official engine as "engine")."""
    return {m: statistics.mean(v["all"]) for m, v in speedups(res).items() if v.get("all")}


def verdict(res, where=None):
    """One line: the best mode and its speedup, the head alone, lookup, the official engine, plain tok/s, where."""
    mean = mean_speedups(res)
    ours = {m: x for m, x in mean.items() if m != "engine"}
    plain = res["table"]["plain"]["all"]["decode_tokens_per_s"]
    parts = []
    if ours:
        best = max(ours, key=ours.get)
        parts.append(f"best {best} {ours[best]:.2f}x plain" if ours[best] > 1 else
                     f"nothing beats plain (best {best} {ours[best]:.2f}x)")
    head = next((m for m in ("mtp+ctx", "mtp") if m in ours), None)
    if head:
        parts.append(f"head alone ({head}) {ours[head]:.2f}x, τ {res['table'][head]['all']['accept_length']:.2f}")
    if "lookup" in ours:
        parts.append(f"lookup {ours['lookup']:.2f}x")
    if "engine" in mean:
        parts.append(f"official engine {mean['engine']:.2f}x")
    parts.append(f"plain {plain:.1f} tok/s" if plain else "plain -")
    n = len(res.get("repeats") or [res])
    parts.append((where or res.get("machine") or "this machine") + (f", {n} runs" if n > 1 else ""))
    return "verdict: " + "; ".join(parts)


def label(mode):
    for a, b in SHORT:
        mode = mode.replace(a, b)
    return mode


def cell(xs):
    """1.63 for one run, 1.63±.04 (sample standard deviation) for several."""
    if not xs:
        return "-"
    if len(xs) == 1:
        return f"{xs[0]:.2f}"
    sd = statistics.stdev(xs)
    return f"{statistics.mean(xs):.2f}±{sd:.2f}".replace("±0.", "±.")


def compact(res):
    """Speedups over plain per task, one column per mode, at most 100 columns wide."""
    sp = speedups(res)
    modes = list(sp)
    tasks = res["tasks"]
    rows = [["task", "plain tok/s"] + [label(m) for m in modes]]
    for t in tasks:
        pl = res["table"]["plain"][t]["decode_tokens_per_s"]
        rows.append([t, f"{pl:.1f}" if pl else "-"] + [cell(sp[m].get(t, [])) for m in modes])
    width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [" ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, width))).rstrip()
             for r in rows]
    legend = "speedup over plain tok/s per mode" + (" (mean±sd over runs)" if len(res.get("repeats") or []) > 1
                                                    else "") + "; hyb = hybrid, +c = +ctx, +g = +gate"
    return "\n".join([lines[0], "-" * len(lines[0])] + lines[1:] + [legend])


def to_csv(res):
    """task, mode, tokens/s, accept length, speedup over plain (mean, sd, runs): one row per task and mode."""
    sp = speedups(res)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["task", "mode", "decode_tokens_per_s", "accept_length", "speedup", "speedup_sd", "runs"])
    for t in res["tasks"]:
        for m in res["modes"]:
            row = res["table"][m][t]
            xs = sp.get(m, {}).get(t, [])
            w.writerow([t, m, row.get("decode_tokens_per_s"), row.get("accept_length"),
                        statistics.mean(xs) if xs else (1.0 if m == "plain" else None),
                        statistics.stdev(xs) if len(xs) > 1 else None, len(xs) or 1])
    return buf.getvalue()
