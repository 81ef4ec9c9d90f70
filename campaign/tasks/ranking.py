"""The ranking task (seed 000 §4.3): five propositions per HIT put in order of importance by drag and
drop (or the keyboard); an answer must be a full permutation of the items shown, and each ranking
yields its ten pairwise comparisons.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from campaign.tasks.base import (
    InvalidAnswer,
    Judgment,
    ShownItem,
    answer_fields,
    esc,
    html_question,
    render_template,
    single,
)

KIND = "ranking"


def render(items: Sequence[ShownItem], topic: str, title: str) -> str:
    rows = []
    for i, item in enumerate(items):
        rows.append(
            f'<li data-slot="{i}" draggable="true" tabindex="0"><span class="statement">{esc(item.text)}</span>'
            '<span class="moves"><button type="button" class="up" aria-label="move up">&#8593;</button>'
            '<button type="button" class="down" aria-label="move down">&#8595;</button></span></li>'
        )
    page = render_template("ranking.html", title=esc(title), topic=esc(topic), rows="\n".join(rows),
                           initial_order=",".join(str(i) for i in range(len(items))))
    return html_question(page)


def parse(fields: Sequence[tuple[str, str]], item_keys: Sequence[str]) -> list[Judgment]:
    """The order (most important first) as one judgment per item: value = position, 1 = most important."""
    got = answer_fields(fields)
    unknown = sorted(set(got) - {"order", "comment"})
    if unknown:
        raise InvalidAnswer(f"unexpected fields: {', '.join(unknown[:5])}")
    raw = single(got, "order").strip()
    parts = [p.strip() for p in raw.split(",")] if raw else []
    n = len(item_keys)
    if not all(p.isdigit() for p in parts) or sorted(int(p) for p in parts) != list(range(n)):
        raise InvalidAnswer(f"order must be a permutation of the {n} items shown, got {raw[:40]!r}")
    return [Judgment(item_key=item_keys[int(slot)], value=float(pos)) for pos, slot in enumerate(parts, start=1)]


def pairs(judgments: Sequence[Judgment]) -> list[tuple[str, str]]:
    """The (winner, loser) comparisons one ranking implies: n(n-1)/2 of them, ten for five items."""
    ordered = [j.item_key for j in sorted(judgments, key=lambda j: j.value)]
    return [(a, b) for a, b in combinations(ordered, 2)]
