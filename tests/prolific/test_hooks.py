"""Webhooks first (campaign/prolific/hooks.py): the task site's `POST /prolific/hooks` takes only signed,
fresh, first-time deliveries and only marks which submission changed; the studies sweep lists a study's
submissions again when a hook names one of them (no waiting for the catch-up poll), and a hook that never
arrives is caught by the bounded catch-up poll."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

import pytest
from sqlmodel import func, select

from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.hooks import sign
from campaign.prolific.emulator.participant import add_participant
from campaign.prolific.hooks import CATCH_UP, HookReceiver, StudyWatch, ensure_subscription, hook_url
from campaign.prolific.study import ProlificConfig
from campaign.store import ProlificHookMarkRow, ProlificHookRow
from campaign.web.loopback import open_url
from tests.prolific.support import Stack, adapter_stack, rating_type

pytestmark = pytest.mark.prolific


class Listings:
    """The client, counting the submission listings the sweep asks for."""

    def __init__(self, api: ProlificClient) -> None:
        self.api, self.count = api, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.api, name)

    def submissions(self, study_id: str, status: str | None = None) -> list[dict[str, object]]:
        self.count += 1
        return self.api.submissions(study_id, status)


@contextmanager
def hooked(tmp: Path) -> Iterator[tuple[Stack, str, Listings, HookReceiver]]:
    """The adapter stack with webhooks on as the provider turns them on: the subscription (journaled),
    the door's receiver armed with the workspace's secret, the sweep's listings watched; a study with
    two places, published."""
    def configure(url: str, _api: ProlificClient) -> ProlificConfig:
        return ProlificConfig(public_url=url, bundle=2, estimated_minutes=10, maximum_minutes=30, reward=Decimal("1.50"))

    with adapter_stack(tmp, configure) as st:
        ws = st.api.workspaces()[0]["id"]
        receiver = HookReceiver(st.store, st.clock.now, study_of=st.door.study_of_submission)
        receiver.arm(ensure_subscription(st.api, st.store, ws, hook_url(st.server.endpoint_url)))
        st.door.hooks = receiver
        listings = Listings(st.api)
        st.studies.api = listings
        st.studies.watch = StudyWatch(st.store, st.em.emulator.clock.now)
        t = rating_type(st.market)
        st.market.refill(t, 2)
        yield st, t, listings, receiver


def marks(st: Stack) -> int:
    with st.store.session() as s:
        return int(s.exec(select(func.count()).select_from(ProlificHookMarkRow)).one())


def leaked_code_submission(st: Stack, key: str) -> str:
    """A participant who completes with the study's code without doing any work: AWAITING REVIEW, and
    the campaign must reject it (NO_CODE) once it knows."""
    row = st.studies.study(key)
    assert row is not None and row.study_id
    person = add_participant(st.em.root_url, st.em.token, country="US", languages=["English"])
    sub, _url = person.start(row.study_id)
    assert person.complete(sub, row.completion_code) == "AWAITING REVIEW"
    return sub


def post_hook(st: Stack, headers: dict[str, str], body: bytes) -> int:
    status, _h, _b = open_url("POST", hook_url(st.server.endpoint_url), headers, body, 10)
    return status


def test_the_subscription_is_journaled_and_the_secret_is_kept_out_of_the_store(tmp_path: Path) -> None:
    with hooked(tmp_path) as (st, _t, _listings, receiver):
        with st.store.session() as s:
            rows = s.exec(select(ProlificHookRow)).all()
        assert [(r.event_type, r.state) for r in rows] == [("submission.status.change", "confirmed")]
        assert st.api.subscription(str(rows[0].subscription_id))["is_enabled"] is True
        secret = st.api.hook_secrets(rows[0].workspace_id)[0]["value"]
        assert secret not in repr(receiver)
        st.store.close()
        raw = b"".join(p.read_bytes() for p in (tmp_path / "store").iterdir() if p.is_file())
        assert secret.encode() not in raw
        st.store = type(st.store).open(tmp_path / "store")
        # a second start finds it again: no second subscription
        ws = rows[0].workspace_id
        assert ensure_subscription(st.api, st.store, ws, hook_url(st.server.endpoint_url)) == secret
        assert len(st.api.subscriptions(ws)) == 1


def test_a_forged_unsigned_stale_or_replayed_hook_gets_4xx_and_changes_nothing(tmp_path: Path) -> None:
    with hooked(tmp_path) as (st, t, listings, _receiver):
        st.market.settle()  # the first listing (at start): nobody yet
        st.em.hooks.post = lambda url, h, b: 0  # Prolific's own deliveries are lost: only what this test sends arrives
        sub = leaked_code_submission(st, t)
        st.em.hooks.step()
        st.market.settle()
        before = listings.count
        secret = st.api.hook_secrets(st.api.workspaces()[0]["id"])[0]["value"]
        body = json.dumps({"event_type": "submission.status.change", "resource_id": sub, "participant_id": "p" * 24,
                           "status": "AWAITING REVIEW"}).encode()
        now = str(int(st.clock.now()))
        good = {"Content-Type": "application/json", "X-Prolific-Request-Timestamp": now, "X-Event-ID": "e1",
                "X-Prolific-Request-Signature": sign(secret, now, body)}
        stale = str(int(st.clock.now()) - 3600)
        refused = [
            ({"Content-Type": "application/json"}, body),  # unsigned
            ({**good, "X-Prolific-Request-Signature": sign("not the secret", now, body)}, body),  # forged
            ({**good, "X-Prolific-Request-Signature": sign(secret, now, body)}, body.replace(b"AWAITING", b"APPROVED")),  # altered
            ({**good, "X-Prolific-Request-Timestamp": stale, "X-Prolific-Request-Signature": sign(secret, stale, body)}, body),  # old
            ({**good, "X-Prolific-Request-Signature": sign(secret, now, b"{not json")}, b"{not json"),  # signed nonsense
            ({**good, "X-Prolific-Request-Signature": sign(secret, now, b"x" * 20000)}, b"x" * 20000),  # too large
        ]
        for headers, raw in refused:
            status = post_hook(st, headers, raw)
            assert 400 <= status < 500, (status, headers)
        assert marks(st) == 0
        st.market.settle()
        assert listings.count == before  # nothing was marked: nothing listed again
        assert st.api.submission(sub)["status"] == "AWAITING REVIEW"
        assert post_hook(st, good, body) == 200
        assert marks(st) == 1
        assert post_hook(st, good, body) == 409  # the same signed request again: a replay
        assert marks(st) == 1


def test_a_valid_hook_gets_the_submission_decided_without_the_catch_up_poll(tmp_path: Path) -> None:
    with hooked(tmp_path) as (st, t, listings, receiver):
        st.market.settle()  # the first listing: nobody yet
        started = st.clock.now()
        sub = leaked_code_submission(st, t)
        st.market.settle()
        assert st.api.submission(sub)["status"] == "AWAITING REVIEW"  # no hook yet: the last listing stands
        before = listings.count
        assert st.em.hooks.step() == 2  # started, completed: delivered, signed, to the task site
        assert receiver.accepted == 2 and marks(st) == 2
        st.market.settle()
        assert st.clock.now() - started < CATCH_UP  # long before the catch-up poll
        assert listings.count == before + 1
        assert st.api.submission(sub)["status"] == "REJECTED"  # NO_CODE: completed without any work
        assert st.em.emulator.db.get("submission", sub)["rejection_category"] == "NO_CODE"


def test_a_lost_hook_is_caught_by_the_catch_up_poll(tmp_path: Path) -> None:
    with hooked(tmp_path) as (st, t, listings, receiver):
        st.market.settle()
        st.em.hooks.post = lambda url, h, b: 0  # every delivery lost
        sub = leaked_code_submission(st, t)
        st.em.hooks.step()
        st.market.settle()
        assert receiver.accepted == 0 and st.api.submission(sub)["status"] == "AWAITING REVIEW"
        st.clock.advance(CATCH_UP / 2)
        st.market.settle()
        assert st.api.submission(sub)["status"] == "AWAITING REVIEW"  # still within the catch-up time
        before = listings.count
        st.clock.advance(CATCH_UP / 2)
        st.market.settle()
        assert listings.count > before
        assert st.api.submission(sub)["status"] == "REJECTED"


def test_an_event_sent_again_is_marked_once_and_old_marks_are_dropped(tmp_path: Path) -> None:
    """Prolific sends an event again (signed anew) when it did not see our 2xx: 200, nothing marked twice;
    marks older than a week are dropped as new ones come in."""
    from campaign.clock import ManualClock
    from campaign.prolific import hooks
    from campaign.store import Store

    clock = ManualClock()
    store = Store.open(tmp_path / "store")
    receiver = HookReceiver(store, clock.now)
    receiver.arm("s3cret")

    def deliver(event_id: str, sub: str) -> int:
        body = json.dumps({"event_type": "submission.status.change", "resource_id": sub, "status": "RETURNED"}).encode()
        stamp = str(int(clock.now()))
        return receiver.receive({"X-Prolific-Request-Timestamp": stamp, "X-Event-ID": event_id,
                                 "X-Prolific-Request-Signature": sign("s3cret", stamp, body)}, body)[0]

    try:
        assert deliver("e1", "a" * 24) == 200
        clock.advance(30)
        assert deliver("e1", "a" * 24) == 200  # the same event, signed again
        assert receiver.accepted == 1
        clock.advance(hooks.KEEP_MARKS + 1)
        for n in range(hooks.PRUNE_EVERY - 1):
            assert deliver(f"n{n}", f"{n:024x}") == 200
        with store.session() as s:
            left = s.exec(select(ProlificHookMarkRow.event_id)).all()
        assert "e1" not in left and len(left) == hooks.PRUNE_EVERY - 1
    finally:
        store.close()


@pytest.mark.slow
def test_a_small_prolific_local_run_makes_at_most_5_api_calls_per_submission(tmp_path: Path) -> None:
    """A small prolific-local campaign (test_kill's: one Likert stage, 16 simulated participants) run to its
    end with webhooks on: the daemon's Prolific calls, counted by its client, are at most 5 per
    submission, and the finished run passes the audit (every submission decided once, the ledger equal
    to the charges)."""
    from tests.prolific.test_kill import NAME, check_once, run_cli, write_spec
    from tests.support.cli import clean_env, run_campaign

    config = write_spec(tmp_path)
    state = tmp_path / "state"
    proc = run_cli(config, state)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_once(state)
    out = run_campaign("status", "--state", str(state), "--json", env=clean_env(["PROLIFIC_TOKEN"]), timeout=120)
    usage = next(c for c in json.loads(out.stdout)["campaigns"] if c["name"] == NAME)["prolific"]
    assert usage["webhooks"] is True and usage["submissions"] > 0, usage
    assert usage["api_calls"] <= 5 * usage["submissions"], usage
    assert f"{NAME}: Prolific API calls: {usage['api_calls']} for {usage['submissions']} submissions" in proc.stdout


def test_with_webhooks_a_confirmation_serves_a_session_until_a_hook_says_it_changed(tmp_path: Path) -> None:
    """The gate with webhooks on (`trust_hooks`, as the provider arms it): a session confirmed once is not
    asked about again for every answer; the hook of its return makes the very next request ask, and be
    refused."""
    with hooked(tmp_path) as (st, t, _listings, receiver):
        gate = st.door.gate
        gate.ttl, gate.trust_hooks = 300.0, True
        receiver.changed = gate.forget
        asked: list[str] = []
        real = gate.api

        class Counting:
            def submission(self, sub: str) -> dict[str, object]:
                asked.append(sub)
                return real.submission(sub)

        gate.api = Counting()
        row = st.studies.study(t)
        assert row is not None and row.study_id
        person = add_participant(st.em.root_url, st.em.token, country="US", languages=["English"])
        sub, _url = person.start(row.study_id)
        gate.admit(person.id, row.study_id, sub)
        gate.admit(person.id, row.study_id, sub)  # an answer recorded on the same confirmation
        assert asked == [sub]
        person.give_back(sub)
        gate.admit(person.id, row.study_id, sub)  # the hook has not arrived yet: the window a lost hook leaves
        assert st.em.hooks.step() >= 1  # the return's hook: the gate forgets the session
        with pytest.raises(Exception, match="returned"):
            gate.admit(person.id, row.study_id, sub)
        assert asked == [sub, sub]


def test_a_restart_on_another_port_drops_the_old_subscription_and_leaves_other_tools_ones(tmp_path: Path) -> None:
    """The built-in task site takes a new port at each start: the subscription of the last start's URL is
    deleted (Prolific would go on delivering to it, and retrying), one of an unfinished create as well;
    a subscription this store never journaled (another tool's, in the same workspace) stays."""
    with hooked(tmp_path) as (st, _t, _listings, _receiver):
        ws = st.api.workspaces()[0]["id"]
        here = hook_url(st.server.endpoint_url)
        theirs, confirm = st.api.create_subscription(ws, "submission.status.change", "http://127.0.0.1:9/their/hooks")
        st.api.confirm_subscription(str(theirs["id"]), confirm)
        # a start that crashed after its create call, before recording the id: journaled as an intent only
        crashed, confirm = st.api.create_subscription(ws, "submission.status.change", "http://127.0.0.1:7/prolific/hooks")
        with st.store.session() as s:
            s.add(ProlificHookRow(workspace_id=ws, event_type="submission.status.change",
                                  target_url="http://127.0.0.1:7/prolific/hooks", state="intent"))
        secret = ensure_subscription(st.api, st.store, ws, "http://127.0.0.1:8/prolific/hooks")  # the next start's port
        assert secret == st.api.hook_secrets(ws)[0]["value"]
        urls = sorted(str(sub["target_url"]) for sub in [*st.api.subscriptions(ws), *st.api.subscriptions(ws, enabled=False)])
        assert urls == ["http://127.0.0.1:8/prolific/hooks", "http://127.0.0.1:9/their/hooks"], urls
        assert here not in urls and str(crashed["id"]) not in {str(x["id"]) for x in st.api.subscriptions(ws, enabled=False)}
        with st.store.session() as s:
            assert [r.target_url for r in s.exec(select(ProlificHookRow)).all()] == ["http://127.0.0.1:8/prolific/hooks"]
        # and back on the first URL: the same, the other way round
        ensure_subscription(st.api, st.store, ws, here)
        assert sorted(str(sub["target_url"]) for sub in st.api.subscriptions(ws)) == sorted([here, "http://127.0.0.1:9/their/hooks"])


def test_an_old_subscription_that_cannot_be_deleted_is_tried_again_at_the_next_start(tmp_path: Path) -> None:
    with hooked(tmp_path) as (st, _t, _listings, _receiver):
        ws = st.api.workspaces()[0]["id"]
        here = hook_url(st.server.endpoint_url)

        class Refusing(Listings):
            def delete_subscription(self, subscription_id: str) -> None:
                raise type("Unavailable", (Exception,), {"status": 503})("service unavailable")

        ensure_subscription(Refusing(st.api), st.store, ws, "http://127.0.0.1:8/prolific/hooks")  # does not raise
        with st.store.session() as s:
            assert sorted(r.target_url for r in s.exec(select(ProlificHookRow)).all()) == sorted([here, "http://127.0.0.1:8/prolific/hooks"])
        assert len(st.api.subscriptions(ws)) == 2
        ensure_subscription(st.api, st.store, ws, "http://127.0.0.1:8/prolific/hooks")  # Prolific answers again
        assert [str(sub["target_url"]) for sub in st.api.subscriptions(ws)] == ["http://127.0.0.1:8/prolific/hooks"]


def test_a_listing_that_fails_while_cleaning_up_leaves_the_hooks_of_this_start_on(tmp_path: Path) -> None:
    with hooked(tmp_path) as (st, _t, _listings, _receiver):
        ws = st.api.workspaces()[0]["id"]
        with st.store.session() as s:  # an old start's intent, whose subscription must be looked for by URL
            s.add(ProlificHookRow(workspace_id=ws, event_type="submission.status.change",
                                  target_url="http://127.0.0.1:7/prolific/hooks", state="intent"))

        class Unlisting(Listings):
            def subscriptions(self, workspace_id: str | None = None, enabled: bool = True) -> list[dict[str, object]]:
                raise type("Unavailable", (Exception,), {"status": 503})("service unavailable")

        here = hook_url(st.server.endpoint_url)
        assert ensure_subscription(Unlisting(st.api), st.store, ws, here)  # the secret: hooks stay on
        with st.store.session() as s:
            assert len(s.exec(select(ProlificHookRow)).all()) == 2  # the old row waits for the next start
