"""A task kind defined here alone (a yes/no question per statement), registered, and run end to end
through the daemon, the built-in marketplace and the simulated crowd: the kind interface is all a new
kind needs, its own stage type coming with it (`TaskKind.stage_type`)."""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pytest
from sqlmodel import select

from campaign import tasks
from campaign.simulation import PageForm, SimulatedWorker
from campaign.stage import Stage
from campaign.store import AssignmentRow, CampaignRow, HitRow, Store
from campaign.tasks.base import HitDraft, InvalidAnswer, Judgment, ShownItem, answer_fields, render_source, single
from campaign.tasks.kind import PlanItem, TaskKind
from tests.support.paths import WATER
from tests.support.specs import campaign, first_propositions, run_in_process, simulated

PAGE = """<!DOCTYPE html>
<html><body><h1>{{ title }}</h1><p>{{ topic }}</p>
<form method="post" action="https://www.mturk.com/mturk/externalSubmit" data-task="yesno">
<input type="hidden" name="assignmentId" value="">
{% for item in items %}<fieldset data-slot="{{ loop.index0 }}"><p class="statement">{{ item.text }}</p>
<label><input type="radio" name="answer-{{ loop.index0 }}" value="yes"> yes</label>
<label><input type="radio" name="answer-{{ loop.index0 }}" value="no"> no</label></fieldset>
{% endfor %}<button type="submit">Submit</button></form></body></html>
"""


@dataclass(frozen=True, kw_only=True)
class YesNoStage(Stage):
    """The kind's stage options: its defaults (it adds no fields of its own)."""

    needs_input = "propositions"

    kind: str = "yesno"
    items_per_hit: int = 4
    assignments: int = 3
    reward: Decimal = Decimal("0.03")
    title: str = "Would you put this in a summary?"
    description: str = "Answer yes or no for each statement."


class YesNo(TaskKind):
    """Would this statement belong in a summary? One yes/no per statement; score = share of yes."""

    name = "yesno"
    stage_type = YesNoStage

    def plan(self, stage: Stage, items: Sequence[PlanItem], traps: Sequence[str], seed: int) -> list[HitDraft]:
        keys = [i.key for i in items]
        size = stage.items_per_hit
        return [HitDraft(hit_key=f"{stage.name}-{n:04d}", stage=stage.name, item_keys=tuple(keys[i:i + size]))
                for n, i in enumerate(range(0, len(keys), size))]

    def page(self, stage: Stage, items: Sequence[ShownItem], topic: str) -> str:
        return render_source(PAGE, title=stage.title, topic=topic, items=items)

    def parse(self, stage: Stage, fields: Sequence[tuple[str, str]], items: Sequence[ShownItem]) -> list[Judgment]:
        got = answer_fields(fields)
        out = []
        for i, item in enumerate(items):
            value = single(got, f"answer-{i}")
            if value not in ("yes", "no"):
                raise InvalidAnswer(f"answer-{i} must be yes or no")
            out.append(Judgment(item_key=item.key, value=1.0 if value == "yes" else 0.0))
        return out

    def simulate(self, worker: SimulatedWorker, form: PageForm, truth_of: Callable[[str], float],
                 rng: np.random.Generator) -> list[tuple[str, str]]:
        return [(s.radio_name, "yes" if truth_of(s.text) + rng.normal(0, worker.noise) > 0.5 else "no")
                for s in form.slots if s.radio_name]


@pytest.fixture
def yesno():
    with tasks.registered(YesNo()) as kind:
        yield kind
    assert "yesno" not in tasks.names()  # dropped again: other tests list the known kinds


@pytest.mark.slow
def test_a_kind_defined_in_a_test_runs_a_campaign_to_finished(tmp_path, yesno):
    props = first_propositions(tmp_path, 16)
    code, state = run_in_process(tmp_path, campaign("yes-no", task={"kind": "yesno", "items_per_hit": 4, "assignments": 3}, budget="20.00",
                                                    propositions=props, crowd=simulated(12, speed=3600, arrival_span="10m")),
                                 seed=1, max_seconds=120)
    assert code == 0

    store = Store.open(state)
    with store.session() as s:
        assert s.get(CampaignRow, "yes-no").status == "finished"
        hits = s.exec(select(HitRow).where(HitRow.campaign == "yes-no")).all()
        answers = s.exec(select(AssignmentRow).where(AssignmentRow.campaign == "yes-no")).all()
    store.close()
    assert len(hits) == 4 and all(h.status == "closed" for h in hits)
    assert sum(a.status == "approved" for a in answers) == 12 and all(a.valid for a in answers)
    with open(state / "yes-no" / "scores.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 16 and all(0.0 <= float(r["score"]) <= 1.0 and r["n"] == "3" for r in rows)
    # the crowd answered from the hidden truth: the statements it calls important score higher
    truth = {line.split("\t")[0]: line.split("\t")[1] for line in (WATER / "truth.tsv").read_text().splitlines()[1:]}
    scores = [float(r["score"]) for r in rows]
    truths = [float(truth[r["item"]]) for r in rows]
    assert np.corrcoef(scores, truths)[0, 1] > 0.3


def test_registering_a_taken_name_is_refused(yesno):
    with pytest.raises(ValueError):
        tasks.register(YesNo())
    assert tasks.get("yesno") is yesno
    with pytest.raises(KeyError, match="not registered"):
        tasks.get("no-such-kind")
