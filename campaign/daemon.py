"""The daemon: opens the store, has each campaign's marketplace provider (`campaign.providers`) start
what the run needs (the built-in marketplace, a recruiting service's pieces, the simulated crowds) and
open the campaign's marketplace, then runs each campaign's short idempotent jobs: on the run's
timeline on virtual time (`campaign.timeline`), on APScheduler otherwise.

Each job reads the store, acts, writes the store; jobs of one campaign share a lock so they never
interleave, and a job that raises is logged as an event and simply runs again on the next tick. The
process can be killed at any instant: everything it needs to resume is in the store.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC
from decimal import Decimal
from pathlib import Path
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy.exc import IntegrityError

from campaign import allocator, ids
from campaign.clock import Clock, ScaledClock, VirtualClock, WallClock, is_virtual
from campaign.filemodes import private_dir
from campaign.marketplaces.base import CountsRequests
from campaign.money import fmt, shown
from campaign.providers.base import Provider, ProviderRun, RunServices, StartError
from campaign.providers.builtin import start_site
from campaign.spec import Campaign, Spec
from campaign.state import DONE, STOPPED, CampaignStatus, Keys
from campaign.steps.context import Context
from campaign.steps.isolation import StepGuard, pending_decisions
from campaign.steps.pipeline import Durations, durations, run_pass
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
    live: bool = False  # simulate on the spec's `speed` x wall time (to watch it) rather than on virtual time


@dataclass
class Runtime:
    store: Store
    clock: Clock
    contexts: list[Context]
    services: RunServices  # what the providers share: the built-in marketplace, the crowds they started
    runs: dict[str, ProviderRun] = field(default_factory=dict)  # marketplace name -> its provider's part of the run
    stop_event: threading.Event = field(default_factory=threading.Event)
    # each campaign's pass durations, and by step (campaign -> step -> durations), in ms: 4-byte floats
    # (`durations()`), as the run's every pass is kept (a list of Python floats took 32 bytes a figure)
    tick_ms: dict[str, Durations] = field(default_factory=dict)
    step_ms: dict[str, dict[str, Durations]] = field(default_factory=dict)

    def timed_tick(self, name: str) -> Callable[[Context], None]:
        """`tick` recording each step's duration for `name` in `step_ms`."""
        per_step = self.step_ms.setdefault(name, {})
        return lambda ctx: tick(ctx, per_step)


STATS_EVERY = 5.0  # wall seconds at least between two writes of run-stats.json during a run
STATS_SHARE = 0.01  # and at most this share of the daemon's time: the file holds every pass of the run


def write_run_stats(rt: Runtime, state_dir: Path) -> float:
    """`<state>/run-stats.json`: each campaign's pass durations (ms) and the requests made to the
    marketplaces this run, which `campaign bench scale` reads; returns the seconds it took."""
    began = time.monotonic()
    counting = [ctx.market for ctx in rt.contexts if isinstance(ctx.market, CountsRequests)]
    by_op: dict[str, int] = {}
    for market in counting:
        for op, n in list(market.requests_by_op.items()):
            by_op[op] = by_op.get(op, 0) + n
    data = {"tick_ms": {name: [round(t, 2) for t in ms] for name, ms in list(rt.tick_ms.items())},
            "requests": sum(m.requests for m in counting), "requests_by_op": dict(sorted(by_op.items())),
            "step_ms": {name: {step: [round(t, 2) for t in ms] for step, ms in list(steps.items())}
                        for name, steps in list(rt.step_ms.items())}}
    f = state_dir / "run-stats.json"
    tmp = f.with_name(f"run-stats.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data))
        os.replace(tmp, f)
    except OSError as exc:  # a full disk: the statistics wait, the campaigns do not stop for them
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        log.warning("run statistics not written (%s); tried again later", exc.strerror or exc)
    return time.monotonic() - began


def next_stats_at(now: float, took: float) -> float:
    """When to write the run's statistics again: every `STATS_EVERY` s, less often once writing them
    takes more than `STATS_SHARE` of that. The file grows with the run (every pass's duration) and was
    rewritten every 5 s regardless: 4.5% of a daemon's CPU 35 minutes into 470,000 propositions. The
    last write, when the run ends, is always made."""
    return now + max(STATS_EVERY, took / STATS_SHARE)


def _clock_file(state_dir: Path) -> Path:
    return state_dir / "market" / "clock.json"


def make_clock(spec_campaigns: list[Campaign], state_dir: Path, live: bool = False) -> Clock:
    """Simulated crowds run on virtual time (`VirtualClock`: as fast as the CPU allows, decided by the
    seed alone), or with `live` on a `ScaledClock` at the spec's speed, to be watched; real runs use
    the wall clock.

    The simulated time survives a restart (saved under state/market/clock.json), so a resumed simulation
    does not jump back to the wall clock and find its HITs posted in the future.
    """
    from campaign import providers

    sims = [c for c in spec_campaigns if providers.of(c).simulates(c)]
    if not sims:
        return _followed_clock(spec_campaigns)
    speed = max(c.crowd.speed for c in sims)
    start = time.time()
    f = _clock_file(state_dir)
    if f.is_file():
        # exactly where it stopped: a margin would move every restart forward into held work's
        # auto-approval (2 x speed seconds per restart auto-approved held work in a run with many)
        saved = json.loads(f.read_text())
        start = max(start, float(saved["now"]))
    if not live and len(sims) == len(spec_campaigns):  # a real crowd in the run keeps the time real-paced
        return VirtualClock(start=start, speed=speed)
    return ScaledClock(speed=speed, start=start)


def _followed_clock(spec_campaigns: list[Campaign]) -> Clock:
    """The time of the standalone marketplace the campaigns' simulated crowds work from outside the run
    (`Provider.clock_url`; see `campaign.marketplaces.remote_clock`), or the wall clock when there is none. Two
    marketplaces on different clocks cannot both be followed: refused, naming them."""
    from campaign import providers
    from campaign.marketplaces.remote_clock import ClockUnavailable, marketplace_clock

    urls = sorted({u for c in spec_campaigns if (u := providers.of(c).clock_url(c)) is not None})
    if not urls:
        return WallClock()
    try:
        clocks = [(u, marketplace_clock(u)) for u in urls]
    except ClockUnavailable as exc:
        raise RunError(f"the simulated crowd's marketplace keeps the time: {exc}") from None
    speeds = {u: c.speed for u, c in clocks}
    if len(set(speeds.values())) > 1:
        raise RunError("the campaigns' marketplaces run on different clocks ("
                       + ", ".join(f"{u} at speed {v:g}" for u, v in speeds.items()) + "): run them in separate daemons")
    return clocks[0][1]


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
    if isinstance(clock, (ScaledClock, VirtualClock)):
        f = _clock_file(state_dir)
        with _clock_lock:
            f.parent.mkdir(parents=True, exist_ok=True)
            tmp = f.with_name(f"{f.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
            try:
                tmp.write_text(json.dumps({"now": clock.now(), "speed": clock.speed}))
                os.replace(tmp, f)
            finally:
                tmp.unlink(missing_ok=True)


def spec_changes(stored: Any, now: Any, limit: int = 5) -> list[str]:
    """What differs between the spec a campaign was started from and the one given now, as `path: was ->
    now` (at most `limit`, values cut short), so a refused resume says which line to restore: a bare
    fingerprint told the researcher nothing. Keys the store adds (`instance`, `hit_type_tag`) and keys
    only one side has (a field added by a later version) are left out."""
    out: list[str] = []

    def short(v: Any) -> str:
        text = json.dumps(v, default=str)
        return text if len(text) <= 40 else text[:37] + "..."

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) & set(b)):
                if path or k not in ("instance", "hit_type_tag"):
                    walk(a[k], b[k], f"{path}.{k}" if path else str(k))
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{path}[{i}]")
        elif a != b:
            out.append(f"{path}: {short(a)} -> {short(b)}")

    walk(stored, now, "")
    return out[:limit] + ([f"and {len(out) - limit} more"] if len(out) > limit else [])


def ensure_campaign_row(store: Store, c: Campaign, seed: int) -> str:
    """Create the campaign's row on first run; on resume refuse a changed spec. Returns the instance id."""
    with store.session() as s:
        row = s.get(CampaignRow, c.name)
        if row is None:
            # the run's id source: random facing people, the seed's in a simulation, where the instance
            # names the campaign's HIT type and so seeds its HITs' ids (random ones made runs differ)
            instance = ids.random_bytes(6, scope=f"campaign-instance:{c.name}").hex()
            spec = json.loads(json.dumps(asdict(c), default=str))
            spec["instance"] = instance
            spec["hit_type_tag"] = f"campaign-{instance}"  # its HITs' own HIT type (`steps.post.hit_type_id`)
            s.add(CampaignRow(name=c.name, fingerprint=c.fingerprint(), spec_json=json.dumps(spec, default=str),
                              seed=seed, budget=fmt(c.budget)))
            store.event(c.name, "created", f"campaign created (seed {seed}, budget {shown(c.budget, c.currency)})", session=s)
            return instance
        if row.fingerprint != c.fingerprint():
            changed = spec_changes(json.loads(row.spec_json or "{}"), json.loads(json.dumps(asdict(c), default=str)))
            what = f": {'; '.join(changed)}" if changed else f" (fingerprint {row.fingerprint}, now {c.fingerprint()})"
            raise RunError(
                f"campaign {c.name!r} in the store was started from a different spec{what}; resuming would mix two "
                "designs. Restore the spec, rename the campaign, or use another --state/--db."
            )
        if row.seed != seed:
            raise RunError(f"campaign {c.name!r} was started with --seed {row.seed}; resume it with the same seed")
        return json.loads(row.spec_json)["instance"]


def tick(ctx: Context, step_ms: dict[str, Durations] | None = None) -> None:
    """One pass over a campaign: the steps of `campaign.steps.pipeline.PIPELINE` its status calls for."""
    with ctx.lock:
        with ctx.store.session() as s:
            row = s.get(CampaignRow, ctx.name)
            status = row.status if row is not None else "missing"
        if status == "missing":
            return
        if status in DONE:  # over, but the operator may still settle what was held
            if pending_decisions(ctx.store, ctx.name):
                StepGuard.next_pass(ctx)
                StepGuard(ctx).run("decisions", lambda: settle_decisions(ctx))
            return
        run_pass(ctx, status, step_ms=step_ms)


class Repeats:
    """Which failures to report when the same one comes back pass after pass: the 1st, 2nd, 4th, 8th, ...
    in a row (`count` says which), so a disk that stays full for an hour does not fill the log or the
    store (before: a traceback and an event per pass and campaign, 2.4 a second)."""

    def __init__(self) -> None:
        self.last: tuple[str, str] | None = None
        self.count = 0

    def failed(self, exc: BaseException) -> bool:
        """Count `exc`; True when this one is to be reported."""
        what = (type(exc).__name__, str(exc))
        self.count = self.count + 1 if what == self.last else 1
        self.last = what
        return not self.count & (self.count - 1)

    def ok(self) -> None:
        self.last, self.count = None, 0

    def again(self) -> str:
        return f" ({self.count} passes in a row)" if self.count > 1 else ""


def _safe(ctx: Context, fn: Callable[[Context], None], state_dir: Path,
          tick_ms: Durations | None = None) -> Callable[[], None]:
    """The campaign's pass as a scheduler job that never raises. A failure the steps' own guard did not
    catch (the store itself failing, a full disk) is logged with its traceback and written as an event,
    and the same failure again only as `Repeats` says."""
    repeats = Repeats()

    def job() -> None:
        try:
            started = time.perf_counter()
            fn(ctx)
            if tick_ms is not None:
                tick_ms.append((time.perf_counter() - started) * 1000)
            save_clock(ctx.clock, state_dir)
        except Exception as exc:  # a failing step is an event, not a dead daemon
            if not repeats.failed(exc):
                return
            if repeats.count == 1:
                log.exception("campaign %s: step failed", ctx.name)
            else:
                log.error("campaign %s: step failed again%s: %s: %s", ctx.name, repeats.again(), type(exc).__name__, exc)
            try:
                ctx.store.event(ctx.name, "step_error", f"{type(exc).__name__}: {exc}{repeats.again()}", level="error")
            except Exception:
                pass
        else:
            repeats.ok()

    return job


def campaign_status(store: Store, name: str) -> str:
    with store.session() as s:
        row = s.get(CampaignRow, name)
        return row.status if row else "missing"


def _ended(store: Store, name: str) -> bool:
    """Nothing left for this run to do: finished, cancelled, or out of money with no new budget waiting."""
    status = campaign_status(store, name)
    if status in STOPPED and pending_decisions(store, name):  # decisions on held rows wait for this run
        return False
    if status == CampaignStatus.BUDGET_EXHAUSTED:
        return not store.get_kv(name, Keys.BUDGET_SET, "")
    return status in STOPPED


def start_runtime(spec: Spec, opts: RunOptions) -> Runtime:
    """Open the store, let each campaign's marketplace provider start what the run needs (`campaign.providers`),
    build one Context per campaign and start the simulated crowds."""
    from campaign import providers

    chosen = [c for c in spec.campaigns if not opts.campaigns or c.name in opts.campaigns]
    if not chosen:
        raise RunError(f"no campaign named {', '.join(opts.campaigns)} in {spec.path}")
    try:
        groups = providers.grouped(chosen)
    except KeyError as exc:
        raise RunError(str(exc.args[0])) from None
    for provider, campaigns in groups:
        if (problem := provider.preflight(campaigns, production=opts.production)) is not None:
            raise RunError(problem)
    # several daemons on one store do not share a virtual clock yet: they keep the scaled one. Before the
    # store: a marketplace whose time cannot be read refuses the run with nothing written
    clock = make_clock(chosen, opts.state_dir, live=opts.live or opts.forever or shared_store(opts.db))
    private_dir(opts.state_dir)
    store = Store.open(opts.state_dir, opts.db)
    services = RunServices(store=store, clock=clock, state_dir=opts.state_dir, seed=opts.seed, db=opts.db,
                           production=opts.production, market_port=opts.market_port, market_balance=opts.market_balance,
                           say=opts.say)
    rt = Runtime(store=store, clock=clock, contexts=[], services=services)
    if is_virtual(clock):  # the marketplace's and emulator's ids from the seed too (`campaign.ids`)
        ids.install(opts.seed, ids.next_epoch(opts.state_dir))
    try:
        _start_providers(rt, chosen, groups, opts)
    except StartError as exc:
        stop_runtime(rt, save=False)
        raise RunError(str(exc)) from None
    return rt


def _start_providers(rt: Runtime, chosen: list[Campaign], groups: list[tuple[Provider, list[Campaign]]],
                     opts: RunOptions) -> None:
    """The built-in marketplace once (if any provider needs it), then each provider's pieces, then each
    campaign's marketplace in the spec's order, then the crowds."""
    services = rt.services
    needs = None
    on_site: list[str] = []  # the campaigns served by the built-in marketplace
    for provider, campaigns in groups:
        need = provider.site_needs(campaigns, market_port=opts.market_port, virtual=is_virtual(rt.clock))
        if need is not None:
            needs = need if needs is None else needs.merged(need)
            on_site += [c.name for c in campaigns]
    if needs is not None:
        site = start_site(services, needs)
        from campaign.market.child import MarketProcess

        if isinstance(site.running, MarketProcess):  # in a child process: its restarts go to the campaigns' events
            def restarted(message: str) -> None:
                for name in on_site:
                    rt.store.event(name, "marketplace_restarted", message, level="warning")
            site.running.on_restart = restarted
    run_of: dict[str, ProviderRun] = {}  # campaign name -> its provider's run
    for provider, campaigns in groups:
        run = rt.runs[provider.name] = provider.start(campaigns, services)
        run_of.update((c.name, run) for c in campaigns)
    for c in chosen:
        try:
            instance = ensure_campaign_row(rt.store, c, opts.seed)
        except IntegrityError:  # another daemon on a shared store created the row just now
            instance = ensure_campaign_row(rt.store, c, opts.seed)
        rt.contexts.append(Context(store=rt.store, market=run_of[c.name].open(c), campaign=c, seed=opts.seed,
                                   state_dir=opts.state_dir, clock=rt.clock, instance=instance))
    for ctx in rt.contexts:
        run_of[ctx.name].check(ctx)
    for provider, campaigns in groups:
        names = {c.name for c in campaigns}
        rt.runs[provider.name].start_crowds([ctx for ctx in rt.contexts if ctx.name in names])


def stop_runtime(rt: Runtime, save: bool = True) -> None:
    """Stop what the run started, last started first; `save`: keep the simulated time for a resume."""
    for crowd in rt.services.crowds:
        crowd.stop()
    for run in reversed(list(rt.runs.values())):
        run.stop()
    if rt.services.site is not None:
        rt.services.site.stop()
    if save:
        save_clock(rt.clock, rt.services.state_dir)
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


PASS_THREADS = 4  # campaigns' passes run at once in one daemon
ALERTS_EVERY = 5.0  # wall seconds between a campaign's alerts steps in a daemon on the wall clock (`steps.control.alerts`)


def make_scheduler(threads: int = PASS_THREADS) -> BackgroundScheduler:
    """The daemon's scheduler: each campaign's pass an interval job on a pool of `threads`.

    A pass waiting in the pool's queue runs however late it is (`misfire_grace_time=None`): with
    APScheduler's default of 1 s, a daemon holding more campaigns than its threads could pass within a
    second dropped the late ones, and the same ones again on every round: at 470,000 propositions (20
    campaigns a daemon) some campaigns had 8 passes in 18 minutes where others had 250, and their HITs
    were not posted. Run late instead, each pass joins the back of the queue: every campaign gets its
    turn, round after round (`coalesce` still folds the intervals missed meanwhile into one pass)."""
    return BackgroundScheduler(executors={"default": ThreadPoolExecutor(max_workers=threads)}, timezone="UTC",
                               job_defaults={"misfire_grace_time": None, "coalesce": True})


def _run(spec: Spec, opts: RunOptions, progress: Callable[[Runtime], None] | None) -> int:
    from campaign.web.loopback import clear_routes

    allocator.limit_arenas()  # before the run's threads: they share malloc's arenas (`campaign.allocator`)
    try:
        rt = start_runtime(spec, opts)
        if isinstance(rt.clock, VirtualClock):
            return _run_timeline(rt, rt.clock, opts, progress)
    finally:
        ids.uninstall()
        clear_routes()
    scheduler = make_scheduler()
    leases = _Leases(rt, opts) if shared_store(opts.db) else None
    for ctx in rt.contexts:
        ctx.alerts_every = ALERTS_EVERY
        job = (_safe(ctx, rt.timed_tick(ctx.name), opts.state_dir, rt.tick_ms.setdefault(ctx.name, durations())) if leases is None
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
    stats_at = started + STATS_EVERY
    ended_at = started
    trimmer = allocator.Trimmer()
    try:
        while not rt.stop_event.is_set():
            trimmer.maybe()  # malloc's free pages back to the system every few seconds
            if leases is not None:
                leases.balance(scheduler)
            if progress:
                progress(rt)
            if time.monotonic() >= stats_at:
                stats_at = next_stats_at(time.monotonic(), write_run_stats(rt, opts.state_dir))
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
        if leases is not None:
            leases.stop()
        _wind_down(rt, opts, progress, got_signal, old)
    return 130 if got_signal else 0


def _wind_down(rt: Runtime, opts: RunOptions, progress: Callable[[Runtime], None] | None, got_signal: list[int],
               old_handlers: dict[signal.Signals, signal._HANDLER]) -> None:
    """The end of every run, however it ended: the run's statistics, the last progress view, an event if a
    signal stopped it, everything it started stopped, and the signal handlers it replaced put back."""
    try:
        write_run_stats(rt, opts.state_dir)
        if progress:
            progress(rt)
        if got_signal:
            _record_interrupt(rt, got_signal[0])
    finally:  # whatever failed above (the store on a full disk), what the run started is stopped
        try:
            stop_runtime(rt)
        finally:
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)


def _run_timeline(rt: Runtime, clock: VirtualClock, opts: RunOptions, progress: Callable[[Runtime], None] | None) -> int:
    """A simulated run on virtual time (`campaign.timeline`): each campaign's pass every `poll_interval`
    x `speed` simulated seconds, the crowds stepped in between, all on this thread, until every campaign
    has ended. Whether they have is asked at every instant, so where the run stops is the seed's too."""
    from campaign.timeline import Timeline

    timeline = Timeline(clock)
    for ctx in rt.contexts:
        timeline.add_pass(ctx.name, _safe(ctx, rt.timed_tick(ctx.name), opts.state_dir, rt.tick_ms.setdefault(ctx.name, durations())),
                          ctx.campaign.poll_interval * clock.speed)

    crowd_repeats = Repeats()

    def crowd_failed(exc: Exception) -> None:
        if crowd_repeats.failed(exc):
            log.warning("simulated crowd: %s%s", exc, crowd_repeats.again())

    for crowd in rt.services.sim_crowds:
        timeline.add_crowd(crowd, on_error=crowd_failed)
    got_signal: list[int] = []

    def on_signal(signum, _frame) -> None:
        got_signal.append(signum)
        rt.stop_event.set()

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)} if threading.current_thread() is threading.main_thread() else {}
    started = time.monotonic()
    shown_at = started
    stats_at = started + STATS_EVERY
    code = 0
    try:
        while not rt.stop_event.is_set():
            if all(_ended(rt.store, c.name) for c in rt.contexts) or not timeline.step():
                break
            wall = time.monotonic()
            if progress and wall - shown_at >= 0.2:
                shown_at = wall
                progress(rt)
            if wall >= stats_at:
                stats_at = next_stats_at(wall, write_run_stats(rt, opts.state_dir))
            if opts.max_seconds is not None and wall - started > opts.max_seconds:
                log.warning("giving up after %.0f s", opts.max_seconds)
                code = 3
                break
    finally:
        _wind_down(rt, opts, progress, got_signal, old)
    return 130 if got_signal else code


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
                i = next(i for i, c in enumerate(self.rt.contexts) if c.name == name)
                if not held:  # given back or lost: what this daemon kept of it (its evidence, its Reader) goes
                    if self.rt.contexts[i].cache:
                        self.rt.contexts[i] = _emptied(self.rt.contexts[i])
                    return
                if name in self.fresh:  # taken over: start from the store alone, as a restarted daemon does
                    self.fresh.discard(name)
                    self.rt.contexts[i] = _emptied(self.rt.contexts[i])
                _safe(self.rt.contexts[i], self.rt.timed_tick(name), self.opts.state_dir, self.rt.tick_ms.setdefault(name, durations()))()

        return run_if_held

    def balance(self, scheduler: BackgroundScheduler) -> None:
        if time.monotonic() < self.next_balance:
            return
        self.next_balance = time.monotonic() + self.keeper.ttl / 3
        try:
            statuses = {ctx.name: campaign_status(self.rt.store, ctx.name) for ctx in self.rt.contexts}
            done = [n for n, st in statuses.items() if st in DONE and not pending_decisions(self.rt.store, n)]
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


def _emptied(old: Context) -> Context:
    """The campaign's Context with nothing kept from earlier passes."""
    return Context(store=old.store, market=old.market, campaign=old.campaign, seed=old.seed, state_dir=old.state_dir,
                   clock=old.clock, instance=old.instance, alerts_every=old.alerts_every)


def _utcnow():
    from datetime import datetime

    return datetime.now(UTC)
