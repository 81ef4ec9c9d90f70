"""The nugget task (seed 002 §3): seven consecutive sentences of one document; the worker marks each
fact, opinion, hypothesis or claim worth a summary by clicking its first and last word. A nugget has at
least `min_tokens` words, stays within one sentence and (if the spec asks) contains a verb; a worker who
finds none gives 2-3 keywords instead.

Every answer becomes one judgment per sentence shown, including the sentences where the worker marked
nothing (value 0): the released data of seed 002 lost exactly this, and with it the count of workers
who saw a sentence, which the "at least 3 of 7 workers" gold rule needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from campaign.tasks.base import (
    HitDraft,
    InvalidAnswer,
    Judgment,
    ShownItem,
    answer_fields,
    esc,
    html_question,
    render_template,
    summarise,
)

KIND = "nuggets"
_WORD = re.compile(r"[A-Za-z]")
# A verb check without a tagger model (none can be downloaded here): auxiliaries, modals and frequent
# verbs, plus inflection suffixes. It errs on the side of accepting; it is a nudge, not a parser.
_VERBS = set("""
am is are was were be been being have has had having do does did done doing will would shall should can could may
might must need needs get gets got make makes made take takes took say says said go goes went know knows knew think
thinks thought see sees saw come comes came want wants give gives gave use uses used find finds found tell tells told
work works seem seems feel feels try tries tried leave leaves left call calls help helps keep keeps let lets cause
causes caused show shows showed mean means meant become becomes became provide provides include includes includes
allow allows lead leads led ban bans banned cost costs reduce reduces increase increases believe believes
""".split())
_VERB_SUFFIX = re.compile(r"(ed|ing|ize|ise|ify)$", re.IGNORECASE)


def tokens(text: str) -> list[str]:
    """Whitespace tokens: what the worker clicks, and what offsets count."""
    return text.split()


def has_verb(words: Sequence[str]) -> bool:
    for w in words:
        lw = w.lower().strip(".,;:!?\"'()")
        if lw in _VERBS or lw.endswith("n't") or (len(lw) > 4 and _VERB_SUFFIX.search(lw)):
            return True
    return False


def plan(sentences: Sequence[tuple[str, str]], stage: str, window: int = 7) -> list[HitDraft]:
    """Windows of `window` consecutive sentences within each document, in input order.

    `sentences` are (document id, sentence key) in document order; a document's last window may be
    shorter rather than mixing two documents in one HIT.
    """
    drafts: list[HitDraft] = []
    by_doc: dict[str, list[str]] = {}
    for doc, key in sentences:
        by_doc.setdefault(doc, []).append(key)
    for keys in by_doc.values():
        for i in range(0, len(keys), window):
            drafts.append(HitDraft(hit_key=f"{stage}-{len(drafts):05d}", stage=stage, item_keys=tuple(keys[i:i + window])))
    return drafts


def render(items: Sequence[ShownItem], topic: str, title: str, min_tokens: int = 3) -> str:
    rows = []
    for s, item in enumerate(items):
        toks = "".join(f'<span class="tok" tabindex="0" data-s="{s}" data-t="{t}">{esc(w)}</span> '
                       for t, w in enumerate(tokens(item.text)))
        rows.append(f'<p class="sentence" data-slot="{s}">{toks}</p>')
    page = render_template("nuggets.html", title=esc(title), topic=esc(topic), rows="\n".join(rows),
                           min_tokens=str(int(min_tokens)))
    return html_question(page)


def parse(fields: Sequence[tuple[str, str]], item_keys: Sequence[str], texts: Sequence[str] | None = None,
          min_tokens: int = 3, require_verb: bool = False) -> list[Judgment]:
    """Validate spans against the shown text; one judgment per sentence (value = nuggets in it)."""
    got = answer_fields(fields)
    unknown = sorted(set(got) - {"nuggets", "keywords", "none", "comment"})
    if unknown:
        raise InvalidAnswer(f"unexpected fields: {', '.join(unknown[:5])}")
    raw = (got.get("nuggets") or [""])[-1].strip()
    try:
        spans = json.loads(raw) if raw else []
    except json.JSONDecodeError:
        raise InvalidAnswer("nuggets is not a JSON list of [sentence, first, last]") from None
    if not isinstance(spans, list):
        raise InvalidAnswer("nuggets is not a list")
    lengths = [len(tokens(t)) for t in texts] if texts is not None else None
    per_sentence: dict[int, list[list[int]]] = {i: [] for i in range(len(item_keys))}
    for sp in spans:
        if not (isinstance(sp, list) and len(sp) == 3 and all(isinstance(v, int) and not isinstance(v, bool) for v in sp)):
            raise InvalidAnswer(f"a nugget must be [sentence, first, last] integers, got {str(sp)[:40]}")
        s, a, b = sp
        if not 0 <= s < len(item_keys):
            raise InvalidAnswer(f"nugget in sentence {s}, but only {len(item_keys)} were shown")
        if a < 0 or b < a or (lengths is not None and b >= lengths[s]):
            raise InvalidAnswer(f"nugget [{s}, {a}, {b}] is outside the sentence")
        if b - a + 1 < min_tokens:
            raise InvalidAnswer(f"nugget [{s}, {a}, {b}] is shorter than {min_tokens} words")
        if require_verb and texts is not None and not has_verb(tokens(texts[s])[a:b + 1]):
            raise InvalidAnswer(f"nugget [{s}, {a}, {b}] has no verb")
        if [a, b] not in per_sentence[s]:
            per_sentence[s].append([a, b])
    keywords = [k for k in re.split(r"[,;\s]+", (got.get("keywords") or [""])[-1]) if k]
    if not spans and not 2 <= len(keywords) <= 3:
        raise InvalidAnswer("no nugget marked, and not 2-3 keywords either")
    return [Judgment(item_key=key, value=float(len(per_sentence[i])),
                     extra={"spans": sorted(per_sentence[i]), **({"keywords": keywords} if not spans else {})})
            for i, key in enumerate(item_keys)]


def aggregate(values_by_item: dict[str, Sequence[float]]) -> list[dict]:
    """Per sentence: the share of workers who marked at least one nugget in it (its importance), with the
    number of workers who saw it. Gold nugget spans are extracted separately."""
    return summarise({k: [1.0 if v > 0 else 0.0 for v in vs] for k, vs in values_by_item.items()})
