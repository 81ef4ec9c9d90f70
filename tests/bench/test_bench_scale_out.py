"""`campaign bench scale --daemons N --db ...`: how the propositions are divided (the same campaigns for
any number of daemons, so runs compare campaign by campaign), what the options accept, and (slow,
PostgreSQL) a tiny run of two daemons on a throw-away server that must finish every campaign with
nothing approved by the marketplace before review."""

from __future__ import annotations

import json

import pytest

from campaign.bench.scale import main
from campaign.bench.scale_out import CAMPAIGN_SIZE, MIN_CAMPAIGNS, partition, run_scale_out, spec_text
from campaign.spec import load_spec


def test_the_propositions_are_divided_into_campaigns_of_at_most_the_campaign_size():
    assert partition(47_000) == [11_750] * 4
    sizes = partition(470_000)
    assert len(sizes) == 40 and set(sizes) == {11_750}
    assert partition(200) == [50] * MIN_CAMPAIGNS
    odd = partition(47_003)
    assert sum(odd) == 47_003 and max(odd) - min(odd) <= 1 and odd == sorted(odd, reverse=True)
    assert all(s <= CAMPAIGN_SIZE for s in partition(1_000_001))


def test_a_campaign_gets_at_least_one_hit_of_items_and_the_count_can_be_given():
    assert partition(12) == [6, 6]  # two HITs' worth of items: two campaigns, not four
    assert partition(10, campaigns=5) == [5, 5]
    assert partition(1_000, campaigns=3) == [334, 333, 333]
    with pytest.raises(ValueError):
        partition(4)


def test_the_spec_names_every_campaign_on_the_standalone_marketplace(tmp_path):
    entries = []
    for k, n in enumerate([12, 10]):
        props, truth = tmp_path / f"p{k}.tsv", tmp_path / f"t{k}.tsv"
        props.write_text("id\ttext\n" + "".join(f"p{i}\ttext {k} {i}\n" for i in range(n)))
        truth.write_text("id\timportance\n" + "".join(f"p{i}\t0.5\n" for i in range(n)))
        entries.append((f"scale{k:03d}", props, truth, n))
    (tmp_path / "s.yaml").write_text(spec_text(entries, "http://127.0.0.1:1", 600.0))
    spec = load_spec(tmp_path / "s.yaml")
    assert [c.name for c in spec.campaigns] == ["scale000", "scale001"]
    for c in spec.campaigns:
        assert c.endpoint_url == "http://127.0.0.1:1" and c.crowd.speed == 600.0
        st = c.stages[0]
        # simulated days on a clock 600x the wall's: neither a HIT nor an unreviewed answer lapses mid-run
        assert st.lifetime == 365 * 86400 and st.auto_approval_delay == 30 * 86400


@pytest.mark.parametrize("argv, says", [
    (["--daemons", "2"], "give --db"),
    (["--daemons", "0", "--db", "postgres"], "at least 1"),
    (["--db", "sqlite:///x.db"], "PostgreSQL URL"),
    (["--campaigns", "3"], "goes with --db"),
    (["--db", "postgres", "--daemon-nice", "20"], "from 0 to 19"),
])
def test_options_that_cannot_work_are_refused(argv, says, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--propositions", "100", *argv])
    assert exc.value.code == 2
    assert says in capsys.readouterr().err


def test_db_runs_the_scale_out_bench_with_the_options_given(monkeypatch, capsys):
    seen = {}

    def fake(n, daemons, db, **kw):  # type: ignore[no-untyped-def]
        seen.update(n=n, daemons=daemons, db=db, **kw)
        return {"propositions": n}

    monkeypatch.setattr("campaign.bench.scale_out.run_scale_out", fake)
    assert main(["--propositions", "300", "--db", "postgres", "--json", "--campaigns", "6", "--speed", "100"]) == 0
    assert seen["daemons"] == 1 and seen["db"] == "postgres" and seen["campaigns"] == 6 and seen["speed"] == 100.0
    assert seen["daemon_nice"] == 10  # the daemons go after the marketplace unless told otherwise
    assert json.loads(capsys.readouterr().out) == {"propositions": 300}
    assert main(["--propositions", "300", "--db", "postgres", "--json", "--daemon-nice", "0"]) == 0
    assert seen["daemon_nice"] == 0


@pytest.mark.slow
@pytest.mark.postgres
def test_two_daemons_finish_every_campaign_with_nothing_auto_approved(tmp_path):
    out = run_scale_out(200, 2, "postgres", seed=1, keep=tmp_path / "kept", timeout=600, daemon_nice=5)
    assert out["campaigns"] == dict.fromkeys(["scale000", "scale001", "scale002", "scale003"], 50)
    assert out["statuses"] == dict.fromkeys(out["campaigns"], "finished") and out["campaigns_finished"] == 4
    assert (out["hits"], out["assignments"], out["unfilled_slots"]) == (40, 200, 0)
    assert out["auto_approved_before_review"] == 0
    assert [d["name"] for d in out["per_daemon"]] == ["daemon1", "daemon2"] and out["daemon_nice"] == 5
    assert all(d["seconds"] > 0 and d["peak_rss_mib"] > 30 for d in out["per_daemon"])
    assert {"market", "crowd", "daemon1", "daemon2", "postgres"} <= set(out["processes_peak_rss_mib"])
    assert out["peak_rss_mib"] >= sum(d["peak_rss_mib"] for d in out["per_daemon"])
    ticked = {c for d in out["per_daemon"] for c in d["campaigns_ticked"]}
    assert ticked == set(out["campaigns"])  # between them the daemons worked every campaign
    assert out["requests"] == sum(d["requests"] for d in out["per_daemon"]) >= 40 + 200
    assert out["lease_events"] >= 4
    assert len(out["lease_takeover_seconds"]) == out["lease_takeovers"] and all(t >= 0 for t in out["lease_takeover_seconds"])
    assert all(r is not None and r > 0.5 for r in out["quality"].values())  # scores follow the hidden truth
    pg = out["postgres"]
    assert pg["database_mib"] > 0 and pg["connections_peak"] >= 2
    assert pg["slowest_statements"] is None or all(s["calls"] >= 1 for s in pg["slowest_statements"])
