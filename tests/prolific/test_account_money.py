"""The real money on Prolific: the fee and VAT the account is charged, the workspace and project studies go
to, the workspace's currency, and each finished study's ledger figure against what the service charged.

The campaign's steps (`open_places`, `settle_studies`, `reconcile_costs`) run over the real adapter, the
emulator as Prolific (charging by its own configured rates, in its own code) and a participant doing the
work through the door.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from sqlmodel import col, select

from campaign.clock import ManualClock
from campaign.daemon import ensure_campaign_row
from campaign.dashboard.view import render_once
from campaign.ledger import totals
from campaign.market.prolific_site import ProlificDoor
from campaign.market.server import RunningMarket, start_market
from campaign.marketplaces import open_marketplace
from campaign.marketplaces.base import HitRequest
from campaign.marketplaces.prolific import ProlificMarketplace
from campaign.prolific.audit import check, gather
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.participant import add_participant
from campaign.prolific.emulator.server import RunningEmulator, start_emulator
from campaign.prolific.emulator.store import DocStore
from campaign.prolific.studies import ProlificStudies
from campaign.readmodel.snapshot import Reader
from campaign.spec import load_spec
from campaign.state import CampaignStatus, Keys
from campaign.steps.context import Context
from campaign.steps.studies import open_places, reconcile_costs, settle_studies
from campaign.store import CampaignRow, EventRow, HitRow, KVRow, Store
from tests.prolific.support import diligent_participants, rating_type, run_beside_crowd
from tests.support.http import call_json
from tests.support.market import FORM_PAGE
from tests.support.specs import NO_CROWD, campaign, first_propositions, write_spec

pytestmark = pytest.mark.prolific

# What the spec assumes: a 33.3% fee and 20% VAT on it, so a GBP 1.50 place would cost 1.50 + 0.50 + 0.10 = 2.10.
SPEC = {"reward": "1.50", "bundle": 1, "estimated_minutes": 10, "fee_rate": "0.333", "vat_rate": "0.2"}


@dataclass
class Road:
    ctx: Context
    market: ProlificMarketplace
    em: RunningEmulator
    server: RunningMarket
    api: ProlificClient
    tmp: Path


@contextmanager
def road(tmp: Path, *, fee: str = "0.25", vat: str = "0.2", currency: str = "GBP",
         prolific: Callable[[ProlificClient], dict[str, Any]] | None = None) -> Iterator[Road]:
    """A campaign on the emulator, whose account is charged `fee` and `vat` (not the spec's rates);
    `prolific(client)` gives more of the spec's `prolific:` block (it may make workspaces first)."""
    clock = ManualClock()
    em = start_emulator(tmp / "em", clock, fee_rate=Decimal(fee), vat_rate=Decimal(vat), currency=currency)
    server = start_market(tmp / "market", clock=clock, mode="prod", balance=Decimal("100.00"))
    api = ProlificClient(em.base_url, em.token, max_retries=0)
    door = ProlificDoor(server.engine, server.core.site.config, tmp / "site", api, ttl=0)
    server.mount("/prolific/", door)
    spec = write_spec(tmp / "campaigns.yaml", campaign("money", task={"kind": "likert"}, marketplace="prolific-local",
                                                       prolific={**SPEC, **(prolific(api) if prolific else {})}, budget="10.00",
                                                       propositions=first_propositions(tmp, 10), crowd=NO_CROWD,
                                                       poll_interval=None))
    loaded = load_spec(spec).campaigns[0]
    assert loaded.prolific is not None
    store = Store.open(tmp / "state")
    instance = ensure_campaign_row(store, loaded, 0)
    studies = ProlificStudies(api, store, loaded.name)
    inner = open_marketplace("local", server.endpoint_url, credentials=server.credentials)
    market = ProlificMarketplace(inner, studies, door, replace(loaded.prolific, public_url=server.endpoint_url), store,
                                 loaded.name)
    ctx = Context(store=store, market=market, campaign=loaded, seed=0, state_dir=tmp / "state", clock=clock,
                  instance=instance, lock=threading.Lock())
    try:
        yield Road(ctx, market, em, server, api, tmp)
    finally:
        market.close()
        studies.close()
        store.close()
        server.stop()
        door.close()
        em.stop()


def _post(r: Road) -> tuple[str, str]:
    """One HIT of one assignment posted on the task site and recorded as the campaign's; (type, HIT id)."""
    t = rating_type(r.market)
    hit = r.market.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=1, lifetime=86400, annotation="a0", token="t0"))
    with r.ctx.store.session() as s:
        s.add(HitRow(campaign=r.ctx.name, stage="likert", hit_key="likert-0001", item_keys="[]", annotation="a0", token="t0",
                     status="open", reward="0.00", assignments=1, hit_id=hit.hit_id, hit_type_id=t))
    return t, hit.hit_id


def _work(r: Road, study_id: str) -> list[str]:
    """A participant takes the study, does its one HIT through the door and completes; the assignments."""
    p = add_participant(r.em.root_url, r.em.token)
    sub, _ = p.start(study_id)
    session = {"PROLIFIC_PID": p.id, "STUDY_ID": study_id, "SESSION_ID": sub}
    site = r.server.endpoint_url
    step = call_json(f"{site}/prolific/api/next?" + urllib.parse.urlencode(session))
    aids = []
    while step["status"] == "task":
        aids.append(step["AssignmentId"])
        step = call_json(f"{site}/prolific/api/submit", {**session, "assignmentId": step["AssignmentId"], "fields": [["answer", "ok"]]})
    assert step["status"] == "done" and p.complete_from_redirect(sub, step["redirect"]) == "AWAITING REVIEW"
    return aids


def _finish(r: Road) -> None:
    """The HIT closed (the stage complete): the study is stopped and over."""
    with r.ctx.store.session() as s:
        for h in s.exec(select(HitRow).where(HitRow.campaign == r.ctx.name)).all():
            h.status = "closed"
            s.add(h)
    settle_studies(r.ctx)


def _events(r: Road, kind: str) -> list[EventRow]:
    with r.ctx.store.session() as s:
        return list(s.exec(select(EventRow).where(EventRow.campaign == r.ctx.name, EventRow.kind == kind)).all())


def _emulator_charged(r: Road) -> Decimal:
    db = DocStore(r.tmp / "em" / "prolific.db")
    try:
        return Decimal(sum(db.charged())) / 100
    finally:
        db.close()


def _audit(r: Road) -> list:
    return check(gather(emulator_db=r.tmp / "em" / "prolific.db", door_db=r.tmp / "site" / "prolific-site.sqlite",
                        market_db=r.tmp / "market" / "market.db", store=r.ctx.store, campaign=r.ctx.name))


def test_the_ledger_uses_the_accounts_fee_and_equals_what_the_emulator_charged(tmp_path: Path) -> None:
    """The account is charged 25% (+20% VAT on it), the spec assumes 33.3%: a place costs 1.50 + 0.38 + 0.08
    = 1.96 as Prolific's calculator says, not the spec's 2.10; the ledger reserves and books 1.96, the
    emulator charges 1.96, the study's reconciliation and the audit agree."""
    with road(tmp_path) as r:
        t, _ = _post(r)
        assert open_places(r.ctx) == 1
        with r.ctx.store.session() as s:
            assert totals(s, r.ctx.name, r.ctx.campaign.budget).reserved == Decimal("1.96")
        notes = " ".join(e.message for e in _events(r, "prolific_account"))
        assert "fee is 25%" in notes and "0.333" in notes  # the difference from the spec is said, not silent
        study_id = str(r.market.studies.study(t).study_id)  # type: ignore[union-attr]
        aids = _work(r, study_id)
        r.market.approve(aids[0])
        _finish(r)
        assert r.ctx.store.get_kv(r.ctx.name, Keys.study_over(t), "")
        assert reconcile_costs(r.ctx) == 0
        with r.ctx.store.session() as s:
            t_ = totals(s, r.ctx.name, r.ctx.campaign.budget)
        assert t_.spent == _emulator_charged(r) == Decimal("1.96") and t_.reserved == Decimal("0.00")
        assert '"booked": "1.96"' in (r.ctx.store.get_kv(r.ctx.name, Keys.study_cost(t), "") or "")
        assert '"charged": "1.96"' in (r.ctx.store.get_kv(r.ctx.name, Keys.study_cost(t), "") or "")
        assert not _events(r, "cost_mismatch")
        assert _audit(r) == []
        console = Console(record=True, width=200)
        render_once(r.ctx.store, console)
        assert "studies reconciled with the service's charges" in console.export_text()


def test_a_study_charged_differently_from_the_ledger_is_an_alert(tmp_path: Path) -> None:
    """The service charges a fee other than the one the account stated when it was read (here: changed
    under the campaign): at the study's end the ledger's 1.96 differs from the service's 2.40, which is an
    error event, an alert in the read model (status, dashboard) and an audit finding."""
    with road(tmp_path) as r:
        t, _ = _post(r)
        open_places(r.ctx)
        study_id = str(r.market.studies.study(t).study_id)  # type: ignore[union-attr]
        aids = _work(r, study_id)
        r.em.emulator.fee_rate = Decimal("0.5")  # 1.50 + 0.75 + 0.15
        r.market.approve(aids[0])
        _finish(r)
        assert reconcile_costs(r.ctx) == 1
        [event] = _events(r, "cost_mismatch")
        assert event.level == "error" and "1.96" in event.message and "2.40" in event.message
        alerts = Reader(r.ctx.store).campaign(r.ctx.name, 0.0).alerts
        assert [a.key for a in alerts if a.key.startswith("cost_mismatch")] == [f"cost_mismatch:{t}"]
        assert any(f.check == "cost_mismatch" for f in _audit(r))
        console = Console(record=True, width=200)
        render_once(r.ctx.store, console)  # what `campaign status` prints
        shown = console.export_text()
        assert "money NOT reconciled" in shown and "£1.96" in shown and "£2.40" in shown
        assert reconcile_costs(r.ctx) == 1 and len(_events(r, "cost_mismatch")) == 1  # standing: one event, not one per pass


def _blocked(r: Road) -> str:
    with r.ctx.store.session() as s:
        row = s.get(CampaignRow, r.ctx.name)
        assert row is not None and row.status == CampaignStatus.BLOCKED, row
    [event] = _events(r, "blocked")
    return event.message


def test_a_workspace_that_does_not_exist_blocks_before_any_study(tmp_path: Path) -> None:
    missing = "0123456789abcdef01234567"
    with road(tmp_path, prolific=lambda _api: {"workspace": missing}) as r:
        _post(r)
        assert open_places(r.ctx) == 0
        message = _blocked(r)
        assert "prolific.workspace" in message and missing in message
        assert r.api.studies() == []


def test_a_workspace_paying_in_another_currency_blocks_before_any_study(tmp_path: Path) -> None:
    with road(tmp_path, currency="USD") as r:  # the spec says GBP
        _post(r)
        assert open_places(r.ctx) == 0
        message = _blocked(r)
        assert "prolific.currency is GBP" in message and "USD" in message
        assert r.api.studies() == []


def test_the_study_is_created_in_the_specs_workspace(tmp_path: Path) -> None:
    """Not in the first project the token has, but in the named workspace's project."""
    made: dict[str, Any] = {}

    def second_workspace(api: ProlificClient) -> dict[str, Any]:
        made["workspace"] = api.create_workspace("second", "GBP")
        made["project"] = api.create_project(made["workspace"]["id"], "annotation")
        return {"workspace": made["workspace"]["id"]}

    with road(tmp_path, prolific=second_workspace) as r:
        t, _ = _post(r)
        assert open_places(r.ctx) == 1
        study = r.api.study(str(r.market.studies.study(t).study_id))  # type: ignore[union-attr]
        assert study["project"] == made["project"]["id"]
        assert r.api.workspaces()[0]["id"] != made["workspace"]["id"]  # the first workspace would have been the old road


def test_the_emulators_charges_import_nothing_of_the_campaigns_money() -> None:
    """The emulator charges by the description's rules in its own code: importing it (and its server) loads
    none of the ledger, the money module or the campaign's Prolific pay rules."""
    code = ("import sys, campaign.prolific.emulator.engine, campaign.prolific.emulator.server; "
            "print(sorted(m for m in sys.modules if m in ('campaign.ledger', 'campaign.money', 'campaign.pay', "
            "'campaign.prolific.study', 'campaign.prolific.account') or m.startswith('campaign.marketplaces')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.slow
def test_the_real_road_books_the_accounts_rates_and_reconciles_every_study(tmp_path: Path) -> None:
    """`marketplace: prolific` against a standalone emulator whose account is charged 25% and no VAT while
    the spec assumes 33.3% + 20%: the run finishes, the ledger's spend equals what the emulator charged to
    the penny, and every study's reconciliation agrees."""
    from campaign.clock import WallClock
    from tests.prolific.test_run import _emulator_charges, _env, _free_port, real_road
    from tests.support.cli import run_args, start_campaign

    first_propositions(tmp_path, 10)
    port = _free_port()
    spec = write_spec(tmp_path / "campaigns.yaml", real_road(port))
    em = start_emulator(tmp_path / "prolific.com", WallClock(), fee_rate=Decimal("0.25"), vat_rate=Decimal("0"),
                        deliver_hooks=True)  # webhooks sent to the daemon's task site, as Prolific sends them
    state = tmp_path / "state"
    proc = start_campaign(*run_args(spec, state, "--market-port", str(port), "--max-seconds", "240", quiet=False),
                          env=_env(PROLIFIC_TOKEN=em.token, PROLIFIC_BASE_URL=em.base_url),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    crowd = diligent_participants(em, port, tmp_path / "props.tsv")
    stdout, stderr = run_beside_crowd(proc, crowd, em, port)
    assert proc.returncode == 0, stderr[-3000:]
    charged, subs, _ = _emulator_charges(tmp_path / "prolific.com")
    approved = sum(1 for s in subs if s["status"] == "APPROVED")
    assert approved and charged == Decimal("1.25") * approved  # 1.00 + 0.25 fee, no VAT: the account's, not 1.40
    store = Store.open(state)
    try:
        with store.session() as s:
            spent = totals(s, "real-road", Decimal("20.00")).spent
            costs = [json.loads(v) for v in s.exec(select(KVRow.value).where(KVRow.campaign == "real-road",
                                                                                 col(KVRow.key).startswith(Keys.STUDY_COST))).all()]
            notes = [e.message for e in s.exec(select(EventRow).where(EventRow.kind == "prolific_account")).all()]
    finally:
        store.close()
    assert spent == charged
    assert costs and all(c["booked"] == c["charged"] for c in costs), costs
    assert sum(Decimal(c["charged"]) for c in costs) == charged
    assert any("fee is 25%" in n for n in notes) and any("VAT on the fee is 0%" in n for n in notes)
