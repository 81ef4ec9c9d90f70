"""A hostile crowd and a daemon SIGKILLed at arbitrary instants, together (slow): the demo's Likert campaign
on the built-in marketplace and its Prolific one, a quarter of each crowd adversarial, the daemon killed
five times early in the run and then left to finish. Nothing is paid twice or for work without a valid
answer, the ledger agrees with the marketplace and with Prolific, and the webhook subscriptions of the
killed starts (each on a port of its own) are gone: one is left."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.bench.hostile import books_check, unpaid_check
from campaign.spec import ADVERSARIES_ENV
from tests.support.cli import clean_env, kill_at, run_args, run_campaign
from tests.support.paths import ROOT
from tests.support.sqlite import count

pytestmark = pytest.mark.slow

CAMPAIGNS = ("water-bottles", "water-prolific")


def test_a_hostile_crowd_and_sigkills_leave_the_books_square(tmp_path: Path) -> None:
    state = tmp_path / "state"
    args = run_args(ROOT / "examples" / "hostile.yaml", state, *[x for n in CAMPAIGNS for x in ("--campaign", n)], seed=2)
    env = clean_env([ADVERSARIES_ENV])
    kill_at(args, (2.0, 1.0, 3.0, 1.5, 2.5), env=env)
    assert (state / "campaign.db").is_file(), "no run got as far as its store"
    proc = run_campaign(*args, env=env, timeout=420)
    assert proc.returncode == 0, proc.stderr[-3000:]
    db = state / "campaign.db"
    assert count(db, "SELECT COUNT(*) FROM campaigns WHERE status = 'finished'") == len(CAMPAIGNS)
    money = unpaid_check(state)
    assert money["violations"] == [] and money["checked"]["ledger"] > 0 and money["checked"]["prolific"] > 0, money
    assert books_check(state) == []
    # every start subscribed its own task site's URL; only the last one's subscription is left
    assert count(db, "SELECT COUNT(*) FROM prolific_hooks") == 1
    assert count(state / "prolific" / "prolific.db", "SELECT COUNT(*) FROM docs WHERE kind = 'hook_subscription'") == 1
