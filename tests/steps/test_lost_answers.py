"""Every pipeline step against a marketplace that loses a third of its answers: each call is carried out,
then answered with a ServiceFault all the same (`FaultConfig.lost_rate`), so the client cannot tell an
approval, a HIT or a bonus that went through from one that did not, and a retry meets what the first call
did. The campaign still finishes, and the books agree with the marketplace: every approved assignment
charged once, nothing else charged, the account's spending equal to the ledger's."""

from __future__ import annotations

from decimal import Decimal

from sqlmodel import select

from campaign.ledger import totals
from campaign.store import AssignmentRow, LedgerRow


def test_a_marketplace_that_loses_answers_neither_stalls_the_campaign_nor_pays_twice(harness, rate) -> None:
    h = harness("likert", n_items=10)
    balance = Decimal(h.ctx.market.balance())
    h.market.set_faults(lost_rate=0.34, seed=7)
    hits = h.answer_all_reviewed(workers=3)
    h.tick_until_finished(passes=80)
    lost = h.market.core.faults.lost
    h.market.set_faults(lost_rate=0.0)
    assert lost >= 10, f"only {lost} answers were lost: the test tried nothing"
    assert h.status() == "finished"
    client = h.ctx.market.client
    remote: dict[str, str] = {}
    for hit in hits:
        for a in client.paginate("list_assignments_for_hit", "Assignments", HITId=hit.hit_id,
                                 AssignmentStatuses=["Submitted", "Approved", "Rejected"]):
            remote[a["AssignmentId"]] = a["AssignmentStatus"]
    with h.ctx.store.session() as s:
        local = {a.assignment_id: a.status for a in s.exec(select(AssignmentRow)).all()}
        charges = [e.assignment_id for e in s.exec(select(LedgerRow).where(LedgerRow.kind == "charge")).all()]
        t = totals(s, h.ctx.name, h.ctx.campaign.budget)
    assert len(remote) == 3 * len(hits) and set(local) == set(remote), "an answer was lost or invented"
    approved = sorted(aid for aid, st in remote.items() if st == "Approved")
    assert approved and sorted(charges) == approved, "an approval was booked twice, or one not made"
    assert all(local[aid] == st.lower() for aid, st in remote.items())
    assert t.reserved == 0
    assert balance - Decimal(h.ctx.market.balance()) == t.spent, "the ledger and the marketplace disagree"
