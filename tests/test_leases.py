"""Leases: one holder at a time, renewal, expiry and takeover, clean release."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session, SQLModel, create_engine

from campaign.leases import LeaseRow, holder_of, new_holder, release, try_acquire


def _engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    engine = create_engine(f"sqlite:///{tmp_path / 'l.db'}")
    SQLModel.metadata.create_all(engine, tables=[LeaseRow.__table__])  # type: ignore[attr-defined]
    return engine


def test_one_holder_renewal_expiry_and_release(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    a, b = new_holder(), new_holder()
    assert a != b
    with Session(engine) as s1, Session(engine) as s2:
        assert try_acquire(s1, "c1", a, now=100.0, ttl=10.0)
        assert not try_acquire(s2, "c1", b, now=105.0, ttl=10.0)  # held and not expired
        assert try_acquire(s1, "c1", a, now=108.0, ttl=10.0)  # renewal moves the expiry
        assert not try_acquire(s2, "c1", b, now=115.0, ttl=10.0)
        assert holder_of(s2, "c1", now=115.0) == a
        assert try_acquire(s2, "c1", b, now=118.5, ttl=10.0)  # a stopped renewing: b takes over
        assert not try_acquire(s1, "c1", a, now=119.0, ttl=10.0)  # and a cannot take it back
        release(s2, "c1", b)
        assert holder_of(s1, "c1", now=119.0) is None
        assert try_acquire(s1, "c1", a, now=119.0, ttl=10.0)
        assert try_acquire(s2, "c2", b, now=119.0, ttl=10.0)  # campaigns are independent


def test_keeper_divides_campaigns_and_takes_over_from_a_dead_daemon(tmp_path: Path) -> None:
    """Two keepers share four campaigns two and two; when one stops renewing, the other takes all four."""
    from contextlib import contextmanager

    from campaign.leases import LeaseKeeper

    engine = _engine(tmp_path)

    @contextmanager
    def session():  # type: ignore[no-untyped-def]
        with Session(engine) as s:
            yield s

    clock = [1000.0]
    a = LeaseKeeper(session, ttl=10.0, holder="a", now=lambda: clock[0])
    b = LeaseKeeper(session, ttl=10.0, holder="b", now=lambda: clock[0])
    names = ["c1", "c2", "c3", "c4"]
    assert sorted(a.balance(names)[0]) == names  # alone: a takes everything
    assert b.balance(names) == ([], [])  # b is seen now, but nothing is free
    clock[0] += 3
    acquired, released = a.balance(names)
    assert acquired == [] and len(released) == 2  # a marks its surplus ...
    assert b.balance(names) == ([], [])  # ... which is still a's until its next tick
    assert not any(a.renew(n) for n in released)  # ... where a gives it back instead of ticking
    assert sorted(b.balance(names)[0]) == sorted(released)
    assert a.held.isdisjoint(b.held) and a.held | b.held == set(names)
    with Session(engine) as s:
        assert all(holder_of(s, n, clock[0]) == "b" for n in b.held)
    # b dies: no more renewals; a keeps renewing its own and after the TTL takes b's over
    for _ in range(4):
        clock[0] += 3
        for n in sorted(a.held):
            assert a.renew(n)
        a.balance(names)
    assert a.held == set(names)
    # finished campaigns are given back; a clean stop frees everything at once
    a.balance(["c1", "c2"], finished=["c3", "c4"])
    assert a.held == {"c1", "c2"}
    with Session(engine) as s:
        assert holder_of(s, "c3", clock[0]) is None
    a.release_all()
    with Session(engine) as s:
        assert all(holder_of(s, n, clock[0]) is None for n in names)


def test_a_dead_daemon_of_this_machine_is_reaped_at_once_others_wait(tmp_path: Path) -> None:
    """A restarted daemon need not wait a TTL for its own dead predecessor: a holder of this host, boot and
    PID namespace whose process is gone is certainly dead. A live one, one of another host, or an old-style
    name is never taken early."""
    import subprocess
    import sys

    from campaign.leases import dead_neighbour, reap_dead_neighbours

    engine = _engine(tmp_path)
    me = new_holder()
    host, _, _, space = me.split(":")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    dead_pid = int(gone.stdout)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        holders = {
            "dead": f"{host}:{dead_pid}:aaaa0000:{space}",
            "live": f"{host}:{live.pid}:bbbb0000:{space}",
            "other-host": f"elsewhere-{host}:{dead_pid}:cccc0000:{space}",
            "other-space": f"{host}:{dead_pid}:dddd0000:{space}x",
            "old-style": f"{host}:{dead_pid}:eeee0000",
        }
        assert dead_neighbour(holders["dead"], me)
        assert not any(dead_neighbour(h, me) for k, h in holders.items() if k != "dead")
        with Session(engine) as s:
            for campaign, holder in holders.items():
                assert try_acquire(s, campaign, holder, now=100.0, ttl=60.0)
            assert reap_dead_neighbours(s, me, now=110.0) == ["dead"]
            assert try_acquire(s, "dead", me, now=110.0, ttl=60.0)  # no TTL to wait
            for campaign, holder in holders.items():
                if campaign != "dead":
                    assert not try_acquire(s, campaign, me, now=110.0, ttl=60.0)
                    assert holder_of(s, campaign, now=110.0) == holder
    finally:
        live.kill()
        live.wait()


def test_a_daemon_forgets_what_it_kept_of_a_campaign_it_gave_back_and_starts_afresh_on_taking_one(tmp_path: Path) -> None:
    """A campaign's Context keeps running evidence and a Reader between passes: a daemon that gives the
    campaign back must let them go (it kept every campaign it had ever held), and one taking it over
    must start from the store alone."""
    import threading

    from campaign.clock import ManualClock
    from campaign.daemon import RunOptions, Runtime, _Leases, ensure_campaign_row
    from campaign.providers.base import RunServices
    from campaign.spec import load_spec
    from campaign.steps.context import Context
    from campaign.store import Store
    from tests.support.specs import NO_CROWD, campaign, first_propositions, write_spec

    cfg = write_spec(tmp_path / "campaigns.yaml", campaign("kept", task={"kind": "likert"}, budget="10.00",
                                                           propositions=first_propositions(tmp_path, 10), crowd=NO_CROWD))
    loaded = load_spec(cfg).campaigns[0]
    store = Store.open(tmp_path / "state")
    clock = ManualClock()
    ctx = Context(store=store, market=None, campaign=loaded, seed=0, state_dir=tmp_path / "state",  # type: ignore[arg-type]
                  clock=clock, instance=ensure_campaign_row(store, loaded, 0), lock=threading.Lock())
    rt = Runtime(store=store, clock=clock, contexts=[ctx],
                 services=RunServices(store=store, clock=clock, state_dir=tmp_path / "state", seed=0))
    ticked: list[Context] = []
    rt.timed_tick = lambda name: ticked.append  # type: ignore[method-assign]
    leases = _Leases(rt, RunOptions(state_dir=tmp_path / "state", lease_ttl=60.0))
    try:
        ctx.cache["evidence:likert"] = "what an earlier holder's passes left"
        assert leases.keeper.balance([ctx.name])[0] == [ctx.name]
        leases.fresh.add(ctx.name)  # as `_Leases.balance` marks a campaign it takes
        leases.job(ctx.name)()
        assert ticked and ticked[-1] is rt.contexts[0] and rt.contexts[0] is not ctx
        assert rt.contexts[0].cache == {} and rt.contexts[0].instance == ctx.instance
        rt.contexts[0].cache["evidence:likert"] = "this daemon's passes"
        leases.job(ctx.name)()  # still held, not fresh: the same Context, what it kept stays
        assert ticked[-1] is rt.contexts[0] and rt.contexts[0].cache
        leases.keeper.leaving.add(ctx.name)  # surplus: given back before its next tick
        before = len(ticked)
        leases.job(ctx.name)()
        assert len(ticked) == before and ctx.name not in leases.keeper.held
        assert rt.contexts[0].cache == {}
    finally:
        leases.stop()
        store.close()
