"""A simulation's seeded ids: one numbered stream per scope, so a campaign's ids (and with them every
order that ids decide) depend on its own history only, not on what other campaigns of the run drew."""

from __future__ import annotations

from campaign import ids
from campaign.market.engine.base import new_id


def _draws(seed: int, plan: list[str]) -> dict[str, list[bytes]]:
    """Draw one id per entry of `plan` (its scope), in that order; the ids per scope."""
    ids.install(seed, 0)
    try:
        out: dict[str, list[bytes]] = {}
        for scope in plan:
            out.setdefault(scope, []).append(ids.random_bytes(12, scope))
        return out
    finally:
        ids.uninstall()


def test_a_scopes_ids_do_not_depend_on_draws_in_other_scopes() -> None:
    alone = _draws(7, ["prolific", "prolific", "hit:T1", "prolific"])
    beside = _draws(7, ["hit:T2", "prolific", "assignment:H9", "hit:T2", "prolific", "hit:T1", "", "prolific"])
    assert alone["prolific"] == beside["prolific"] and alone["hit:T1"] == beside["hit:T1"]
    assert len({*alone["prolific"], *beside["hit:T2"], *beside["assignment:H9"], *beside[""]}) == 7  # all different
    assert _draws(8, ["prolific"])["prolific"][0] != alone["prolific"][0]  # and the seed's


def test_the_marketplaces_ids_take_their_scope_and_are_random_outside_a_simulation() -> None:
    ids.install(3, 0)
    try:
        a = new_id(scope="hit:T")
        new_id(scope="hit:U")
        b = new_id(scope="hit:T")
    finally:
        ids.uninstall()
    ids.install(3, 0)
    try:
        assert new_id(scope="hit:T") == a and new_id(scope="hit:T") == b
    finally:
        ids.uninstall()
    assert new_id(scope="hit:T") != a  # no simulation installed: the OS's random source


def test_a_campaigns_instance_is_the_seeds_in_a_simulation_and_random_facing_people(tmp_path) -> None:
    """The instance names the campaign's HIT type (its tag), and a simulation's HIT ids are drawn per HIT
    type: an instance from uuid4 made two runs of one seed offer participants HITs in other orders."""
    from contextlib import closing

    from campaign.daemon import ensure_campaign_row
    from campaign.spec import load_spec
    from campaign.store import Store
    from tests.support.specs import NO_CROWD, campaign, write_spec

    spec = load_spec(write_spec(tmp_path / "c.yaml", campaign("inst", task={"kind": "likert"}, budget="5.00", crowd=NO_CROWD)))

    def instance(folder: str, seed: int | None) -> str:
        if seed is not None:
            ids.install(seed, 0)
        try:
            with closing(Store.open(tmp_path / folder)) as store:
                return ensure_campaign_row(store, spec.campaigns[0], seed or 0)
        finally:
            ids.uninstall()

    simulated = instance("a", 5)
    assert simulated == instance("b", 5) != instance("c", 6)
    assert len({instance("d", None), instance("e", None), simulated}) == 3
    assert len(simulated) == 12 and int(simulated, 16) >= 0
