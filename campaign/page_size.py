"""Whether each stage's HIT pages fit the marketplace: MTurk (and the built-in marketplace, which the
Prolific task site posts to) refuses a HIT whose question is over 65,535 bytes.

Why before the run: one proposition of 2 MB passed `campaign validate`, and the run then failed to post
its HIT (`post_failed: ValidationException ... length less than or equal to 65535`) and ended
`finished` with none of it posted. The check renders, per stage, the one HIT page that is largest: of
the first stage, the planned HIT whose items' texts are longest; of a later stage (its items are chosen
from the answers to an earlier one), a HIT of the longest items it could be given. One render a stage,
so it costs nothing at the seed's scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from campaign.estimate import stage_groups, trap_keys
from campaign.market.protocol import QUESTION_MAX
from campaign.spec import Campaign, Stage
from campaign.tasks import get as get_kind
from campaign.tasks.base import ShownItem, html_question
from campaign.tasks.kind import PlanItem


def _size(text: str) -> int:
    return len(escape(text).encode("utf-8"))


def largest_page(campaign: Campaign, stage: Stage, items: Sequence[PlanItem], texts: dict[str, str], first: bool,
                 seed: int = 0) -> tuple[int, tuple[str, ...]]:
    """(bytes of the stage's largest HIT question, its item keys)."""
    groups, _ = stage_groups(campaign, stage, items, seed)
    if not groups:
        return 0, ()
    if first:
        group = max(groups, key=lambda g: sum(_size(texts.get(k, "")) for k in g))
    else:
        width = max(len(g) for g in groups)
        group = tuple(sorted(texts, key=lambda k: -_size(texts[k]))[:width])
    shown = tuple(ShownItem(key=k, text=texts.get(k, "")) for k in group)
    page = get_kind(stage.kind).page(stage, shown, campaign.topic)
    return len(html_question(page).encode("utf-8")), group


def oversized(campaign: Campaign, items: Sequence[PlanItem], seed: int = 0) -> list[str]:
    """One problem per stage whose largest HIT page is over the marketplace's limit, naming the longest
    item of that page."""
    texts = {it.key: it.text for it in items}
    for stage in campaign.stages:
        texts.update(zip(trap_keys(stage), stage.traps.texts))
    problems = []
    for n, stage in enumerate(campaign.stages):
        size, group = largest_page(campaign, stage, items, texts, first=n == 0, seed=seed)
        if size > QUESTION_MAX:
            longest = max(group, key=lambda k: len(texts.get(k, "")))
            problems.append(f"campaign {campaign.name}: stage {stage.name}: a HIT page would be {size:,} bytes; the "
                            f"marketplace takes at most {QUESTION_MAX:,} (its longest item, {longest}, has "
                            f"{len(texts.get(longest, '')):,} characters): shorten the longest items or show fewer a HIT")
    return problems
