"""The shipped self-distillation prompt corpus.

Built deterministically from formats and topics that share no template with the benchmark prompts in
../shared/prompts/tasks.jsonl (those are for evaluation only): different framings ("TL;DR", "Key points", chat
turns, emails, comments-first code, dash lists, ...) over a wide topic list, so the head learns the backbone, not a
template. Every prompt carries a `task` label from the same six task types so results can be broken down.
"""
import itertools
import random

TOPICS = [
    "a delayed train to the coast", "the library's new opening hours", "a broken washing machine", "a school bake sale",
    "the quarterly budget meeting", "a lost cat named Biscuit", "a hiking trip in the mountains", "a new coffee shop",
    "the neighbourhood recycling rules", "a birthday surprise for a coworker", "a power outage on Elm Road",
    "a job interview on Friday", "the price of concert tickets", "a leaking kitchen tap", "a chess tournament",
    "a doctor's advice about sleep", "the football match last night", "a rental car reservation", "a science fair project",
    "a vegetarian lasagna recipe", "a software update that failed", "a museum's free entry day", "a moving day plan",
    "the city's new bus route", "a camping trip in the rain", "an overdue library book", "a pottery class",
    "a team offsite in October", "a flat tyre on the highway", "a garden full of tomatoes", "a phone that will not charge",
    "the annual charity run", "a noisy upstairs neighbour", "a wedding invitation", "a passport renewal",
    "a cooking class for kids", "a late package from an online shop", "a dentist who moved offices",
    "a holiday in Lisbon", "the office printer jam", "a winter coat on sale", "a piano recital",
    "a parking ticket dispute", "a volunteer shift at the food bank", "a new puppy's first week",
    "the history of the printing press", "how bees make honey", "why the sky looks blue", "how tides work",
    "the rules of volleyball", "the life of Marie Curie", "how vaccines train the immune system",
    "the water cycle", "how a bicycle gear works", "the invention of the telephone", "why leaves change colour",
]

NAMES = ["Alex", "Maria", "Jordan", "Wei", "Fatima", "Tom", "Aisha", "Lukas", "Chen", "Olivia", "Ravi", "Nina"]

FORMATS = {
    "summarize": [
        "Here is a short report about {topic}. {name} wrote that things did not go as planned, and everyone involved "
        "had to change their plans for the week.\nTL;DR:",
        "Key points from {name}'s long voice memo about {topic}:\n-",
        "Below is a paragraph about {topic}.\n\n{name} explained the situation in detail, listing the causes, the "
        "people affected and what would happen next.\n\nIn short,",
        "Write a headline for this story about {topic}, told by {name}.\nHeadline:",
    ],
    "rewrite": [
        "Make this sentence more formal: \"hey {name}, about {topic}, cant make it, sorry lol\"\nFormal version:",
        "Rewrite in plain English for a child: {topic} is a matter of considerable complexity.\nSimple version:",
        "Turn this into a polite request: \"{name}, sort out {topic} now.\"\nPolite request:",
        "Shorten this sentence: \"I wanted to let you know that regarding {topic}, there may possibly be some "
        "changes at some point soon.\"\nShorter:",
    ],
    "reply": [
        "{name}: did you hear about {topic}?\nMe:",
        "Chat between two friends.\nA: I'm still annoyed about {topic}.\nB:",
        "Email subject: {topic}\nFrom: {name}\nBody: Could you send me your thoughts by tomorrow?\n\nResponse:",
        "Customer: I have a question about {topic}.\nSupport agent:",
    ],
    "freeform": [
        "The story of {topic} begins on a quiet morning when {name}",
        "Here are some interesting facts about {topic}.",
        "Diary entry, Tuesday. Today I finally dealt with {topic}.",
        "Q: What should I know about {topic}?\nA:",
    ],
    "code": [
        "# Python: count how many times each word appears in a text about {topic}\nimport collections\n\n",
        "// JavaScript: format a reminder message for {name}\nfunction formatReminder(",
        "class Inventory:\n    # Tracks items for {topic}\n    def __init__(self):\n",
        "#!/bin/bash\n# Back up the folder with notes on {topic}\n",
        "SELECT name, COUNT(*)\nFROM events\n-- events about {topic}\n",
    ],
    "list": [
        "Things {name} needs for {topic}:\n-",
        "Steps to deal with {topic}:\nStep 1:",
        "Pros and cons of {topic}.\nPros:\n-",
    ],
}


# More framings, so the head cannot get by on memorising a few templates (a measured failure: trained on the 24
# formats above alone, Gemma's head reached accept length 3-4 on them and 1.1-1.5 on new templates).
FORMATS_MORE = {
    "summarize": [
        "Meeting minutes ({topic}):\n{name} opened the meeting. Several options were discussed at length.\nAction items:",
        "{name} sent a long thread about {topic}. The short version is that",
        "Abstract: This note reviews {topic}, its causes and its consequences for the people involved. We find that",
        "Recap of {topic} for anyone who missed it:",
    ],
    "rewrite": [
        "Original: {name} was like totally late cuz of {topic} lol\nProfessional: ",
        "Paraphrase the following in your own words: \"{topic} affected everyone more than expected.\"\nParaphrase:",
        "Translate to simple English: Owing to {topic}, proceedings were postponed sine die.\nSimple English:",
        "Edit for clarity: \"Regarding the {topic} thing, we maybe should possibly think about it.\"\nEdited:",
    ],
    "reply": [
        "Text from {name}: \"any news on {topic}?\"\nMy answer:",
        "Forum post: Has anyone else had trouble with {topic}?\nTop comment:",
        "Interviewer: Tell me about {topic}.\n{name}:",
        "Slack #general\n{name}: quick question about {topic}\nyou:",
    ],
    "freeform": [
        "{topic} is something most people never think about, but",
        "Chapter 1\n\nThe morning {name} first heard about {topic}, the sky",
        "Wikipedia\n{topic}\nFrom Wikipedia, the free encyclopedia\n\n",
        "Five things I learned from {topic}:\n\n1.",
    ],
    "code": [
        "<!-- a web page about {topic} -->\n<html>\n<head>\n",
        "/* C: a struct describing {topic} */\ntypedef struct {{\n",
        "# Markdown notes on {topic}\n\n## Overview\n\n",
        "{{\n  \"title\": \"{topic}\",\n  \"author\": \"{name}\",\n",
        "def summarize_{name}(items):\n    # about {topic}\n    result = []\n",
    ],
    "list": [
        "Checklist for {topic}:\n[ ]",
        "| Item | Owner | Due |\n|---|---|---|\n| {topic} | {name} |",
        "Top 10 tips for {topic}\n\n1.",
        "Agenda ({topic})\n09:00",
    ],
}


def training_prompts(seed: int = 0, limit: int | None = None):
    """All (format x topic x name) prompts, shuffled deterministically (~2,900). Each row names its `template`
    (task + format), so validation can hold out whole templates."""
    rows = []
    for fams, tag in ((FORMATS, ""), (FORMATS_MORE, "m")):
        for task, formats in fams.items():
            for fi, (fmt, topic) in enumerate(itertools.product(formats, TOPICS)):
                name = NAMES[(fi * 7) % len(NAMES)]
                rows.append({"id": f"train-{task}-{tag}{fi:04d}", "task": task, "template": f"{task}-{tag}{fi // len(TOPICS)}",
                             "prompt": fmt.format(topic=topic, name=name)})
    random.Random(seed).shuffle(rows)
    return rows[:limit] if limit else rows
