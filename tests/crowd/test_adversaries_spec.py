"""`crowd.adversaries` in the spec and who in a crowd misbehaves how (campaign.crowd.adversaries.assign)."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.crowd.adversaries import assign
from campaign.crowd.models import make_pool
from campaign.spec import ADVERSARIES_ENV, ADVERSARY_BEHAVIOURS, Adversaries, SpecError, load_spec, with_adversaries
from tests.support.paths import ROOT


def _spec(tmp_path: Path, crowd_extra: str) -> Path:
    text = (ROOT / "campaigns.yaml").read_text(encoding="utf-8")
    text = text.replace("propositions: examples/", f"propositions: {ROOT}/examples/")
    text = text.replace("documents: examples/", f"documents: {ROOT}/examples/")
    text = text.replace("truth: examples/", f"truth: {ROOT}/examples/")
    text = text.replace("      arrival_span: 2h\n", "      arrival_span: 2h\n" + crowd_extra, 1)
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _no_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the spec itself: `pytest --adversaries` (the environment switch) stays out."""
    monkeypatch.delenv(ADVERSARIES_ENV, raising=False)


def test_adversaries_are_read_and_checked(tmp_path: Path) -> None:
    c = load_spec(_spec(tmp_path, "      adversaries: {share: 0.25, behaviours: {garbage: 2, hold: 1}}\n")).campaigns[0]
    assert c.crowd.adversaries == Adversaries(share=0.25, behaviours=(("garbage", 2.0), ("hold", 1.0)))
    with pytest.raises(SpecError) as bad:
        load_spec(_spec(tmp_path, "      adversaries: {share: 1.5, behaviours: {garbge: 1}}\n"))
    text = "\n".join(bad.value.problems)
    assert "crowd.adversaries.share: must be >= 0.0 and <= 1.0, got 1.5" in text
    assert "crowd.adversaries.behaviours.garbge: unknown key (did you mean 'garbage'?)" in text
    with pytest.raises(SpecError, match="weights must add up to more than 0"):
        load_spec(_spec(tmp_path, "      adversaries: {share: 0.1, behaviours: {garbage: 0}}\n"))


def test_no_adversaries_keeps_the_fingerprint_and_some_change_it(tmp_path: Path) -> None:
    plain = load_spec(_spec(tmp_path, "")).campaigns[0]
    none = load_spec(_spec(tmp_path, "      adversaries: {share: 0}\n")).campaigns[0]
    some = load_spec(_spec(tmp_path, "      adversaries: {share: 0.25}\n")).campaigns[0]
    assert plain.fingerprint() == none.fingerprint()  # as before adversaries existed (test_spec pins the value)
    assert some.fingerprint() != plain.fingerprint()


def test_replace_excluded_off_keeps_the_fingerprint_and_on_changes_it() -> None:
    import dataclasses

    plain = load_spec(ROOT / "campaigns.yaml").campaigns[0]
    off = dataclasses.replace(plain, quality=dataclasses.replace(plain.quality, replace_excluded=False))
    on = dataclasses.replace(plain, quality=dataclasses.replace(plain.quality, replace_excluded=True))
    assert off.fingerprint() == plain.fingerprint()  # campaigns stored before the switch existed resume
    assert on.fingerprint() != plain.fingerprint()


def test_the_environment_switch_reaches_every_simulated_crowd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ADVERSARIES_ENV, "0.25")
    spec = load_spec(_spec(tmp_path, ""))
    assert [c.crowd.adversaries.share for c in spec.campaigns] == [0.25, 0.25]
    own = load_spec(_spec(tmp_path, "      adversaries: {share: 0.5}\n"))
    assert [c.crowd.adversaries.share for c in own.campaigns] == [0.5, 0.25]  # a spec's own setting wins
    monkeypatch.setenv(ADVERSARIES_ENV, "lots")
    with pytest.raises(SpecError, match="CAMPAIGN_ADVERSARIES='lots' in the environment must be a share"):
        load_spec(_spec(tmp_path, ""))


def test_with_adversaries_switches_a_built_spec() -> None:
    spec = with_adversaries(load_spec(ROOT / "campaigns.yaml"), 0.3, {"fast": 1.0})
    assert {c.crowd.adversaries for c in spec.campaigns} == {Adversaries(share=0.3, behaviours=(("fast", 1.0),))}
    with pytest.raises(ValueError, match="unknown adversary behaviours"):
        with_adversaries(spec, 0.3, {"nap": 1.0})


def test_assign_is_seeded_meets_the_share_and_the_weights() -> None:
    pool = make_pool(40, 3)
    every = Adversaries(share=0.25)
    got = assign(pool, every, seed=1)
    assert got == assign(pool, every, seed=1)  # reproducible
    assert got != assign(pool, every, seed=2)
    assert len(got) == 10 and set(got) <= {w.worker_id for w in pool}
    assert set(got.values()) == set(ADVERSARY_BEHAVIOURS)  # 10 over 9 equal weights: each at least once
    weighted = assign(pool, Adversaries(share=0.5, behaviours=(("garbage", 3.0), ("hold", 1.0))), seed=1)
    assert sorted(weighted.values()).count("garbage") == 15 and sorted(weighted.values()).count("hold") == 5
    assert assign(pool, Adversaries(), seed=1) == {}
    # a larger share keeps the smaller share's adversaries (the same people turn hostile first)
    assert set(got) <= set(assign(pool, Adversaries(share=0.5), seed=1))
