"""The shipped self-distillation prompt corpus.

Built deterministically from formats and topics that share no template with the benchmark prompts in
mtplite/data/bench_prompts.jsonl (those are for evaluation only): different framings ("TL;DR", "Key points", chat
turns, emails, comments-first code, dash lists, ...) over a wide topic list, so the head learns the backbone, not a
template. Every prompt carries a `task` label from the same six task types so results can be broken down.
"""
import itertools
import random
from pathlib import Path


def _lines(name):
    """One entry per line of a text file beside this module (the topic lists: data, kept out of the code)."""
    return (Path(__file__).with_name(name)).read_text(encoding="utf-8").splitlines()


TOPICS = _lines("topics.txt")

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


# More topics and a third family of framings, toward ~1M distilled tokens. Rows of the first two families
# over the original topics keep their ids, so distillation caches stay valid.
TOPICS_MORE = _lines("topics_more.txt")

FORMATS_NEW = {
    "summarize": [
        "Voicemail transcript from {name}, about {topic}: \"so yeah, it's a whole thing, I'll explain later but "
        "basically we need to decide soon.\"\nGist:",
        "News brief: Officials commented today on {topic}. Residents reacted with a mix of worry and hope.\nBottom line:",
        "Status update on {topic}, posted by {name} in the team channel.\nOne-line recap:",
        "Long review of {topic}, five stars, by {name}.\nThe review in a nutshell:",
    ],
    "rewrite": [
        "Reword this so it sounds friendlier: \"{topic} is not my problem, {name}.\"\nFriendlier:",
        "Correct any errors: \"{name} dont know nothing about {topic} and they was wrong\"\nFixed:",
        "Say it with fewer words: \"It is my belief that {topic} is something that we should all be thinking "
        "about.\"\nConcise:",
        "Change to active voice: \"{topic} was discussed by {name} at the meeting.\"\nActive voice:",
    ],
    "reply": [
        "WhatsApp\n{name}: Hey! Sorry, was busy with {topic}. What's up?\nMe:",
        "Comment on a blog post about {topic}: \"Great post, but I disagree with the last part.\"\nAuthor's reply:",
        "{name} wrote on the family group chat: \"Who is handling {topic}?\"\nResponse:",
        "Ticket #2231 ({topic})\nCustomer: This still isn't fixed.\nAgent:",
    ],
    "freeform": [
        "Explain {topic} to a ten-year-old.\n\n",
        "A short poem about {topic}:\n\n",
        "Blog post: What {topic} taught me about patience\n\nLast spring,",
        "Encyclopedia entry: {topic}.",
    ],
    "code": [
        "// Go: a struct and a constructor for {topic}\npackage main\n\n",
        "-- Lua: keep a tally of votes about {topic}\nlocal votes = {{}}\n",
        "import unittest\n\nclass Test{name}(unittest.TestCase):\n    # tests for {topic}\n",
        "# YAML config for the {topic} service\nservice:\n  name:",
        "fn main() {{\n    // Rust: print a schedule for {topic}\n",
    ],
    "list": [
        "Packing list ({topic}):\n*",
        "To do today, re: {topic}\n1)",
        "Questions to ask about {topic}:\n-",
        "Timeline of {topic}\n- Day 1:",
    ],
}

# Framings too close to the benchmark prompts' own ("Make this more formal: ... Formal version:", "Shorten this
# sentence:", "Rewrite in plain English", "# Python: <task>\nimport x", a title then "\n1."): evaluating on templates
# seen in training flatters the head, so these are skipped. They keep their index so every other cached id still
# names its prompt.
RETIRED = {"rewrite-0", "rewrite-1", "rewrite-3", "code-0", "freeform-m3", "list-m2"}


# Copy drills: every prompt carries specifics drawn at random (people, codes, times, places, amounts), so
# the backbone's echo of them can only be predicted by copying from its KV cache, never by memorising a topic list.
# Trained on the topic families alone, a head was right on 34% of the benchmark positions prompt lookup copies right
# (lab/probes/drill_ablation.py, lab/results/gemma3-270m/drill_ablation*.json, which also measures what the drills change).
# The framings share no opening or last line with the benchmark prompts (a test checks it).
DRILL_PEOPLE = ["Dr. Okafor", "Ms. Lindqvist", "Coach Ramirez", "Mr. Tanaka", "Aunt Rosa", "Officer Bell", "Nurse Ibe",
                "Professor Haddad", "Kofi", "Ingrid", "Mateo", "Yuki", "Siobhan", "Dev", "Marguerite", "Tariq"]
DRILL_PLACES = ["room 7F", "Hall C", "the Birch Lane clinic", "locker 31", "Pier 12", "the north entrance",
                "the Oakwood community centre", "studio 2", "the second-floor lounge", "bay 5", "the old boathouse",
                "suite 410", "the corner bakery on Hill Road", "platform 9", "the east car park", "cabin 14"]
DRILL_CITIES = ["Porto", "Osaka", "Nairobi", "Calgary", "Tucson", "Leeds", "Gdansk", "Perth", "Bergen", "Quito",
                "Halifax", "Lyon", "Adelaide", "Tallinn", "Cusco", "Fresno"]
DRILL_ITEMS = ["the blue folder", "two spare keys", "a signed permission slip", "your library card",
               "the tax forms", "a pack of AA batteries", "the red toolbox", "three folding chairs", "a photo ID",
               "the extension cord", "a printed ticket", "the lab coat", "four trays of muffins", "the USB stick",
               "a warm jacket", "the cheque book"]
DRILL_EVENTS = ["the budget review", "the piano recital", "the flu shot clinic", "the yard sale", "the board meeting",
                "the swim lesson", "the safety drill", "the book club", "the tenants' meeting", "the job fair",
                "the eye exam", "the choir rehearsal", "the code review", "the parent evening", "the car service",
                "the wine tasting"]
DRILL_SHOPS = ["Brightline Hardware", "Pine & Co.", "Luna Pharmacy", "Harbor Books", "Kettle Cafe", "Nordby Cycles",
               "Willow Florist", "Apex Electronics"]
DRILL_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "next Tuesday",
              "the day after tomorrow", "this Friday"]
DRILL_MONTHS = ["January", "February", "April", "May", "June", "July", "August", "September", "October",
                "November", "December"]
DRILL_FACTS = [
    "{person} moved {event} to {day} at {time} in {place}.",
    "Parcel {code} from {shop} is waiting at {place} until {day}; bring {item}.",
    "The {service} payment of {amount} for account {code} is due on {month} {dom}.",
    "Coach {code} to {city} now leaves from {place} at {time}, {m} minutes later than planned.",
    "{person} will collect {item} from {place} at {time} on {day}.",
    "{event} on {month} {dom} is called off, and refunds of {amount} go out by {day}.",
    "Locker code {code} at {place} stops working on {day} at {time}.",
    "{person} says the heater in {place} is fixed, but asks you to bring {item} on {day}.",
    "A table for {n} at Kettle Cafe in {city} is booked for {day} at {time} under {person}.",
    "{person} needs {item} and {item2} before {event} starts at {time}.",
    "Your {service} plan renews on {month} {dom} at {amount}; reference {code}.",
    "{n} people signed up for {event} in {city}, so it moves to {place} on {day}.",
]
FORMATS_DRILL = {
    "summarize": ["Forwarded by {name}: {facts}\nCondensed:", "Front desk log, {day}: {facts}\nTakeaway:",
                  "SMS alert. {facts}\nShort version:", "Sticky note from {name}: {facts}\nIn a few words:"],
    "rewrite": ["Put this in the past tense: \"{facts}\"\nPast tense:",
                "Make it sound more cheerful: \"{facts}\"\nCheerful version:",
                "Rewrite as a formal notice: {facts}\nNotice:", "Proofread and return the text: {lower}\nProofread:"],
    "reply": ["{name} texted: \"{facts}\"\nMy reply:", "Voice assistant heard: \"{facts} Remind me.\"\nAssistant:",
              "Group chat\n{name}: {facts}\nMe:", "Email from {name}:\n{facts}\nLet me know if that works.\n\nResponse:"],
    "freeform": ["Diary, {day}. {facts} Later that evening,", "Incident report: {facts} According to witnesses,"],
    "code": ["# {facts}\nevent = {{\n    \"who\": ", "// {facts}\nconst booking = {{\n  where: "],
    "list": ["Notes from {name}'s call: {facts}\nTo do:\n-", "Pulled from the message below.\n{facts}\nWho / what / when:\n-"],
}
DRILLS_PER_FORMAT = 200


def drill_facts(rng):
    """One or two random fact sentences (the values are new in every prompt)."""
    def one():
        h, mi = rng.randint(1, 12), rng.choice([0, 5, 10, 15, 20, 30, 40, 45, 50])
        letters = "ABCDEFGHJKLMNPRSTUVWXYZ"
        return rng.choice(DRILL_FACTS).format(
            person=rng.choice(DRILL_PEOPLE), place=rng.choice(DRILL_PLACES), city=rng.choice(DRILL_CITIES),
            item=rng.choice(DRILL_ITEMS), item2=rng.choice(DRILL_ITEMS), event=rng.choice(DRILL_EVENTS),
            shop=rng.choice(DRILL_SHOPS), day=rng.choice(DRILL_DAYS), month=rng.choice(DRILL_MONTHS),
            dom=rng.randint(1, 28), time=f"{h}:{mi:02d} {rng.choice(['AM', 'PM'])}", m=rng.randint(5, 95),
            n=rng.randint(2, 40), amount=f"${rng.randint(3, 480)}.{rng.randint(0, 99):02d}",
            code=f"{rng.choice(letters)}{rng.choice(letters)}-{rng.randint(100, 9999)}",
            service=rng.choice(["water", "phone", "gym", "internet", "parking", "insurance"]))
    s = " ".join(one() for _ in range(rng.choice([1, 1, 2])))
    return s[0].upper() + s[1:]


def is_drill(row_id):
    """True for the id of a copy-drill prompt (`train-<task>-dNNNN`; topic-corpus tags never start with d)."""
    parts = row_id.split("-")
    return len(parts) == 3 and parts[0] == "train" and parts[2][:1] == "d"


def is_echo(row_id):
    """True for the id of an echo prompt (`train-<task>-e<key>x<hash>`, echo_prompts)."""
    parts = row_id.split("-")
    return len(parts) == 3 and parts[0] == "train" and parts[2][:1] == "e" and "x" in parts[2]


def drill_prompts():
    rows = []
    rng = random.Random(1234)
    for task, formats in FORMATS_DRILL.items():
        for k, fmt in enumerate(formats):
            for i in range(DRILLS_PER_FORMAT):
                facts = drill_facts(rng)
                lower = facts.lower().replace(",", "").replace(";", "").replace(".", "")
                prompt = fmt.format(facts=facts, lower=lower, name=rng.choice(NAMES), day=rng.choice(DRILL_DAYS))
                rows.append({"id": f"train-{task}-d{k * DRILLS_PER_FORMAT + i:04d}", "task": task,
                             "template": f"{task}-d{k}", "prompt": prompt})
    return rows


# Requests for real programs (`mtplite train --programs N`): the corpus's code prompts are topic-themed continuations
# (a Lua tally "about a neighbour's barking dog"), so an instruction-tuned backbone often answers them in prose and a
# head trained on them drafts prose inside code. None of these is a benchmark task, and none uses the benchmark's
# code formats (a Python signature with a docstring, a "# Python: ..." comment over an import).
PROGRAM_FORMATS = ["Write a {lang} function to {task}.", "How do I {task} in {lang}? Show the code.",
                   "Implement this in {lang}, with a short usage example: {task}.",
                   "Write unit tests in {lang} for code that should {task}.",
                   "In {lang}: {task}. Explain in one sentence, then give the code."]
PROGRAM_LANGS = ["Python", "JavaScript", "TypeScript", "Java", "C", "C++", "Go", "Rust", "Kotlin", "Bash"]
PROGRAM_TASKS = [
    "check whether a string is a palindrome", "return the n-th Fibonacci number", "merge two sorted lists",
    "count how often each word appears in a text", "find the largest number in a list", "remove duplicate items "
    "from a list while keeping their order", "convert a temperature from Celsius to Fahrenheit", "compute the "
    "factorial of n", "binary search a sorted array", "flatten a nested list", "parse a date like 2024-03-15 into "
    "year, month and day", "validate an email address", "sum the digits of an integer", "compute the average of a "
    "list of numbers", "capitalize the first letter of every word", "check whether two strings are anagrams",
    "rotate a matrix by 90 degrees", "find the greatest common divisor of two numbers", "implement a stack with "
    "push and pop", "read a JSON file and print one of its fields", "send an HTTP GET request and print the status "
    "code", "sort a list of people by age", "compute the distance between two points", "check whether a year is a "
    "leap year", "convert a number to binary", "count the vowels in a string", "find the second smallest number in "
    "a list", "group a list of words by their first letter", "implement FizzBuzz up to 100", "retry a function up to "
    "three times when it fails", "compute a running total of a list", "truncate a string to 20 characters with an "
    "ellipsis", "check whether parentheses in a string are balanced", "build a dictionary from two lists", "compute "
    "the median of a list", "list the files in a directory", "convert a string to snake_case", "find all pairs in a "
    "list that sum to a target", "implement a simple LRU cache", "format a number of seconds as hours:minutes:seconds"]


def program_prompts(seed: int = 0):
    """Every (format x language x task) program request, shuffled deterministically; ids `train-code-p<format><n>`
    (template `code-p<format>`)."""
    rows = []
    for k, fmt in enumerate(PROGRAM_FORMATS):
        for n, (lang, task) in enumerate(itertools.product(PROGRAM_LANGS, PROGRAM_TASKS)):
            rows.append({"id": f"train-code-p{k}{n:04d}", "task": "code", "template": f"code-p{k}",
                         "prompt": fmt.format(lang=lang, task=task)})
    random.Random(seed + 77).shuffle(rows)
    return rows


def training_prompts(seed: int = 0, limit: int | None = None, drills: bool = True):
    """All (format x topic x name) prompts and the copy drills, shuffled deterministically (~13,100). Each row names
    its `template` (task + format), so validation can hold out whole templates; a template keeps its key across topic
    lists."""
    rows = []
    for fams, tag in ((FORMATS, ""), (FORMATS_MORE, "m"), (FORMATS_NEW, "n")):
        for task, formats in fams.items():
            for topics, ttag in ((TOPICS, ""), (TOPICS_MORE, "t")):
                for fi, (fmt, topic) in enumerate(itertools.product(formats, topics)):
                    template = f"{task}-{tag}{fi // len(topics)}"
                    if template in RETIRED:
                        continue
                    name = NAMES[(fi * 7) % len(NAMES)]
                    rows.append({"id": f"train-{task}-{tag}{ttag}{fi:04d}", "task": task, "template": template,
                                 "prompt": fmt.format(topic=topic, name=name)})
    if drills:
        rows += drill_prompts()
    random.Random(seed).shuffle(rows)
    return rows[:limit] if limit else rows


# Echo prompts: the benchmark's gap is its prompts' style, not the corpus's volume (teacher-forced τ 3.22 on held-out
# corpus templates, 2.64 on the benchmark prompts; lab/notes/PERF.md). Here the content is the
# backbone's own earlier continuations (whatever it writes about ~140 topics in ~90 framings) and drill facts, and the
# framing is drawn per prompt from a grammar of labels, layouts, instructions and cues, so no two prompts share a
# template's full text. The template key is the cue (or the rewrite instruction), so the held-out split holds out
# cues the head never saw. Nothing here may reuse a benchmark prompt's label or last line (the test checks both).
ECHO_TASKS = [("summarize", 7), ("rewrite", 6), ("reply", 5), ("list", 1), ("freeform", 1)]  # task, weight
ECHO_LABELS = ["Alert", "Text message", "Push alert", "Update", "Reminder", "Voicemail", "Post", "Memo", "Excerpt",
               "Passage", "News item", "Calendar alert", "App alert", "Bulletin", "Announcement", "Note from {name}",
               "DM from {name}", "{name} wrote", "Forwarded", "Status", "Lock screen", "Inbox preview", "Banner",
               "Thread ({name})", "Paragraph", "From the newsletter", "Group chat ({name})", "Ticket update"]
ECHO_SUMMARY_CUES = ["TL;DR:", "Gist:", "In one line:", "Main point:", "Key takeaway:", "Brief:", "Recap:",
                     "What it says:", "Synopsis:", "Summed up:", "Essentials:", "Quick take:", "Digest:",
                     "Short form:"]
ECHO_SUMMARY_ASKS = ["Summarize this for a phone screen.", "Condense the text below.", "Give the gist of the following.",
                     "What is this about? Answer briefly.", "Boil this down to one sentence.",
                     "Write a notification preview for this."]
# (instruction, cue, damage): damage the text so the instruction has something to fix, as a user's draft would
ECHO_REWRITES = [
    ("Correct the typos", "Clean copy:", "typos"), ("Add the missing punctuation", "Punctuated:", "nopunct"),
    ("Restore the capital letters", "Capitalized:", "lower"), ("Make it sound more professional", "Professional tone:", ""),
    ("Make it warmer", "Warmer:", ""), ("Rewrite it for a five-year-old", "For a child:", ""),
    ("Turn it into a question", "As a question:", ""), ("Make it more concise", "Tighter:", ""),
    ("Rewrite it in the first person", "First person:", ""), ("Put it in the future tense", "Future tense:", ""),
    ("Make it more enthusiastic", "Excited version:", ""), ("Say the same thing another way", "Reworded:", ""),
    ("Remove the slang", "Without slang:", "slang"), ("Make it less blunt", "Softer:", ""),
]
ECHO_REPLY_LABELS = ["Text from {name}", "{name} (9:41 PM)", "Incoming SMS", "New message from {name}", "{name} says",
                     "Chat bubble", "iMessage from {name}", "Comment from {name}", "{name} replied", "Unread ({name})"]
ECHO_REPLY_CUES = ["Quick reply:", "Answer:", "Suggested reply:", "Reply text:", "My response:", "Smart reply:",
                   "You:", "Write back:", "Short answer:", "Respond:", "Reply in one line:"]
ECHO_LIST_CUES = ["Main facts above:\n-", "Action items:\n1)", "Follow-ups:\n*", "What to remember:\n-",
                  "Details, one per line:\n-"]
ECHO_OPENERS = ["From a blog: ", "Transcript: ", "Overheard: ", "Notes: ", "Continued: "]
SLANG = [(" you ", " u "), (" are ", " r "), (" because ", " cuz "), (" going to ", " gonna "), ("ing ", "in' "),
         (" okay", " ok lol"), (" very ", " super "), (" to ", " 2 ")]


def echo_texts(texts):
    """Content for echo prompts: the first one or two sentences of each text (the backbone's continuations), cleaned
    and deduplicated; fragments, code and markup are skipped."""
    import re

    out, seen = [], set()
    for t in texts:
        t = " ".join(t.replace("*", " ").replace("#", " ").split())
        sents = re.split(r"(?<=[.!?])\s+", t)
        for n in (2, 1):
            s = " ".join(sents[:n]).strip()
            if 25 <= len(s) <= 240 and s[-1:] in ".!?" and sum(c.isalpha() or c == " " for c in s) > 0.85 * len(s):
                break
        else:
            continue
        if s.lower() not in seen and not any(k in s for k in ("{", "}", "()", "==", "http", "def ", "<")):
            seen.add(s.lower())
            out.append(s)
    return out


def _damage(rng, s, how):
    if how == "lower":
        return s.lower()
    if how == "nopunct":
        return "".join(c for c in s if c not in ".,!?;:'\"").lower()
    if how == "slang":
        for a, b in rng.sample(SLANG, 4):
            s = s.replace(a, b)
        return s
    if how == "typos":  # swap two letters in a few longer words
        words = s.split()
        for i in rng.sample(range(len(words)), min(3, len(words))):
            w = words[i]
            if len(w) > 4 and w.isalpha():
                j = rng.randrange(1, len(w) - 2)
                words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2:]
        return " ".join(words)
    return s


QUOTES = ['"{}"', "{}", "“{}”", "'{}'"]


def rewrite_layouts(ask, text, cue, q):
    """The three layouts of an echo rewrite prompt (q: a QUOTES style)."""
    return [f"{ask}: {q.format(text)}\n{cue}", f"{ask}.\nText: {text}\n{cue}",
            f"Draft: {text}\nTask: {ask.lower()}.\n{cue}"]


def echo_row(task, key, prompt):
    """An echo-style row: id `train-<task>-e<key>x<hash of the prompt>` (is_echo, template_of read it back)."""
    import hashlib

    h = hashlib.sha1(prompt.encode()).hexdigest()[:10]
    return {"id": f"train-{task}-e{key:02d}x{h}", "task": task, "template": f"{task}-e{key}", "prompt": prompt}


def echo_prompts(texts, n, seed=0):
    """n prompts framing `texts` (echo_texts of the backbone's continuations) and fresh drill facts, ids
    `train-<task>-e<key>x<hash of the prompt>` so a cached row always names the prompt it was distilled from."""
    rng = random.Random(seed + 4242)
    tasks = [t for t, w in ECHO_TASKS for _ in range(w)]
    rows, seen = [], set()
    texts = list(texts) or [drill_facts(rng)]  # a backbone that wrote no clean sentence still gets the drill facts
    for _ in range(20 * n):
        if len(rows) == n:
            break
        task, name = rng.choice(tasks), rng.choice(NAMES + DRILL_PEOPLE)
        text = rng.choice(texts) if rng.random() < 0.75 else drill_facts(rng)
        q = rng.choice(QUOTES)
        if task == "summarize":
            key = rng.randrange(len(ECHO_SUMMARY_CUES))
            cue = ECHO_SUMMARY_CUES[key]
            other = rng.choice(texts)
            if rng.random() < 0.3 and other != text:  # a thread of two messages
                q2 = rng.choice(['"{}"', "“{}”"])
                text, q = f"{q2.format(text)} {q2.format(other)}", "{}"
            label = rng.choice(ECHO_LABELS).format(name=name)
            prompt = rng.choice([f"{label}: {q.format(text)}\n{cue}", f"{label}\n{text}\n\n{cue}",
                                 f"{rng.choice(ECHO_SUMMARY_ASKS)}\n\n{text}\n\n{cue}"])
        elif task == "rewrite":
            key = rng.randrange(len(ECHO_REWRITES))
            ask, cue, how = ECHO_REWRITES[key]
            text = _damage(rng, text, how)
            prompt = rng.choice(rewrite_layouts(ask, text, cue, q))
        elif task == "reply":
            key = rng.randrange(len(ECHO_REPLY_CUES))
            label = rng.choice(ECHO_REPLY_LABELS).format(name=name)
            prompt = rng.choice([f"{label}: {q.format(text)}\n{ECHO_REPLY_CUES[key]}",
                                 f"{label}:\n{text}\n\n{ECHO_REPLY_CUES[key]}"])
        elif task == "list":
            key = rng.randrange(len(ECHO_LIST_CUES))
            prompt = f"{rng.choice(ECHO_LABELS).format(name=name)}: {text}\n\n{ECHO_LIST_CUES[key]}"
        else:
            key = rng.randrange(len(ECHO_OPENERS))
            words = text.split()
            prompt = ECHO_OPENERS[key] + " ".join(words[: max(4, len(words) * 2 // 3)])
        if prompt in seen:
            continue
        seen.add(prompt)
        rows.append(echo_row(task, key, prompt))
    return rows
