"""SIGKILL a Prolific campaign (`marketplace: prolific-local`) between each remote Prolific call and its
record, and at random instants; a restart then finishes it, and nothing happened twice.

As tests/test_e2e.py does for MTurk: `CAMPAIGN_TEST_CRASH=point:count` kills the daemon (and with it the
in-process emulator, task site and simulated participants) the count-th time it reaches a crash point of
`campaign.prolific.studies`. After the restart has finished the campaign, `campaign.prolific.audit`
reads the emulator, the door, the journal, the task site and the store: no submission decided twice,
no bonus paid twice, no participant served the same HIT twice, the ledger equal to Prolific's charges
to the cent, no HIT the task site lacks.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from campaign.prolific.audit import audit_run, gather
from campaign.store import Store
from tests.support.cli import CRASH, clean_env, kill_at, run_args, run_campaign
from tests.support.specs import campaign, simulated
from tests.support.specs import write_spec as write_campaigns

pytestmark = [pytest.mark.prolific, pytest.mark.slow]

NAME = "kill-prolific"
PROLIFIC = {"reward": "0.75", "currency": "GBP", "bundle": 5, "estimated_minutes": 5, "maximum_minutes": 60, "devices": ["desktop"],
            "fee_rate": "0.333", "vat_rate": "0.2"}
# A held rejection goes out at half the auto-approval delay, and until it does the last slots can wait for a
# place (a place held by a participant with nothing left to do counts as capacity in
# `ProlificMarketplace._places_wanted`): at speed 600 the default 3 days held a run 3.6 minutes.
LIKERT = {"name": "likert", "kind": "likert", "auto_approval_delay": "1d",
          "traps": {"share": 0.2, "texts": ["This sentence is not important.", "Barack Obama graduated from Harvard Law."]}}
MIX = {"diligent": 0.7, "random_spammer": 0.15, "constant_spammer": 0.15}


def write_spec(tmp: Path) -> Path:
    return write_campaigns(tmp / "campaigns.yaml", campaign(
        NAME, marketplace="prolific-local", prolific=PROLIFIC, task_site={"public_url": "http://127.0.0.1:0"}, stages=[LIKERT],
        quality={"bonus": "0.20", "max_excluded_share": 0.3}, budget="60.00",
        crowd=simulated(16, mix=MIX, speed=600, arrival_span="30m")))


def run_cli(config: Path, state: Path, crash: str | None = None, timeout: float = 420) -> subprocess.CompletedProcess[str]:
    return run_campaign(*run_args(config, state, seed=5), env=clean_env(["PROLIFIC_TOKEN"], **({CRASH: crash} if crash else {})),
                        timeout=timeout)


def check_once(state: Path) -> None:
    """The finished campaign, audited; and the audit had something to look at."""
    store = Store.open(state, create=False)
    try:
        findings = audit_run(state, NAME, store)
        assert findings == [], "\n".join(f"{f.check} {f.subject}: {f.detail}" for f in findings)
        facts = gather(emulator_db=state / "prolific" / "prolific.db",
                       journal_db=state / NAME / "prolific" / "prolific-journal.sqlite",
                       door_db=state / "prolific-site" / "prolific-site.sqlite", market_db=state / "market" / "market.db",
                       store=store, campaign=NAME)
    finally:
        store.close()
    approvals = [d for d in facts.decisions if d[1] == "APPROVE"]
    assert approvals and facts.reward_charges, "no submission was approved: the audit checked nothing"
    assert facts.served and facts.charged_minor > 0
    assert any(facts.bonus_payments.values()), "no bonus was paid: the bonus windows were not exercised"
    # Directly too, not only through the audit: each participant's HITs, from the task site's own records.
    with sqlite3.connect(f"file:{state / 'market' / 'market.db'}?mode=ro", uri=True) as m:
        dup = m.execute("SELECT worker_id, hit_id, COUNT(*) FROM assignments WHERE worker_id LIKE 'AP%' "
                        "AND status NOT IN ('Abandoned', 'Returned') GROUP BY worker_id, hit_id HAVING COUNT(*) > 1").fetchall()
    assert dup == [], f"a participant was served the same HIT twice: {dup}"
    scores = state / NAME / "scores.jsonl"
    assert scores.is_file() and [json.loads(line) for line in scores.read_text(encoding="utf-8").splitlines()]


# Each window between a Prolific call and its record (campaign/prolific/studies.py), the one between a
# decision on the task site and its verdict on Prolific (campaign/marketplaces/prolific.py), at a first
# and a later passage. Two windows are not aimed at because this campaign does not reliably pass them:
# `prolific.after_stop` (STOP is called only for a study still open when its stage completes; here its
# places have all been taken by then) and `prolific.after_places` (places are raised only when work runs
# short of places, which depends on how many participants time out); tests/prolific/test_studies.py
# crashes the journal after both calls in-process, and the random instants may fall anywhere.
POINTS = ["prolific.after_create_study:1", "prolific.after_publish:1", "prolific.before_verdict:3",
          "prolific.before_decision:2", "prolific.after_decision:1", "prolific.after_decision:5",
          "prolific.after_create_bonus:1", "prolific.before_pay:2", "prolific.after_pay:1"]


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_between_a_prolific_call_and_its_record(tmp_path: Path, point: str) -> None:
    config = write_spec(tmp_path)
    state = tmp_path / "state"
    proc = run_cli(config, state, crash=point)
    assert proc.returncode == -signal.SIGKILL, f"expected a crash at {point}; rc={proc.returncode}\n{proc.stderr[-3000:]}"
    proc = run_cli(config, state)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_once(state)


def test_sigkill_at_random_instants(tmp_path: Path) -> None:
    config = write_spec(tmp_path)
    state = tmp_path / "state"
    kill_at(run_args(config, state, seed=5), (2.0, 3.5, 5.0, 6.5), env=clean_env(["PROLIFIC_TOKEN"]))
    proc = run_cli(config, state)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_once(state)
