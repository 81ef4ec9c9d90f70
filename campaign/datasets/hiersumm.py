"""Seed 002's released raw crowd nuggets (hiersumm-amt), with the HITs rebuilt.

The release keeps only `md5(worker) TAB span text`, grouped by HIT but without HIT ids, sentence ids,
offsets, or a row for workers who marked nothing. The HITs are rebuilt as in the data's SOURCE.md:
HIT k shows sentences 7k..7k+6 of the topic; each span is found in the HITs by a substring match on
lower-cased alphanumerics, and a span found in several HITs goes to the HIT of its neighbouring rows.
What the release lost cannot be rebuilt: who saw a HIT and marked nothing.
"""

from __future__ import annotations

import bisect
import html
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from campaign.paths import require_shared_data

WINDOW = 7
_NORM = re.compile(r"[^a-z0-9]")


def norm(text: str) -> str:
    return _NORM.sub("", text.lower())


@dataclass
class Hit:
    topic: str
    index: int
    sentences: list[str]
    tokens: list[str] = field(default_factory=list)  # whitespace tokens of the 7 sentences, in order
    norm_text: str = ""
    char_token: list[int] = field(default_factory=list)  # token index of each normalized character
    token_sentence: list[int] = field(default_factory=list)  # topic-wide sentenceID of each token
    sentence_start: dict[int, int] = field(default_factory=dict)  # sentenceID -> index of its first token


@dataclass(frozen=True)
class Span:
    topic: str
    hit: int
    worker: str
    first: int  # token offsets within the HIT, inclusive
    last: int
    char_start: int  # offsets in the HIT's normalized text
    char_end: int
    text: str
    ptb_tokens: int
    sentence: int = -1  # topic-wide sentenceID where the span starts
    sentence_first: int = -1  # token offset of its first token within that sentence


def _sentences(path: Path) -> list[str]:
    root = ET.parse(path).getroot()
    rows = []
    for s in root.iter("s"):
        content = s.findtext("content") or ""
        for _ in range(2):  # sometimes escaped twice (&amp;amp;)
            content = html.unescape(content)
        rows.append((int(s.get("sentenceID", "-1")), content))
    rows.sort()
    return [c for _, c in rows]


def build_hits(topic: str, sentences: list[str]) -> list[Hit]:
    hits = []
    for k in range(0, len(sentences), WINDOW):
        h = Hit(topic=topic, index=k // WINDOW, sentences=sentences[k:k + WINDOW])
        for sid, sent in enumerate(h.sentences, start=k):
            h.sentence_start[sid] = len(h.tokens)
            for tok in sent.split():
                h.token_sentence.append(sid)
                n = norm(tok)
                h.norm_text += n
                h.char_token.extend([len(h.tokens)] * len(n))
                h.tokens.append(tok)
        hits.append(h)
    return hits


def _rows(path: Path) -> list[tuple[str, str]]:
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        worker, sep, text = line.partition("\t")
        if not sep or not text.strip():
            continue  # the few broken rows (SOURCE.md: topic 1042)
        text = text.strip()
        if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
            text = text[1:-1]
        rows.append((worker.strip(), text))
    return rows


def load_topic(topic: str) -> tuple[list[Hit], list[Span], int]:
    """HITs, the spans placed in them, and how many rows could not be placed."""
    base = require_shared_data("hiersumm-amt")
    hits = build_hits(topic, _sentences(base / "SourceDocuments" / f"HierarchicalSum_{topic}.xml"))
    big = "".join(h.norm_text for h in hits)
    starts = [0]
    for h in hits:
        starts.append(starts[-1] + len(h.norm_text))
    rows = _rows(base / "AMTAllNuggets" / f"{topic}.csv")
    candidates: list[list[tuple[int, int]]] = []  # per row: (hit, offset in hit)
    for _, text in rows:
        n = norm(text)
        found = []
        if n:
            pos = big.find(n)
            while pos != -1:
                k = bisect.bisect_right(starts, pos) - 1
                if pos + len(n) <= starts[k + 1]:  # not across a HIT boundary
                    found.append((k, pos - starts[k]))
                pos = big.find(n, pos + 1)
        candidates.append(found)
    spans, lost = [], 0
    chosen: list[int | None] = [None] * len(rows)
    for i, found in enumerate(candidates):
        hit_ids = sorted({k for k, _ in found})
        if len(hit_ids) == 1:
            chosen[i] = hit_ids[0]
    for i, found in enumerate(candidates):  # ambiguous rows follow their neighbours
        if chosen[i] is not None or not found:
            continue
        nearby = {k for k, _ in found}
        for j in (i - 1, i + 1, i - 2, i + 2):
            if 0 <= j < len(rows) and chosen[j] in nearby:
                chosen[i] = chosen[j]
                break
        else:
            chosen[i] = min(nearby)
    for i, ((worker, text), found) in enumerate(zip(rows, candidates)):
        if chosen[i] is None:
            lost += 1
            continue
        hit_k = chosen[i]
        assert hit_k is not None
        offset = min(o for kk, o in found if kk == hit_k)
        h = hits[hit_k]
        end = offset + len(norm(text))
        spans.append(Span(topic=topic, hit=hit_k, worker=worker, first=h.char_token[offset], last=h.char_token[end - 1],
                          char_start=offset, char_end=end, text=text, ptb_tokens=len(text.split()),
                          sentence=h.token_sentence[h.char_token[offset]],
                          sentence_first=h.char_token[offset] - h.sentence_start[h.token_sentence[h.char_token[offset]]]))
    return hits, spans, lost


def topics() -> list[str]:
    base = require_shared_data("hiersumm-amt")
    return sorted(p.stem for p in (base / "AMTAllNuggets").glob("*.csv"))


def published_gold(topic: str) -> list[str]:
    base = require_shared_data("hiersumm-amt")
    out = []
    for line in (base / "GoldNuggets" / f"{topic}.txt").read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[1].strip():
            out.append(parts[1])
    return out
