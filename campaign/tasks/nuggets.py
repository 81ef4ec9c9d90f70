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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from campaign.aggregate.gold_nuggets import SpanVote, gold_nuggets
from campaign.stage import Stage, _boolean, _integer, opt
from campaign.tasks.base import (
    HitDraft,
    InvalidAnswer,
    Judgment,
    ShownItem,
    answer_fields,
    html_question,
    render_page,
    summarise,
)
from campaign.tasks.kind import CountedJudgment, Export, PlanItem, ReviewedJudgment, StageData, TaskKind
from campaign.untrusted import Refused, loads_json

if TYPE_CHECKING:
    import numpy as np

    from campaign.quality.evidence import Label, TrapResult
    from campaign.simulation import PageForm, SimulatedWorker

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
    """Windows of at most `window` consecutive sentences within each document, in input order.

    `sentences` are (document id, sentence key) in document order. Windows never mix two documents,
    and a document's windows are balanced: as few windows as `window` allows, their sizes differing by
    at most one (longer ones first). So every window of a document longer than `window` holds more than
    half a window (at least 4 of 7): a 9-sentence document is 5+4, not 7+2, and no worker is paid a full
    HIT's reward for one leftover sentence.
    """
    drafts: list[HitDraft] = []
    by_doc: dict[str, list[str]] = {}
    for doc, key in sentences:
        by_doc.setdefault(doc, []).append(key)
    for keys in by_doc.values():
        start = 0
        for size in window_sizes(len(keys), window):
            drafts.append(HitDraft(hit_key=f"{stage}-{len(drafts):05d}", stage=stage, item_keys=tuple(keys[start:start + size])))
            start += size
    return drafts


def window_sizes(n: int, window: int) -> list[int]:
    """Sizes of the fewest windows of at most `window` covering `n` sentences, as equal as they can be."""
    if n <= 0:
        return []
    count = -(-n // window)
    small, extra = divmod(n, count)
    return [small + 1] * extra + [small] * (count - extra)


def page(items: Sequence[ShownItem], topic: str, title: str, min_tokens: int = 3, instructions: str | None = None,
         template: str | None = None) -> str:
    """The HIT's page: every word a clickable token, addressed by (sentence, token)."""
    return render_page("nuggets.html", template, instructions, title=title, topic=topic, items=items,
                       min_tokens=int(min_tokens))


def render(items: Sequence[ShownItem], topic: str, title: str, min_tokens: int = 3) -> str:
    return html_question(page(items, topic, title, min_tokens))


def parse(fields: Sequence[tuple[str, str]], item_keys: Sequence[str], texts: Sequence[str] | None = None,
          min_tokens: int = 3, require_verb: bool = False) -> list[Judgment]:
    """Validate spans against the shown text; one judgment per sentence (value = nuggets in it)."""
    got = answer_fields(fields)
    unknown = sorted(set(got) - {"nuggets", "keywords", "none", "comment"})
    if unknown:
        raise InvalidAnswer(f"unexpected fields: {', '.join(unknown[:5])}")
    raw = (got.get("nuggets") or [""])[-1].strip()
    try:  # bounded depth, finite numbers: never a RecursionError or a bare ValueError from a hostile answer
        spans = loads_json(raw, "nuggets") if raw else []
    except Refused as exc:
        raise InvalidAnswer(f"nuggets is not a JSON list of [sentence, first, last]: {exc}") from None
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
                     extra={"spans": sorted(per_sentence[i]), **({"keywords": keywords} if not spans else {}),
                            **({"tokens": lengths[i]} if lengths is not None else {})})
            for i, key in enumerate(item_keys)]


def boundary_labels(item: str, worker: str, assignment: str, spans: Sequence[Sequence[int]],
                    n_tokens: int | None) -> list[Label]:
    """A worker's spans in one sentence as labels for the review policy: per word position, 1 where one
    of their spans starts (`item#s<i>`) and 1 where one ends (`item#e<i>`), else 0.

    Gold nuggets are spans that several workers chose *exactly*, so agreement on boundaries is what
    a worker's spans are worth. Worker-rest correlation over these labels is high for workers who mark
    the spans others mark (and leave the rest), and low for spans placed at random: a sentence-level
    "marked or not" label misses such workers, whose random spans fall in long sentences as honest ones
    do. `n_tokens` is the sentence's length in words (every position gets a label, 0 included); without
    it, positions up to the last end marked."""
    from campaign.quality.evidence import Label

    starts = {int(sp[0]) for sp in spans}
    ends = {int(sp[1]) for sp in spans}
    n = n_tokens if n_tokens is not None else max(ends, default=-1) + 1
    out = []
    for i in range(n):
        out.append(Label(item=f"{item}#s{i}", worker=worker, assignment=assignment, value=float(i in starts)))
        out.append(Label(item=f"{item}#e{i}", worker=worker, assignment=assignment, value=float(i in ends)))
    return out


def aggregate(values_by_item: Mapping[str, Sequence[float]]) -> list[dict]:
    """Per sentence: the share of workers who marked at least one nugget in it (its importance), with the
    number of workers who saw it. Gold nugget spans are extracted separately."""
    return summarise({k: [1.0 if v > 0 else 0.0 for v in vs] for k, vs in values_by_item.items()})


def gold(counted: Sequence[CountedJudgment], texts: Mapping[str, str], min_workers: int, min_tokens: int,
         seed: int) -> tuple[list[dict], dict[str, float]]:
    """The gold nuggets of a stage (seed 002 §3.4), with MACE competences over token labels.

    Each stored answer holds, per sentence shown, the worker's spans as token offsets, including the
    sentences where they marked nothing, so every (sentence, token) has an explicit 0/1 label from every
    worker who saw it. MACE over those labels says which workers to trust; the gold set is the spans that
    `min_workers` distinct workers selected exactly (>= `min_tokens` tokens, overlaps merged keeping the
    longest), each with its worker count and the summed MACE competence of its workers.
    """
    votes: list[SpanVote] = []
    labels: list[tuple[tuple[str, int], str, int]] = []
    for j in sorted(counted, key=lambda j: (j.item_key, j.worker_id)):
        n_tokens = len(texts.get(j.item_key, "").split())
        marked: set[int] = set()
        for a, b in j.extra.get("spans", []):
            votes.append(SpanVote(hit=(j.hit_key, j.item_key), worker=j.worker_id, start=a, end=b + 1, tokens=b - a + 1))
            marked.update(range(a, b + 1))
        labels.extend(((j.item_key, t), j.worker_id, int(t in marked)) for t in range(n_tokens))
    competence: dict[str, float] = {}
    if labels and len({w for _, w, _ in labels}) > 1:
        # SciPy: imported where it is used, not by every process that knows the task kinds
        from campaign.aggregate.mace import MACE

        competence = MACE(seed=seed, n_restarts=5).fit(labels).competence_
    weights: dict[tuple[Any, int, int], set[Any]] = {}
    for v in votes:
        weights.setdefault((v.hit, v.start, v.end), set()).add(v.worker)
    out = []
    for g in gold_nuggets(votes, min_workers=min_workers, min_tokens=min_tokens):
        hit_key, item = cast(tuple[str, str], g.hit)
        toks = texts.get(item, "").split()
        workers = weights[(g.hit, g.start, g.end)]
        out.append({"hit": hit_key, "item": item, "first": g.start, "last": g.end - 1, "workers": g.workers,
                    "mace_weight": round(sum(competence.get(w, 0.0) for w in workers), 4),
                    "text": " ".join(toks[g.start:g.end])})
    return out, competence


def gold_jsonl(found: Sequence[Mapping[str, object]]) -> str:
    """`gold_nuggets.jsonl`: one gold nugget per line, in the order `gold` gives them."""
    return "".join(json.dumps(g, ensure_ascii=False) + "\n" for g in found)


@dataclass(frozen=True, kw_only=True)
class NuggetStage(Stage):
    """Seed 002 §3: 7 sentences per HIT, 7 workers, $0.07, >=98% approval."""

    needs_input = "documents"
    input_checked_first_only = False
    default_approval_rate = 98

    kind: str = "nuggets"
    items_per_hit: int = 7
    assignments: int = 7
    reward: Decimal = Decimal("0.07")
    title: str = "Mark the important facts in a short text"
    description: str = "Mark the facts, opinions or claims you would put in a summary of a topic."
    window: int = opt(7, _integer(1, 50))
    min_nugget_tokens: int = opt(3, _integer(1))
    require_verb: bool = opt(False, _boolean)
    min_workers: int = opt(3, _integer(1))


def _nuggets(stage: Stage) -> NuggetStage:
    if not isinstance(stage, NuggetStage):
        raise TypeError(f"stage {stage.name!r} is read as {type(stage).__name__}, not NuggetStage")
    return stage


class NuggetKind(TaskKind):
    """Windows of consecutive sentences of one document; spans marked by their first and last word."""

    name = KIND
    stage_type = NuggetStage
    policed = True
    low_agreement_absolute = True  # no traps: agreement is the only evidence against random spans
    replace_excluded = True  # gold needs min_workers on the same span: excluded answers are asked for again
    replace_refused = True  # and rejected ones too
    free_text_extra = ("keywords",)  # the 2-3 words a worker who found no nugget typed

    def plan(self, stage: Stage, items: Sequence[PlanItem], traps: Sequence[str], seed: int) -> list[HitDraft]:
        return plan([(i.doc or "", i.key) for i in items], stage.name, _nuggets(stage).window)

    def page(self, stage: Stage, items: Sequence[ShownItem], topic: str) -> str:
        return page(items, topic, stage.title, min_tokens=_nuggets(stage).min_nugget_tokens,
                    instructions=stage.instructions, template=stage.template)

    def parse(self, stage: Stage, fields: Sequence[tuple[str, str]], items: Sequence[ShownItem]) -> list[Judgment]:
        s = _nuggets(stage)
        return parse(fields, [i.key for i in items], [i.text for i in items], min_tokens=s.min_nugget_tokens,
                     require_verb=s.require_verb)

    def aggregate(self, values_by_item: Mapping[str, Sequence[float]]) -> list[dict]:
        return aggregate(values_by_item)

    def evidence(self, stage: Stage, rows: Sequence[ReviewedJudgment]) -> tuple[list[Label], list[TrapResult]]:
        """Span boundaries per word (`boundary_labels`); nugget HITs carry no traps."""
        labels: list[Label] = []
        for r in rows:
            spans = [sp for sp in r.extra.get("spans", []) if isinstance(sp, list | tuple) and len(sp) == 2
                     and all(isinstance(v, int) for v in sp)]
            n = r.extra.get("tokens")
            labels.extend(boundary_labels(r.item_key, r.worker_id, r.assignment_id, spans,
                                          n if isinstance(n, int) and 0 <= n <= 10_000 else None))
        return labels, []

    def export(self, stage: Stage, data: StageData) -> Export:
        """Per-sentence scores, plus `gold_nuggets.jsonl` and each worker's MACE competence."""
        s = _nuggets(stage)
        found, competence = gold(data.counted(stage.name), data.texts(), s.min_workers, s.min_nugget_tokens, data.seed)
        return Export(rows=data.scores(stage.name),
                      files={"gold_nuggets.jsonl": gold_jsonl(found)},
                      competence=competence, summary=f"{len(found)} gold nuggets")

    def answer_labels(self, value: float, extra: Mapping[str, Any]) -> list[dict[str, Any]]:
        """One row per span the worker marked in the sentence (`first`, `last`: word offsets within it,
        both inclusive, as `gold_nuggets.jsonl` gives them) with label 1; a sentence the worker saw and
        marked nothing in is one row with label 0 and no span, so the export keeps who saw what (the
        "at least k of n workers" rule needs it). Label 1/0 is what the stage's score (the share of
        workers marking a sentence) averages."""
        spans = [sp for sp in extra.get("spans", []) if isinstance(sp, list | tuple) and len(sp) == 2]
        if not spans:
            return [{"label": 0}]
        return [{"label": 1, "first": int(a), "last": int(b)} for a, b in spans]

    def simulate(self, worker: SimulatedWorker, form: PageForm, truth_of: Callable[[str], float],
                 rng: np.random.Generator) -> list[tuple[str, str]]:
        spans = nugget_answer(worker, [s.text for s in form.slots], [truth_of(s.text) for s in form.slots],
                              int(form.data.get("min-tokens", "3")), rng)
        return [("nuggets", json.dumps(spans)), ("keywords", "" if spans else "summary topic")]


def true_nugget(tokens: Sequence[str], min_tokens: int = 3) -> tuple[int, int] | None:
    """The simulation's hidden nugget of a sentence: the sentence without its closing punctuation."""
    end = len(tokens) - 1
    while end >= 0 and all(not ch.isalnum() for ch in tokens[end]):
        end -= 1
    return (0, end) if end + 1 >= min_tokens else None


def nugget_answer(worker: SimulatedWorker, sentences: Sequence[str], truths: Sequence[float], min_tokens: int,
                  rng: np.random.Generator) -> list[list[int]]:
    """Spans [sentence, first, last] a simulated worker marks in a window.

    A sentence of hidden importance p holds one true nugget; a worker marks it with probability
    p ** (1 + noise * 4) (diligent workers find more of the important ones), with a boundary shifted by
    up to one token. Spammers mark random spans of the minimum length or more.
    """
    import numpy as np

    spans: list[list[int]] = []
    for s, (text, p) in enumerate(zip(sentences, truths)):
        toks = text.split()
        if len(toks) < min_tokens:
            continue
        if worker.is_spammer:
            if rng.random() < 0.5:
                a = int(rng.integers(0, len(toks) - min_tokens + 1))
                b = int(rng.integers(a + min_tokens - 1, len(toks)))
                spans.append([s, a, b])
            continue
        nug = true_nugget(toks, min_tokens)
        if nug is None:
            continue
        if rng.random() < float(np.clip(p + worker.bias, 0.0, 1.0)) ** (1 + worker.noise * 4):
            a = int(np.clip(nug[0] + rng.integers(0, 2), 0, len(toks) - 1))
            b = int(np.clip(nug[1] - rng.integers(0, 2), 0, len(toks) - 1))
            if b - a + 1 >= min_tokens:
                spans.append([s, a, b])
    return spans
