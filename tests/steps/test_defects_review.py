"""Review's read-back after an `InvalidState` answer can itself be throttled: the assignment stays
`approving` and is retried on the next tick instead of the step raising."""

from __future__ import annotations

from sqlmodel import select

from campaign.marketplaces.base import InvalidState, TransientError
from campaign.steps.collect import collect
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.steps.review import review
from campaign.store import AssignmentRow, EventRow


class Throttled:
    """The real marketplace, except that approving says InvalidState and reading the assignment back is throttled."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.read_backs = 0

    def approve(self, assignment_id: str, feedback: str | None = None) -> None:
        raise InvalidState("This operation can be called with a status of: Submitted", code="RequestError")

    def get_assignment(self, assignment_id: str):  # type: ignore[no-untyped-def]
        self.read_backs += 1
        raise TransientError("Rate exceeded", code="ThrottlingException", throttled=True)

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)


def test_throttled_read_back_is_retried_next_tick(harness, rate):
    h = harness()
    load_items(h.ctx)
    plan_stage(h.ctx, h.ctx.campaign.stages[0])
    post_pending(h.ctx)
    hit = h.hits()[0]
    aid = h.work("AWORKER0000001", hit.hit_id, rate(3))
    collect(h.ctx)
    with h.ctx.store.session() as s:  # the daemon died after deciding and calling: the row says approving
        row = s.get(AssignmentRow, aid)
        row.status = "approving"
        s.add(row)
    real = h.ctx.market
    fake = Throttled(real)
    h.ctx.market = fake  # type: ignore[assignment]
    assert review(h.ctx) == 0  # raised TransientError before the fix
    assert fake.read_backs == 1
    with h.ctx.store.session() as s:
        assert s.get(AssignmentRow, aid).status == "approving"  # left for the next tick
        kinds = [e.kind for e in s.exec(select(EventRow).where(EventRow.campaign == h.ctx.name)).all()]
    assert "throttled" in kinds
    h.ctx.market = real  # the next tick: the approval goes through
    assert review(h.ctx) == 1
    with h.ctx.store.session() as s:
        assert s.get(AssignmentRow, aid).status == "approved"
