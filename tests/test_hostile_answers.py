"""Issue 25's stalled campaign, end to end and in-process: while a Prolific campaign runs, a worker
submits a Likert answer holding a control character through the worker origin and the content origin,
and a participant through the Prolific door's JSON API and the content origin. Each is refused (400,
with a message saying which field and character), nothing of it is stored, and the campaign finishes
with every stored answer valid, approved and scored.

On the old code each of these answers was stored, its answer XML could not be read back, and every
later pass died at collect: the run never finished (here: it gives up after `max_seconds`).

The hostile actors are outside threads on sockets, acting in wall time, so the run is `live` (scaled clock):
on virtual time the campaign can finish, and its servers close, before they have tried anything."""

from __future__ import annotations

import csv
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from campaign.daemon import RunOptions, Runtime, run
from campaign.market.worker_client import WorkerAPIError, WorkerClient
from campaign.prolific.emulator.participant import add_participant
from campaign.spec import load_spec
from campaign.store import AssignmentRow, Store
from tests.support.specs import campaign, first_propositions, simulated, write_spec

pytestmark = [pytest.mark.slow, pytest.mark.prolific]

N_ITEMS = 10
PROLIFIC = {"reward": "0.50", "currency": "GBP", "bundle": 2, "estimated_minutes": 3, "maximum_minutes": 60,
            "devices": ["desktop"], "fee_rate": "0.333", "vat_rate": "0.2"}


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


class Hostile:
    """Tries the control-character answers once the task site is up; records what each door answered."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[int, str]] = {}
        self.errors: list[str] = []
        self.thread: threading.Thread | None = None

    def progress(self, rt: Runtime) -> None:
        if self.thread is None and "prolific-local" in rt.runs and rt.services.site is not None:
            self.thread = threading.Thread(target=self._run, args=(rt,), daemon=True)
            self.thread.start()

    def _run(self, rt: Runtime) -> None:
        try:
            self._worker(rt)
            self._participant(rt)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _worker(self, rt: Runtime) -> None:
        market = rt.services.site.server
        client = WorkerClient(market.endpoint_url)
        client.sign_in(market.add_worker("AHOSTILE0000001"))
        aid = None
        for _ in range(600):
            for h in client.available("AHOSTILE0000001"):
                try:
                    aid = client.accept("AHOSTILE0000001", h["HITId"])["AssignmentId"]
                    break
                except WorkerAPIError:
                    continue
            if aid:
                break
            time.sleep(0.1)
        assert aid, "no HIT to accept"
        try:
            client.submit(aid, [(f"rating-{i}", "4\x00") for i in range(5)])
        except WorkerAPIError as exc:
            self.seen["worker origin"] = (exc.status, f"{exc.code} {exc.message}")
        else:
            self.seen["worker origin"] = (200, "stored")
        body = urllib.parse.urlencode([("assignmentId", aid)] + [(f"rating-{i}", "4\x1b") for i in range(5)]).encode()
        self.seen["content origin"] = _post(market.content_url + "/mturk/externalSubmit", body,
                                            {"Content-Type": "application/x-www-form-urlencoded"})
        try:
            client.return_assignment(aid)
        except WorkerAPIError:
            pass  # stored (old code): nothing to return

    def _participant(self, rt: Runtime) -> None:
        em = rt.runs["prolific-local"].pieces.emulator
        p = add_participant(em.root_url, em.token, country="GB")
        for _ in range(600):
            studies = p.studies()
            if studies:
                break
            time.sleep(0.1)
        sub, url = p.start(studies[0]["id"])
        session = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
        site = rt.services.site.endpoint_url
        with urllib.request.urlopen(f"{site}/prolific/api/next?" + urllib.parse.urlencode(session), timeout=30) as r:
            step = json.loads(r.read())
        assert step["status"] == "task", step
        aid = step["AssignmentId"]
        body = json.dumps({**session, "assignmentId": aid, "fields": [[f"rating-{i}", "4\x00"] for i in range(5)]}).encode()
        self.seen["prolific door"] = _post(f"{site}/prolific/api/submit", body, {"Content-Type": "application/json"})
        form = urllib.parse.urlencode([("assignmentId", aid)] + [(f"rating-{i}", "4\x1b") for i in range(5)]).encode()
        self.seen["content origin (door's task)"] = _post(rt.services.site.content_url + "/mturk/externalSubmit", form,
                                                           {"Content-Type": "application/x-www-form-urlencoded"})
        p.give_back(sub)


def test_control_character_answers_are_refused_at_every_door_and_the_campaign_finishes(tmp_path: Path) -> None:
    cfg = write_spec(tmp_path / "campaigns.yaml", campaign(
        "hostile", propositions=first_propositions(tmp_path, N_ITEMS), marketplace="prolific-local", prolific=PROLIFIC,
        task_site={"public_url": "http://127.0.0.1:0"}, budget="40.00", crowd=simulated(10, mix={"diligent": 1.0}, speed=600, arrival_span="10m"),
        stages=[{"name": "likert", "kind": "likert", "assignments": 3, "auto_approval_delay": "1d"}]))
    state = tmp_path / "state"
    hostile = Hostile()
    rc = run(load_spec(cfg), RunOptions(state_dir=state, seed=1, max_seconds=240, live=True), progress=hostile.progress)
    assert hostile.thread is not None
    hostile.thread.join(timeout=30)
    assert not hostile.errors, hostile.errors
    expected = {"worker origin": "U+0000", "content origin": "U+001B", "prolific door": "U+0000",
                "content origin (door's task)": "U+001B"}
    for door, char in expected.items():
        status, text = hostile.seen[door]
        assert status == 400 and char in text and "not recorded" in text, (door, status, text[:300])
    assert rc == 0, "the campaign did not finish"

    store = Store.open(state)
    try:
        with store.session() as s:
            rows = s.exec(select(AssignmentRow).where(AssignmentRow.campaign == "hostile")).all()
    finally:
        store.close()
    assert rows and all(r.valid for r in rows), [r.error for r in rows if not r.valid]
    assert all(r.status == "approved" for r in rows), sorted({r.status for r in rows})
    assert not any(r.worker_id == "AHOSTILE0000001" for r in rows)
    with (state / "hostile" / "scores.csv").open(encoding="utf-8") as f:
        scores: list[dict[str, Any]] = list(csv.DictReader(f))
    assert len(scores) == N_ITEMS and all(int(r["n"]) >= 3 for r in scores)
