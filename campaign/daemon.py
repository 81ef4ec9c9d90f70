"""The daemon: starts what a run needs (store, marketplace client, the built-in marketplace and the
simulated crowds in child processes, where the spec asks for them) and schedules each campaign's short
idempotent jobs on APScheduler.

Each job reads the store, acts, writes the store; jobs of one campaign share a lock so they never
interleave, and a job that raises is logged as an event and simply runs again on the next tick. The
process can be killed at any instant: everything it needs to resume is in the store.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC
from decimal import Decimal
from pathlib import Path
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy.exc import IntegrityError

from campaign.clock import Clock, ScaledClock, WallClock
from campaign.filemodes import private_dir
from campaign.money import fmt, shown
from campaign.spec import SIMULATED_OK, Campaign, Spec
from campaign.steps.budget import EXHAUSTED, SET_KEY
from campaign.steps.context import Context
from campaign.steps.isolation import StepGuard, pending_decisions
from campaign.steps.pipeline import DONE_STATUSES, END_STATUSES, run_pass
from campaign.steps.settle import settle_decisions
from campaign.store import CampaignRow, Store

log = logging.getLogger(__name__)


class RunError(Exception):
    """A run cannot start; the message says why and what to do."""


@dataclass
class RunOptions:
    state_dir: Path = Path("state")
    db: str | None = None
    seed: int = 0
    forever: bool = False
    production: bool = False
    campaigns: tuple[str, ...] = ()
    market_balance: Decimal = Decimal("10000.00")
    max_seconds: float | None = None  # give up after this long (tests)
    lease_ttl: float = 15.0  # wall seconds a campaign's lease lasts unrenewed (shared PostgreSQL stores only)
    market_port: int = 0  # the built-in marketplace's port on 127.0.0.1 (0: any free port)
    say: Callable[[str], None] | None = None  # where to tell the user things they must act on (the worker site)


@dataclass
class Runtime:
    store: Store
    clock: Clock
    contexts: list[Context]
    market_server: Any = None  # campaign.market.server's running server, when the run started one
    crowds: list = field(default_factory=list)
    prolific: Any = None  # campaign.prolific.runtime.ProlificPieces, when a campaign recruits on Prolific
    stop_event: threading.Event = field(default_factory=threading.Event)
    tick_ms: dict[str, list[float]] = field(default_factory=dict)  # each campaign's pass durations
    step_ms: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # campaign -> step -> durations

    def timed_tick(self, name: str) -> Callable[[Context], None]:
        """`tick` recording each step's duration for `name` in `step_ms`."""
        per_step = self.step_ms.setdefault(name, {})
        return lambda ctx: tick(ctx, per_step)


def write_run_stats(rt: Runtime, state_dir: Path) -> None:
    """`<state>/run-stats.json`: each campaign's pass durations (ms) and the requests made to the
    marketplaces this run, which `campaign bench scale` reads."""
    requests = sum(int(getattr(ctx.market, "requests", 0) or 0) for ctx in rt.contexts)
    data = {"tick_ms": {name: [round(t, 2) for t in ms] for name, ms in list(rt.tick_ms.items())}, "requests": requests,
            "step_ms": {name: {step: [round(t, 2) for t in ms] for step, ms in list(steps.items())}
                        for name, steps in list(rt.step_ms.items())}}
    f = state_dir / "run-stats.json"
    tmp = f.with_name(f"run-stats.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, f)


def _clock_file(state_dir: Path) -> Path:
    return state_dir / "market" / "clock.json"


def make_clock(spec_campaigns: list[Campaign], state_dir: Path) -> Clock:
    """Simulated crowds share an accelerated clock with the built-in marketplace; real runs use the wall.

    The simulated time survives a restart (saved under state/market/clock.json), so a resumed simulation
    does not jump back to the wall clock and find its HITs posted in the future.
    """
    sims = [c for c in spec_campaigns if c.crowd.kind == "simulated" and c.marketplace in SIMULATED_OK and not c.endpoint_url]
    if not sims:
        return WallClock()
    speed = max(c.crowd.speed for c in sims)
    start = time.time()
    f = _clock_file(state_dir)
    if f.is_file():
        # exactly where it stopped: a margin would move every restart forward into held work's
        # auto-approval (2 x speed seconds per restart auto-approved held work in a run with many)
        saved = json.loads(f.read_text())
        start = max(start, float(saved["now"]))
    return ScaledClock(speed=speed, start=start)


def saved_clock(state_dir: Path) -> Clock:
    """The simulation clock a finished or interrupted run left behind (the wall clock if none):
    what a tool reading the built-in marketplace's state afterwards must use to see what the run saw."""
    f = _clock_file(state_dir)
    if not f.is_file():
        return WallClock()
    saved = json.loads(f.read_text())
    return ScaledClock(speed=float(saved["speed"]), start=float(saved["now"]))


_clock_lock = threading.Lock()


def save_clock(clock: Clock, state_dir: Path) -> None:
    """Write the clock atomically. Every campaign's tick saves it, on its own thread: one writer at a time
    (the lock), and a temp file of this process and thread's own, so even another process saving into
    the same folder never renames a half-written or vanished file."""
    if isinstance(clock, ScaledClock):
        f = _clock_file(state_dir)
        with _clock_lock:
            f.parent.mkdir(parents=True, exist_ok=True)
            tmp = f.with_name(f"{f.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
            try:
                tmp.write_text(json.dumps({"now": clock.now(), "speed": clock.speed}))
                os.replace(tmp, f)
            finally:
                tmp.unlink(missing_ok=True)


def ensure_campaign_row(store: Store, c: Campaign, seed: int) -> str:
    """Create the campaign's row on first run; on resume refuse a changed spec. Returns the instance id."""
    with store.session() as s:
        row = s.get(CampaignRow, c.name)
        if row is None:
            instance = uuid.uuid4().hex[:12]
            spec = json.loads(json.dumps(asdict(c), default=str))
            spec["instance"] = instance
            s.add(CampaignRow(name=c.name, fingerprint=c.fingerprint(), spec_json=json.dumps(spec, default=str),
                              seed=seed, budget=fmt(c.budget)))
            store.event(c.name, "created", f"campaign created (seed {seed}, budget {shown(c.budget, c.currency)})", session=s)
            return instance
        if row.fingerprint != c.fingerprint():
            raise RunError(
                f"campaign {c.name!r} in the store was started from a different spec (fingerprint {row.fingerprint}, "
                f"now {c.fingerprint()}); resuming would mix two designs. Restore the spec, rename the campaign, "
                "or use another --state/--db."
            )
        if row.seed != seed:
            raise RunError(f"campaign {c.name!r} was started with --seed {row.seed}; resume it with the same seed")
        return json.loads(row.spec_json)["instance"]


def tick(ctx: Context, step_ms: dict[str, list[float]] | None = None) -> None:
    """One pass over a campaign: the steps of `campaign.steps.pipeline.PIPELINE` its status calls for."""
    with ctx.lock:
        with ctx.store.session() as s:
            row = s.get(CampaignRow, ctx.name)
            status = row.status if row is not None else "missing"
        if status == "missing":
            return
        if status in DONE_STATUSES:  # over, but the operator may still settle what was held
            if pending_decisions(ctx.store, ctx.name):
                StepGuard.next_pass(ctx)
                StepGuard(ctx).run("decisions", lambda: settle_decisions(ctx))
            return
        run_pass(ctx, status, step_ms=step_ms)


def _safe(ctx: Context, fn: Callable[[Context], None], state_dir: Path,
          tick_ms: list[float] | None = None) -> Callable[[], None]:
    def job() -> None:
        try:
            started = time.perf_counter()
            fn(ctx)
            if tick_ms is not None:
                tick_ms.append((time.perf_counter() - started) * 1000)
            save_clock(ctx.clock, state_dir)
        except Exception as exc:  # a failing step is an event, not a dead daemon
            log.exception("campaign %s: step failed", ctx.name)
            try:
                ctx.store.event(ctx.name, "step_error", f"{type(exc).__name__}: {exc}", level="error")
            except Exception:
                pass

    return job


def campaign_status(store: Store, name: str) -> str:
    with store.session() as s:
        row = s.get(CampaignRow, name)
        return row.status if row else "missing"


def check_market_knows_store(ctx: Context, market_dir: Path, sample: int = 5) -> None:
    """Refuse to run when the store holds HITs the built-in marketplace does not know.

    That happens when the marketplace's database was deleted or replaced while the store was kept: every
    tick would then fail on every HIT, forever. A few of the newest open HITs are asked for (closed ones
    may have been disposed of); any unknown one
    means the two no longer describe the same campaign.
    """
    from sqlmodel import col, select

    from campaign.marketplaces.base import MarketError, TransientError
    from campaign.store import HitRow

    with ctx.store.session() as s:
        open_hits = select(HitRow).where(HitRow.campaign == ctx.name, HitRow.status == "posted", col(HitRow.hit_id).is_not(None))
        hits = s.exec(open_hits.order_by(col(HitRow.id).desc()).limit(sample)).all()
        n_remote = len(s.exec(open_hits).all())
    unknown = []
    for hit in hits:
        assert hit.hit_id is not None
        try:
            ctx.market.get_hit(hit.hit_id)
        except TransientError:
            continue
        except MarketError:
            unknown.append(hit.hit_id)
    if unknown:
        raise RunError(
            f"campaign {ctx.name!r}: the store holds {n_remote} open HITs that the built-in marketplace at {market_dir} "
            f"does not know (unknown HIT ids: {', '.join(unknown[:3])}{', ...' if len(unknown) > 3 else ''}); its "
            "database was deleted or replaced. Restore the marketplace's folder, or start afresh with another --state."
        )


def _ended(store: Store, name: str) -> bool:
    """Nothing left for this run to do: finished, cancelled, or out of money with no new budget waiting."""
    status = campaign_status(store, name)
    if status in END_STATUSES and pending_decisions(store, name):  # decisions on held rows wait for this run
        return False
    if status == EXHAUSTED:
        return not store.get_kv(name, SET_KEY, "")
    return status in END_STATUSES


def start_runtime(spec: Spec, opts: RunOptions) -> Runtime:
    """Open the store, start the marketplace and crowd where needed, build one Context per campaign."""
    chosen = [c for c in spec.campaigns if not opts.campaigns or c.name in opts.campaigns]
    if not chosen:
        raise RunError(f"no campaign named {', '.join(opts.campaigns)} in {spec.path}")
    for c in chosen:
        if c.marketplace == "mturk" and not opts.production:
            raise RunError(f"campaign {c.name!r} posts to MTurk production and spends real money: add --production to confirm")
    from campaign.marketplaces import preflight
    from campaign.prolific import runtime as prolific_rt

    for c in chosen:
        if (problem := preflight(c.marketplace, c.endpoint_url)) is not None:
            raise RunError(f"campaign {c.name!r}: {problem}; nothing was posted")
    try:
        prolific_rt.check_environment(chosen)
    except prolific_rt.ProlificStartError as exc:
        raise RunError(str(exc)) from None
    private_dir(opts.state_dir)
    store = Store.open(opts.state_dir, opts.db)
    clock = make_clock(chosen, opts.state_dir)
    rt = Runtime(store=store, clock=clock, contexts=[])
    from campaign.marketplaces import open_marketplace

    # the built-in marketplace: the whole marketplace for `local`, the task site for Prolific campaigns
    local = [c for c in chosen if (c.marketplace == "local" and not c.endpoint_url) or prolific_rt.is_prolific(c)]
    endpoint = None
    own = None  # the built-in marketplace's own account: AWS keys in the environment are not for it
    if local:
        from campaign.market.child import MarketConfig, MarketProcess, MarketStartError
        from campaign.market.server import start_market

        public, content_port = prolific_rt.site_addresses(local, opts.market_port)
        market: Any  # a RunningMarket here, or a MarketProcess: endpoint_url, content_url, credentials, stop()
        try:
            if any(prolific_rt.is_prolific(c) for c in local):  # the Prolific door mounts on the worker site here
                rt.market_server = market = start_market(opts.state_dir / "market", clock=clock, mode="prod",
                                                         balance=opts.market_balance, port=opts.market_port,
                                                         public_url=public, content_port=content_port)
            else:  # its own process, on its own core (`campaign.market.child`)
                rt.market_server = market = MarketProcess(MarketConfig(
                    state_dir=opts.state_dir / "market", clock=clock.shared() if isinstance(clock, ScaledClock) else None,
                    balance=opts.market_balance, port=opts.market_port, content_port=content_port, public_url=public,
                    parent=os.getpid()))
        except (OSError, MarketStartError) as exc:
            store.close()
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise RunError(f"the built-in marketplace cannot start on 127.0.0.1:{opts.market_port}: {reason}; "
                           "choose another --market-port") from exc
        endpoint, own = market.endpoint_url, market.credentials
        real = [c.name for c in local if c.crowd.kind == "none" and c.marketplace == "local"]
        if real and opts.say is not None:  # people must be sent there: without it nobody can work the HITs
            opts.say(f"worker site for {', '.join(real)}: {endpoint}/ (add each worker with `campaign market worker add "
                     f"WORKER_ID --state {opts.state_dir / 'market'} --url {endpoint}` and send them the sign-in link it prints)")
        on_prolific = [c for c in local if prolific_rt.is_prolific(c)]
        if on_prolific:
            try:
                rt.prolific = prolific_rt.start_prolific(on_prolific, opts.state_dir, clock, market,
                                                         items_of=prolific_rt.store_items_of(store))
            except Exception as exc:
                market.stop()
                store.close()
                raise RunError(f"Prolific cannot start: {exc}") from exc
            if opts.say is not None:
                for c in on_prolific:
                    opts.say(f"task site for {c.name} (Prolific participants): {prolific_rt.public_url(c, endpoint)}/prolific/start "
                             f"(served here at {endpoint}; HIT frames from {market.content_url})")
    for c in chosen:
        try:
            instance = ensure_campaign_row(store, c, opts.seed)
        except IntegrityError:  # another daemon on a shared store created the row just now
            instance = ensure_campaign_row(store, c, opts.seed)
        in_process = (c.marketplace == "local" and not c.endpoint_url) or prolific_rt.is_prolific(c)
        kind = "local" if prolific_rt.is_prolific(c) else c.marketplace
        marketplace = open_marketplace(kind, (endpoint if in_process else c.endpoint_url),
                                       production_ok=opts.production, credentials=own if in_process else None,
                                       **({"max_rps": c.max_rps} if c.max_rps else {}))
        if prolific_rt.is_prolific(c):
            assert endpoint is not None
            marketplace = prolific_rt.open_market(c, rt.prolific, marketplace, opts.state_dir, endpoint)
        rt.contexts.append(Context(store=store, market=marketplace, campaign=c, seed=opts.seed, state_dir=opts.state_dir,
                                   clock=clock, instance=instance))
    try:
        for ctx in rt.contexts:
            if (ctx.campaign.marketplace == "local" and not ctx.campaign.endpoint_url) or prolific_rt.is_prolific(ctx.campaign):
                check_market_knows_store(ctx, opts.state_dir / "market")
    except RunError:
        if rt.prolific is not None:
            rt.prolific.stop()
        if rt.market_server is not None:
            rt.market_server.stop()
        store.close()
        raise
    sims = [ctx for ctx in rt.contexts if ctx.campaign.crowd.kind == "simulated" and ctx.campaign.marketplace == "local"]
    if sims and endpoint is not None:
        try:
            rt.crowds.append(_start_crowds(sims, endpoint, opts))
        except RuntimeError as exc:
            stop_runtime(rt)
            raise RunError(str(exc)) from None
    for ctx in rt.contexts:
        if ctx.campaign.crowd.kind == "simulated" and ctx.campaign.marketplace == "prolific-local" and endpoint is not None:
            prolific_rt.start_participants(ctx.campaign, rt.prolific, ctx.market, endpoint, ctx.seed, clock)
    return rt


def _start_crowds(contexts: list[Context], endpoint: str, opts: RunOptions) -> Any:
    """One simulated crowd per campaign, of exactly the campaign's `crowd.workers` workers, working only
    that campaign's HITs: `workers: 40` means 40 people answered this campaign, as a reader of the spec
    expects. (One shared crowd let each campaign's workers work the other's HITs: the demo's two campaigns
    of 40 showed 46 and 80 workers.) A lone campaign's crowd is seeded as before, so its scores are the
    same; with several, each pool's seed comes from the run's seed and the campaign's name.

    The crowds run in a child process (`campaign.crowd.child`) on the same simulated clock, so the
    daemon has this process's core to itself (the built-in marketplace runs in its own child too)."""
    from campaign.crowd.child import ChildConfig, CrowdJob, CrowdProcess, InProcessCrowds, child_can_run
    from campaign.rng import stable_seed

    jobs = tuple(CrowdJob(ctx.campaign, ctx.seed, ctx.seed if len(contexts) == 1 else stable_seed(ctx.seed, ctx.name) % 2**31)
                 for ctx in contexts)
    clock = contexts[0].clock
    here = tuple(j for j in jobs if not child_can_run(j.campaign))  # kinds only this process knows
    started: list[Any] = []
    if here:
        started.append(InProcessCrowds(here, endpoint, clock, contexts[0].store))
    away = tuple(j for j in jobs if child_can_run(j.campaign))
    if away:
        shared = clock.shared() if isinstance(clock, ScaledClock) else None
        try:
            started.append(CrowdProcess(ChildConfig(endpoint=endpoint, market_state=opts.state_dir / "market", clock=shared,
                                                    jobs=away, state_dir=opts.state_dir, db=opts.db, parent=os.getpid())))
        except RuntimeError:
            for crowd in started:
                crowd.stop()
            raise
    return _Crowds(started)


class _Crowds:
    """The run's crowds, wherever they run; stopped together."""

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts

    def stop(self) -> None:
        for part in self.parts:
            part.stop()


def stop_runtime(rt: Runtime) -> None:
    for crowd in rt.crowds:
        crowd.stop()
    if rt.prolific is not None:
        rt.prolific.stop()
    if rt.market_server is not None:
        rt.market_server.stop()
    save_clock(rt.clock, rt.contexts[0].state_dir if rt.contexts else Path("state"))
    rt.store.close()


def shared_store(db: str | None) -> bool:
    """A store several daemons may share (a server database); SQLite is one file for one daemon."""
    return db is not None and not db.startswith("sqlite")


def run(spec: Spec, opts: RunOptions, progress: Callable[[Runtime], None] | None = None) -> int:
    """Run until every chosen campaign is finished (or forever); 0 on success, 130 on a signal.

    On SQLite the state directory is locked for this process (a second daemon refuses to start); on a
    shared store the campaigns are divided among the daemons by leases (`campaign.leases`).
    """
    if shared_store(opts.db):
        return _run(spec, opts, progress)
    from campaign.runlock import AlreadyRunning, state_lock

    try:
        with state_lock(opts.state_dir):  # only state_lock raises AlreadyRunning
            return _run(spec, opts, progress)
    except AlreadyRunning as exc:
        raise RunError(str(exc)) from None


def _run(spec: Spec, opts: RunOptions, progress: Callable[[Runtime], None] | None) -> int:
    rt = start_runtime(spec, opts)
    scheduler = BackgroundScheduler(executors={"default": ThreadPoolExecutor(max_workers=4)}, timezone="UTC")
    leases = _Leases(rt, opts) if shared_store(opts.db) else None
    for ctx in rt.contexts:
        job = (_safe(ctx, rt.timed_tick(ctx.name), opts.state_dir, rt.tick_ms.setdefault(ctx.name, [])) if leases is None
               else leases.job(ctx.name))
        scheduler.add_job(job, "interval", seconds=ctx.campaign.poll_interval,
                          id=f"tick:{ctx.name}", max_instances=1, coalesce=True, next_run_time=None)
    got_signal: list[int] = []

    def on_signal(signum, _frame) -> None:
        got_signal.append(signum)
        rt.stop_event.set()

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)} if threading.current_thread() is threading.main_thread() else {}
    scheduler.start()
    for ctx in rt.contexts:  # first tick at once rather than after one interval
        scheduler.modify_job(f"tick:{ctx.name}", next_run_time=_utcnow())
    started = time.monotonic()
    stats_at = started
    ended_at = started
    try:
        while not rt.stop_event.is_set():
            if leases is not None:
                leases.balance(scheduler)
            if progress:
                progress(rt)
            if time.monotonic() - stats_at >= 5.0:
                stats_at = time.monotonic()
                write_run_stats(rt, opts.state_dir)
            if not opts.forever and time.monotonic() >= ended_at:
                # once a second, not on every wake-up: read every 0.2 s, the campaigns' statuses
                # were a twentieth of the daemon's CPU at 47,000 assignments
                ended_at = time.monotonic() + 1.0
                if all(_ended(rt.store, c.name) for c in rt.contexts):
                    break
            if opts.max_seconds is not None and time.monotonic() - started > opts.max_seconds:
                log.warning("giving up after %.0f s", opts.max_seconds)
                return 3
            rt.stop_event.wait(0.2)
    finally:
        scheduler.shutdown(wait=True)
        write_run_stats(rt, opts.state_dir)
        if leases is not None:
            leases.stop()
        if progress:
            progress(rt)
        if got_signal:
            _record_interrupt(rt, got_signal[0])
        stop_runtime(rt)
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return 130 if got_signal else 0


def _record_interrupt(rt: Runtime, signum: int) -> None:
    """An event on every campaign still under way: the run was stopped by a signal, and resumes."""
    name = signal.Signals(signum).name
    for ctx in rt.contexts:
        if not _ended(rt.store, ctx.name):
            rt.store.event(ctx.name, "interrupted", f"daemon stopped by {name}; `campaign run` resumes from the store",
                           level="warning", data={"signal": name})


class _Leases:
    """The daemon's use of leases on a shared store: a campaign's tick runs only while this daemon holds
    its lease (renewed first thing in the tick); every third of a TTL the keeper rebalances. A campaign
    taken over gets a fresh Context, so it resumes from the store exactly as after a restart."""

    def __init__(self, rt: Runtime, opts: RunOptions) -> None:
        from campaign.leases import LeaseKeeper

        self.rt, self.opts = rt, opts
        self.keeper = LeaseKeeper(rt.store.session, opts.lease_ttl)
        self.locks = {ctx.name: threading.Lock() for ctx in rt.contexts}
        self.next_balance = 0.0
        self.fresh: set[str] = set()  # acquired since this daemon last ticked them: rebuild their Context
        self.stopped = threading.Event()
        self.beat = threading.Thread(target=self._beat, name="lease-heartbeat", daemon=True)
        self.beat.start()

    def _beat(self) -> None:
        while not self.stopped.wait(self.keeper.ttl / 3):
            try:
                self.keeper.heartbeat()
            except Exception:  # the store is unreachable: the leases may lapse, which is their point
                log.exception("lease heartbeat failed")

    def stop(self) -> None:
        self.stopped.set()
        self.beat.join(timeout=30)
        self.keeper.release_all()

    def job(self, name: str) -> Callable[[], None]:
        def run_if_held() -> None:
            with self.locks[name]:
                try:
                    held = self.keeper.renew(name)
                except Exception:  # the store is unreachable: do nothing this tick, try again next
                    log.exception("campaign %s: lease renewal failed", name)
                    return
                if not held:
                    return
                i = next(i for i, c in enumerate(self.rt.contexts) if c.name == name)
                if name in self.fresh:  # taken over: start from the store alone, as a restarted daemon does
                    self.fresh.discard(name)
                    old = self.rt.contexts[i]
                    self.rt.contexts[i] = Context(store=old.store, market=old.market, campaign=old.campaign, seed=old.seed,
                                                  state_dir=old.state_dir, clock=old.clock, instance=old.instance)
                _safe(self.rt.contexts[i], self.rt.timed_tick(name), self.opts.state_dir, self.rt.tick_ms.setdefault(name, []))()

        return run_if_held

    def balance(self, scheduler: BackgroundScheduler) -> None:
        if time.monotonic() < self.next_balance:
            return
        self.next_balance = time.monotonic() + self.keeper.ttl / 3
        try:
            statuses = {ctx.name: campaign_status(self.rt.store, ctx.name) for ctx in self.rt.contexts}
            done = [n for n, st in statuses.items() if st in ("finished", "cancelled") and not pending_decisions(self.rt.store, n)]
            acquired, surplus = self.keeper.balance([n for n in statuses if n not in done], done)
        except Exception:
            log.exception("lease rebalancing failed; retrying in %.0f s", self.keeper.ttl / 3)
            return
        for name in acquired:
            self.fresh.add(name)
            self.rt.store.event(name, "lease", f"campaign taken by daemon {self.keeper.holder}")
            log.info("campaign %s: lease taken (%s)", name, self.keeper.holder)
            scheduler.modify_job(f"tick:{name}", next_run_time=_utcnow())
        for name in surplus:
            log.info("campaign %s: lease to be given back to balance the daemons", name)


def _utcnow():
    from datetime import datetime

    return datetime.now(UTC)
