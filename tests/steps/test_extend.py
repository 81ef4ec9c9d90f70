"""`campaign extend`'s intent, carried out by the daemon's extend step (`steps.control.apply_extend`).

Before: `campaign extend --hours nan` (or inf, or 1e300) was accepted; the step then raised on every
pass (`datetime.fromtimestamp(nan)`, `int(inf)`), and as the CLI added each new extension to the stored
one, nothing could ever be extended again. An extension past a year from now was refused by the
marketplace on every pass, with an event each time."""

from __future__ import annotations

import pytest
from sqlmodel import select

from campaign.state import Keys
from campaign.steps.control import MAX_EXTEND_HOURS, apply_extend
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.store import EventRow


def _posted(harness):
    h = harness("likert", n_items=10)
    load_items(h.ctx)
    plan_stage(h.ctx, h.ctx.campaign.stages[0])
    post_pending(h.ctx)
    return h


def _expiries(h) -> dict[str, float]:
    return {hit.hit_id: h.ctx.market.get_hit(hit.hit_id).expires_at for hit in h.hits()}


def _events(h, kind: str) -> list[str]:
    with h.ctx.store.session() as s:
        return [e.message for e in s.exec(select(EventRow).where(EventRow.campaign == h.ctx.name, EventRow.kind == kind))]


def test_an_extension_moves_every_open_hit_once(harness) -> None:
    h = _posted(harness)
    before = _expiries(h)
    h.ctx.store.set_kv(h.ctx.name, Keys.EXTEND_HOURS, "2.5")
    apply_extend(h.ctx)
    after = _expiries(h)
    assert before and all(after[k] == pytest.approx(before[k] + 9000, abs=1) for k in before)
    assert h.ctx.store.get_kv(h.ctx.name, Keys.EXTEND_HOURS, "") == "0"
    apply_extend(h.ctx)  # nothing pending: nothing moves
    assert _expiries(h) == after
    assert _events(h, "extended") == [f"{len(before)} open HITs extended by 2.5 h"]


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "1e300", "-3", "three"])
def test_an_intent_that_is_no_number_of_hours_is_dropped_with_one_event(harness, raw) -> None:
    h = _posted(harness)
    before = _expiries(h)
    h.ctx.store.set_kv(h.ctx.name, Keys.EXTEND_HOURS, raw)
    for _ in range(3):
        apply_extend(h.ctx)  # raised before, on every pass
    assert _expiries(h) == before
    assert len(_events(h, "extend_error")) == 1 and not _events(h, "extended")
    h.ctx.store.set_kv(h.ctx.name, Keys.EXTEND_HOURS, "1")  # a later extension works again
    apply_extend(h.ctx)
    assert all(_expiries(h)[k] == pytest.approx(before[k] + 3600, abs=1) for k in before)


def test_an_extension_past_a_year_is_capped_not_refused_every_pass(harness) -> None:
    h = _posted(harness)
    now = h.ctx.clock.now()
    h.ctx.store.set_kv(h.ctx.name, Keys.EXTEND_HOURS, str(MAX_EXTEND_HOURS))  # on top of each HIT's own lifetime
    apply_extend(h.ctx)
    after = _expiries(h)
    assert all(v == pytest.approx(now + MAX_EXTEND_HOURS * 3600, abs=1) for v in after.values())
    assert not _events(h, "extend_error")
    assert "capped at 8760 h from now" in _events(h, "extended")[0]


def test_a_hit_the_marketplace_refuses_is_named_and_the_others_are_extended(harness) -> None:
    h = _posted(harness)
    hits = h.hits()
    now = h.ctx.clock.now()
    for hit in hits[1:]:
        h.ctx.market.extend_hit(hit.hit_id, now + 300 * 86400)
    h.ctx.market.expire_hit(hits[0].hit_id, now)
    h.clock.advance(200 * 86400)  # long expired: "too old to be extended"; the others have not expired yet
    before = _expiries(h)
    h.ctx.store.set_kv(h.ctx.name, Keys.EXTEND_HOURS, "1")
    apply_extend(h.ctx)
    errors = _events(h, "extend_error")
    after = _expiries(h)
    refused = [k for k in before if after[k] == before[k]]
    assert refused == [hits[0].hit_id] and len(errors) == 1 and hits[0].hit_key in errors[0]
    assert h.ctx.store.get_kv(h.ctx.name, Keys.EXTEND_HOURS, "") == "0"
    apply_extend(h.ctx)
    assert len(_events(h, "extend_error")) == 1  # not again on the next pass


def test_the_command_refuses_what_the_step_could_not_carry_out(harness, tmp_path, capsys) -> None:
    from tests.support.cli import cli

    h = _posted(harness)
    state = str(tmp_path / "state")
    for bad in ("nan", "inf", "1e300", "0", "-1", "8761"):
        assert cli("extend", h.ctx.name, "--hours", bad, "--state", state) == 2, bad
        assert "must be above 0 and at most 8760" in capsys.readouterr().err
    assert h.ctx.store.get_kv(h.ctx.name, Keys.EXTEND_HOURS, "0") in ("0", "")
    assert cli("extend", h.ctx.name, "--hours", "8000", "--state", state) == 0
    assert cli("extend", h.ctx.name, "--hours", "800", "--state", state) == 2  # 8,800 h in all
    assert "8000 h are already asked for" in capsys.readouterr().err
    assert h.ctx.store.get_kv(h.ctx.name, Keys.EXTEND_HOURS, "") == "8000.0"
    h.ctx.store.set_kv(h.ctx.name, Keys.EXTEND_HOURS, "0")
    from campaign.store import CampaignRow

    with h.ctx.store.session() as s:
        row = s.get(CampaignRow, h.ctx.name)
        row.status = "finished"
        s.add(row)
    assert cli("extend", h.ctx.name, "--hours", "1", "--state", state) == 2
    assert "is finished; it has no open HITs to extend" in capsys.readouterr().err


def _flaky(h, fail_at: int, then=None):
    """Make the marketplace's extend call fail with a passing error at its `fail_at`-th call (once), and
    run `then()` just before its `fail_at`-th call instead when given."""
    from campaign.marketplaces.base import TransientError

    real, calls = h.ctx.market.extend_hit, {"n": 0}

    def extend_hit(hit_id, expire_at):
        calls["n"] += 1
        if calls["n"] == fail_at:
            if then is None:
                raise TransientError("Rate exceeded (throttled)")
            then()
        return real(hit_id, expire_at)

    h.ctx.market.extend_hit = extend_hit
    return calls


def test_a_throttled_extension_resumes_where_it_stopped_and_extends_each_hit_once(harness) -> None:
    """Before: a passing failure at the second HIT left the intent for the next pass, which extended the
    first HIT again from its new expiry (by 2 h instead of 1); a marketplace throttling a long extension
    moved its first HITs once per retry."""
    h = _posted(harness)
    before = _expiries(h)
    assert len(before) >= 2
    _flaky(h, fail_at=2)
    h.ctx.store.set_kv(h.ctx.name, Keys.EXTEND_HOURS, "1")
    apply_extend(h.ctx)
    assert len(_events(h, "extend_error")) == 1 and not _events(h, "extended")
    apply_extend(h.ctx)
    after = _expiries(h)
    assert {k: round(after[k] - before[k]) for k in before} == {k: 3600 for k in before}
    assert h.ctx.store.get_kv(h.ctx.name, Keys.EXTEND_HOURS, "") == "0"
    n = len(before) - 1
    assert _events(h, "extended") == [f"{n} open HIT{'' if n == 1 else 's'} extended by 1 h (1 more on an earlier pass)"]
    apply_extend(h.ctx)  # nothing left to do
    assert _expiries(h) == after


def test_hours_asked_for_while_an_extension_is_carried_out_are_not_lost(harness, tmp_path, capsys) -> None:
    """Before: `campaign extend` while the daemon was extending (one remote call per HIT) added to the
    stored intent, and the daemon then wrote 0 over it: the command said the HITs would be extended, and
    they never were."""
    from tests.support.cli import cli

    h = _posted(harness)
    before = _expiries(h)
    state = str(tmp_path / "state")
    _flaky(h, fail_at=2, then=lambda: cli("extend", h.ctx.name, "--hours", "2", "--state", state))
    h.ctx.store.set_kv(h.ctx.name, Keys.EXTEND_HOURS, "1")
    apply_extend(h.ctx)
    assert float(h.ctx.store.get_kv(h.ctx.name, Keys.EXTEND_HOURS, "") or 0) == 2.0
    apply_extend(h.ctx)
    after = _expiries(h)
    assert {k: round(after[k] - before[k]) for k in before} == {k: 3 * 3600 for k in before}
    assert float(h.ctx.store.get_kv(h.ctx.name, Keys.EXTEND_HOURS, "") or 0) == 0.0


def test_a_dropped_intent_takes_its_cursor_with_it(harness) -> None:
    """A cursor left by a pass cut short belongs to that intent: once the intent is dropped (written by
    hand as no number of hours), a later extension moves every HIT, not only those past the cursor."""
    h = _posted(harness)
    before = _expiries(h)
    _flaky(h, fail_at=2)
    h.ctx.store.set_kv(h.ctx.name, Keys.EXTEND_HOURS, "5")
    apply_extend(h.ctx)  # the first HIT moved 5 h, then throttled: the cursor stands
    assert h.ctx.store.get_kv(h.ctx.name, Keys.EXTEND_CURSOR, "")
    h.ctx.store.set_kv(h.ctx.name, Keys.EXTEND_HOURS, "nonsense")
    apply_extend(h.ctx)
    assert h.ctx.store.get_kv(h.ctx.name, Keys.EXTEND_CURSOR, "") == ""
    h.ctx.store.set_kv(h.ctx.name, Keys.EXTEND_HOURS, "1")
    apply_extend(h.ctx)
    moved = {k: round(_expiries(h)[k] - before[k]) for k in before}
    first = next(iter(before))
    assert moved == {k: (6 if k == first else 1) * 3600 for k in before}, moved
