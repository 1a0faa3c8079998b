"""Train / validation splits of distilled rows: whole templates held out, so early stopping watches unseen ones."""


def template_of(row_id):
    """Template of a shipped-corpus row from its id (rows cached before `template` was recorded)."""
    from mtplite.data import DRILLS_PER_FORMAT, TOPICS, TOPICS_MORE, is_drill, is_echo

    parts = row_id.split("-")
    if is_echo(row_id):
        return f"{parts[1]}-e{int(parts[2][1:3])}"
    if len(parts) == 3 and parts[0] == "train" and parts[2][:1] == "p":  # program_prompts
        return f"{parts[1]}-p{parts[2][1]}"
    if len(parts) == 3 and parts[0] == "train":
        tag = parts[2].rstrip("0123456789")
        i = int(parts[2][len(tag):])
        if is_drill(row_id):
            return f"{parts[1]}-d{i // DRILLS_PER_FORMAT}"
        # "<family>t" rows run over TOPICS_MORE; the template key is the family's, whichever topic list
        family, more = (tag[:-1], True) if tag.endswith("t") else (tag, False)
        return f"{parts[1]}-{family}{i // len(TOPICS_MORE if more else TOPICS)}"
    return row_id


SPLIT = "by-task"  # head.json "split": how the head's held-out templates were chosen (absent: the older hash split)


def split_rows(rows, holdout=0.1, seed=0, by_task=True, held=None):
    """Hold out whole templates (task + format), not just prompts: a head that memorises templates looks great on
    held-out prompts of seen templates and poor on new ones, so early stopping must watch unseen templates.

    by_task: the share of templates is held out within each task (at least one where a task has two or more). The
    older rule, a share of all templates by hash (by_task=False, heads without "split" in head.json), held out no
    reply or rewrite template at all on the shipped corpus, so early stopping never saw those tasks.
    held: the held-out templates themselves (a saved head's "val_templates"); the rule depends on which templates the
    rows hold, so a later cache with more (or fewer) templates would otherwise hold out others."""
    import hashlib
    from collections import defaultdict

    def key(r):
        return r.get("template") or template_of(r["id"])

    def h(k):
        return int(hashlib.md5(f"{seed}{k}".encode()).hexdigest(), 16)

    if held is not None:
        held = set(held)
    elif by_task:
        keys = defaultdict(set)
        for r in rows:
            keys[r.get("task")].add(key(r))
        held = set()
        for ks in keys.values():
            if len(ks) > 1:
                held |= set(sorted(ks, key=h)[: max(1, round(holdout * len(ks)))])
    else:
        held = {key(r) for r in rows if h(key(r)) % 1000 < holdout * 1000}
    val = [r for r in rows if key(r) in held]
    return [r for r in rows if key(r) not in held], val


def split_of(head_meta):
    """split_rows keywords for the held-out rows a saved head was validated on (its head.json)."""
    return {"by_task": head_meta.get("split") == SPLIT, "held": head_meta.get("val_templates")}
