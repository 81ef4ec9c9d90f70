"""`campaign report NAME`: one self-contained HTML page a researcher can show in a lab meeting.

Per stage: the ranked items (score, uncertainty where the export has one, n) in a table, the score
distribution on the stage's own scale, scores by rank with their uncertainty, agreement (Fleiss' kappa
over categorical labels, Kendall's W where every answer is a ranking, and each worker's correlation with
the rest, excluded and blocked workers included and marked), and, where the stage ran in adaptive
batches, the ranking uncertainty per batch. For the campaign: what quality control did and why, and the
spend split into rewards, fees and bonuses over time.

Presentation follows the columns and labels each stage actually has, never the name of its task kind,
so a new kind gets a sensible page without touching this module. The page is rendered by Jinja2 with
autoescape (item texts, worker ids and feedback come from outside) and draws its charts as inline SVG:
no scripts, nothing fetched.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from markupsafe import Markup, escape
from sqlmodel import func, select

from campaign import report_svg as svg
from campaign.ledger import totals
from campaign.metrics import agreement as _agreement_metrics
from campaign.metrics.agreement import fleiss
from campaign.money import CURRENCY_SIGNS, shown
from campaign.pay import read_stage_pay, work_time_text
from campaign.readmodel.definitions import excluded_text
from campaign.readmodel.retest import retest_figures
from campaign.spec import currency_of
from campaign.state import AssignmentStatus, CampaignStatus, Keys, LedgerKind, WorkerStanding
from campaign.store import AssignmentRow, CampaignRow, HitRow, JudgmentRow, KVRow, LedgerRow, Store, WorkerRow
from campaign.tasks.base import TRAP_PREFIX

# (unit, worker, label) triples -> kappa over unequal rater counts and nominal alpha, where the metrics
# module has it; otherwise kappa over the units that share the most common rater count (fleiss_modal)
_CATEGORICAL: Callable[[list[tuple[Any, Any, Any]]], dict[str, Any]] | None = getattr(
    _agreement_metrics, "categorical_agreement", None)
TOP_ROWS = 20  # rows of each stage's table shown before "all N items"
CATEGORICAL_MAX = 12  # at most this many distinct label values count as categories for kappa

# ------------------------------------------------------------------------------ pure figures


def worker_agreement(judgments: Sequence[tuple[str, Hashable, float]], min_units: int = 3) -> dict[str, float]:
    """Pearson correlation of each worker's labels with the mean of the other workers' labels on the same
    units (item, or item within a HIT), for workers with at least `min_units` shared units."""
    by_unit: dict[Hashable, list[tuple[str, float]]] = defaultdict(list)
    for worker, unit, value in judgments:
        by_unit[unit].append((worker, value))
    pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for labels in by_unit.values():
        if len(labels) < 2:
            continue
        total = sum(v for _, v in labels)
        for worker, v in labels:
            pairs[worker].append((v, (total - v) / (len(labels) - 1)))
    out = {}
    for worker, ps in pairs.items():
        if len(ps) < min_units:
            continue
        xs, ys = [p[0] for p in ps], [p[1] for p in ps]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxy = sum((x - mx) * (y - my) for x, y in ps)
        sx, sy = math.sqrt(sum((x - mx) ** 2 for x in xs)), math.sqrt(sum((y - my) ** 2 for y in ys))
        out[worker] = sxy / (sx * sy) if sx > 0 and sy > 0 else 0.0
    return out


def is_ranking(answers: Mapping[Any, Sequence[float]]) -> bool:
    """True when every answer's labels are a permutation of 1..k (k >= 2): the workers ordered items."""
    if not answers:
        return False
    for values in answers.values():
        if len(values) < 2 or sorted(values) != [float(k) for k in range(1, len(values) + 1)]:
            return False
    return True


def kendall_w(rankings: Sequence[Sequence[float]]) -> float | None:
    """Kendall's coefficient of concordance of m workers' rankings of the same n items (no ties)."""
    m, n = len(rankings), len(rankings[0]) if rankings else 0
    if m < 2 or n < 2:
        return None
    sums = np.asarray(rankings, dtype=float).sum(axis=0)
    s = float(((sums - sums.mean()) ** 2).sum())
    return 12 * s / (m ** 2 * (n ** 3 - n))


def fleiss_modal(units: Mapping[Any, Sequence[float]]) -> dict[str, Any] | None:
    """Fleiss' kappa over the units with the most common number of raters (kappa needs equal numbers)."""
    sizes = Counter(len(v) for v in units.values() if len(v) >= 2)
    if not sizes:
        return None
    raters = max(sizes.items(), key=lambda kv: (kv[1], kv[0]))[0]
    chosen = [v for v in units.values() if len(v) == raters]
    cats = sorted({x for v in chosen for x in v})
    if len(cats) < 2 or len(cats) > CATEGORICAL_MAX:
        return None
    index = {c: k for k, c in enumerate(cats)}
    counts = np.zeros((len(chosen), len(cats)))
    for row, v in enumerate(chosen):
        for x in v:
            counts[row, index[x]] += 1
    p_bar, kappa = fleiss(counts)
    return {"kappa": kappa, "agreement": p_bar, "units": len(chosen), "of_units": len(units), "raters": raters,
            "categories": len(cats)}


def score_scale(rows: Sequence[Mapping[str, Any]], labels: Sequence[float]) -> tuple[float, float, float, bool]:
    """(lo, hi, bin width, on_label_scale) for a stage's scores.

    Scores that are means of labels (the export has `n` and `sd`) are shown on the labels' own scale
    (1..5 ratings, 0..1 marks); any other score on a range widened around the data.
    """
    scores = [float(r["score"]) for r in rows if r.get("score") is not None]
    if scores and labels and "n" in rows[0] and "sd" in rows[0]:
        lo, hi = min(labels), max(labels)
        if hi > lo and lo <= min(scores) and max(scores) <= hi:
            return lo, hi, svg.nice_step(hi - lo, 10), True
    if not scores:
        return 0.0, 1.0, 0.1, False
    lo, hi, step = svg.nice_range(min(scores), max(scores), 8)
    return lo, hi, step, False


def possible_means(labels: Sequence[float], ns: Iterable[int], cap: int = 24) -> list[float] | None:
    """Every value a mean of n labels can take, for each n in `ns`, when the labels lie on a whole grid
    (0/1 marks, 1..5 ratings): lo + j·u/n. None when the labels are not on such a grid or there would be
    more than `cap` values (then ordinary bins read better)."""
    from fractions import Fraction

    values = sorted({Fraction(v).limit_denominator(1000) for v in labels})
    sizes = sorted({int(n) for n in ns if n and int(n) > 0})
    if len(values) < 2 or not sizes:
        return None
    unit = Fraction(0)
    for a, b in zip(values, values[1:]):
        unit = b - a if unit == 0 else Fraction(math.gcd(unit.numerator * (b - a).denominator, (b - a).numerator * unit.denominator),
                                                unit.denominator * (b - a).denominator)
    lo, hi = values[0], values[-1]
    steps = (hi - lo) / unit
    if steps.denominator != 1 or steps > 20:
        return None
    out = {lo + Fraction(j) * unit / n for n in sizes for j in range(int(steps) * n + 1)}
    return [float(v) for v in sorted(out)] if len(out) <= cap else None


def uncertainty(row: Mapping[str, Any]) -> tuple[float | None, str]:
    """A row's uncertainty and what it is: the export's own, or the standard error of a mean of labels."""
    if row.get("uncertainty") is not None:
        return float(row["uncertainty"]), "uncertainty (standard error of the score)"
    if row.get("sd") is not None and row.get("n"):
        n = int(row["n"])
        return (float(row["sd"]) / math.sqrt(n) if n > 1 else None), "standard error of the mean (sd/√n)"
    return None, ""


def spend_series(charges: Iterable[tuple[float, str, str, str]], start: float) -> dict[str, list[tuple[float, Decimal]]]:
    """Cumulative rewards, fees and bonuses (and their total) over seconds since `start`, from ledger
    charges (created_at, kind, amount, fee): an amount includes its fee; `bonus_charge` is a bonus."""
    out: dict[str, list[tuple[float, Decimal]]] = {"rewards": [], "fees": [], "bonuses": [], "total": []}
    acc = dict.fromkeys(out, Decimal("0.00"))
    for ts, kind, amount, fee in sorted(charges):
        a, f = Decimal(amount), Decimal(fee)
        acc["fees"] += f
        acc["bonuses" if kind == LedgerKind.BONUS_CHARGE else "rewards"] += a - f
        acc["total"] += a
        for k in out:
            out[k].append((max(ts - start, 0.0), acc[k]))
    return out


# ------------------------------------------------------------------------------ what the page shows


class Label(NamedTuple):
    """One judgment with what the report needs about its assignment."""

    stage: str
    worker: str
    item: str
    value: float
    excluded: bool
    assignment: str
    hit: str
    status: str


@dataclass
class StageView:
    name: str
    kind: str
    rows: list[dict[str, Any]]
    source: str
    columns: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    labels: int = 0
    labels_excluded: int = 0
    hits: int = 0
    charts: list[dict[str, Any]] = field(default_factory=list)
    agreement: list[dict[str, Any]] = field(default_factory=list)
    workers: list[dict[str, Any]] = field(default_factory=list)
    worst: dict[str, Any] | None = None
    gold: list[dict[str, Any]] = field(default_factory=list)
    gold_total: int = 0
    uncertainty_note: str = ""
    decimals: dict[str, int | None] = field(default_factory=dict)
    design: str = ""
    retest: dict[str, Any] | None = None  # {"items", "pearson", "spearman", "share"} when the stage has `repeat:`
    pay: str = ""  # "median work time 1 min 05 s, $3.32 an hour" (campaign.pay), or "" before any timed approved work


HEADINGS = {"rank": "rank", "item": "item", "score": "score", "uncertainty": "± SE", "n": "n", "sd": "sd",
            "comparison_score": "comparisons' score", "comparison_uncertainty": "± SE"}


def _decimals(rows: Sequence[Mapping[str, Any]], column: str) -> int | None:
    """Decimals for a whole column: None for whole numbers, 3 for scores and their uncertainty, else 2."""
    values = [r.get(column) for r in rows]
    if not any(isinstance(v, float) and not v.is_integer() for v in values):
        return None
    return 3 if column in ("score", "uncertainty", "comparison_score", "comparison_uncertainty") else 2


def _cell(value: Any, decimals: int | None) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, bool) or value in ("True", "False"):
        return "yes" if value in (True, "True") else ""
    if isinstance(value, float | int):
        return f"{value:.{decimals}f}" if decimals is not None else f"{value:g}"
    return str(value)


def _stage_rows(store: Store, name: str, stage: Mapping[str, Any], final: Path | None) -> tuple[list[dict[str, Any]], str]:
    if final is not None and final.is_file():
        rows = [json.loads(line) for line in final.read_text(encoding="utf-8").splitlines() if line.strip()]
        return rows, f"the campaign's final export ({final.name})"
    from campaign.readmodel.scores import compute_scores

    try:
        rows = compute_scores(store, name, stage["name"], stage["kind"])
    except (AttributeError, KeyError, NotImplementedError):  # a kind whose scores exist only once it finishes
        return [], "not scored yet: this stage's scores are computed when it finishes"
    return rows, "computed from the store now (labels kept by quality control, approved work only)"


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts)) if ts else ""


def _time_unit(span: float) -> tuple[float, str]:
    if span > 3 * 3600:
        return 3600.0, "hours"
    if span > 180:
        return 60.0, "minutes"
    return 1.0, "seconds"


def _money(d: Decimal, currency: str = "USD") -> str:
    return shown(d, currency)


def _held_rows(store: Store, name: str) -> list[dict[str, Any]]:
    from campaign.held import held_rows

    return held_rows(store, name, include_settled=True)


def build_context(store: Store, name: str, export_dir: Path | None = None) -> dict[str, Any]:
    """Everything the template shows, read from the store (and the final export in `export_dir`)."""
    with store.session() as s:
        camp = s.get(CampaignRow, name)
        if camp is None:
            raise KeyError(f"no campaign named {name!r}")
        judgments = [Label(j.stage, j.worker_id, j.item_key, j.value, j.excluded, j.assignment_id, hit_key, status)
                     for j, hit_key, status in s.exec(
                         select(JudgmentRow, AssignmentRow.hit_key, AssignmentRow.status)
                         .join(AssignmentRow, AssignmentRow.assignment_id == JudgmentRow.assignment_id)  # type: ignore[arg-type]
                         .where(JudgmentRow.campaign == name, AssignmentRow.valid == True)).all()]  # noqa: E712
        a_counts = s.exec(select(AssignmentRow.stage, AssignmentRow.status, func.count()).where(AssignmentRow.campaign == name)
                          .group_by(AssignmentRow.stage, AssignmentRow.status)).all()
        invalid = s.exec(select(AssignmentRow.stage, func.count()).where(AssignmentRow.campaign == name,
                         AssignmentRow.valid == False).group_by(AssignmentRow.stage)).all()  # noqa: E712
        feedback = s.exec(select(AssignmentRow.stage, AssignmentRow.worker_id, AssignmentRow.feedback).where(
            AssignmentRow.campaign == name, AssignmentRow.status == AssignmentStatus.REJECTED)).all()
        hits = dict(s.exec(select(HitRow.stage, func.count()).where(HitRow.campaign == name).group_by(HitRow.stage)).all())
        workers = s.exec(select(WorkerRow).where(WorkerRow.campaign == name)).all()
        charges = s.exec(select(LedgerRow.created_at, LedgerRow.kind, LedgerRow.amount, LedgerRow.fee).where(
            LedgerRow.campaign == name, LedgerRow.kind.in_((LedgerKind.CHARGE, LedgerKind.BONUS_CHARGE)))).all()  # type: ignore[attr-defined]
        batches = s.exec(select(KVRow.key, KVRow.value).where(KVRow.campaign == name, KVRow.key.like(f"%{Keys.BATCH_PROGRESS}%"))  # type: ignore[attr-defined]
                         .order_by(KVRow.key)).all()
        money = totals(s, name, Decimal(camp.budget))
        pay = read_stage_pay(s, name)
    spec = json.loads(camp.spec_json)
    cur = currency_of(spec)
    stages_spec = spec.get("stages", [])
    evidence = {w.worker_id: (json.loads(w.evidence) if w.evidence else {}) for w in workers}
    by_worker = {w.worker_id: w for w in workers}
    retest = retest_figures(store, name, camp.spec_json)

    stages: list[StageView] = []
    for k, st in enumerate(stages_spec):
        last = k == len(stages_spec) - 1
        final = export_dir / "scores.jsonl" if export_dir is not None and last and camp.status == CampaignStatus.FINISHED else None
        rows, source = _stage_rows(store, name, st, final)
        view = StageView(name=st["name"], kind=st.get("kind", ""), rows=rows, source=source)
        prolific = spec.get("prolific") if isinstance(spec.get("prolific"), dict) else None
        if st.get("assignments") and prolific is not None:  # paid per submission (a bundle of HITs), not per HIT
            per = (f"{_money(Decimal(str(prolific['reward'])), cur)} per submission" if prolific.get("reward")
                   else f"{_money(Decimal(str(prolific['reward_per_hour'])), cur)} an hour")
            view.design = f"{st['assignments']} workers per HIT; Prolific pays {per} of {prolific.get('bundle')} HITs"
        elif st.get("assignments") and st.get("reward"):
            view.design = f"{st['assignments']} workers per HIT at {_money(Decimal(str(st['reward'])), cur)} each"
        keys = list(rows[0].keys()) if rows else []
        view.columns = ([c for c in ("rank", "item") if c in keys] + [c for c in keys if c not in ("rank", "item", "text")]
                        + [c for c in ("text",) if c in keys])
        view.decimals = {c: _decimals(rows, c) for c in view.columns}
        p = pay.get(st["name"], {})
        if p.get("median_work_seconds") is not None:
            hourly = "no hourly figure (no time between accept and submit)" if p.get("hourly_pay") is None \
                else f"{_money(p['hourly_pay'], cur)} an hour at it"
            view.pay = f"median work time {work_time_text(p['median_work_seconds'])}, {hourly}"
        view.hits = int(hits.get(st["name"], 0))
        view.counts = {status: int(n) for stg, status, n in a_counts if stg == st["name"]}
        view.counts["invalid"] = int(sum(n for stg, n in invalid if stg == st["name"]))
        sj = [j for j in judgments if j.stage == st["name"]]
        view.labels = len(sj)
        view.labels_excluded = sum(1 for j in sj if j.excluded)
        _charts(view, sj, batches)
        _agreement(view, sj, evidence, by_worker)
        if st["name"] in retest:
            view.retest = {**retest[st["name"]], "share": (st.get("repeat") or {}).get("share")}
        if last and export_dir is not None and (export_dir / "gold_nuggets.jsonl").is_file() and camp.status == CampaignStatus.FINISHED:
            gold = [json.loads(line) for line in (export_dir / "gold_nuggets.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
            view.gold_total = len(gold)
            view.gold = sorted(gold, key=lambda g: (-g.get("workers", 0), -g.get("mace_weight", 0.0)))[:TOP_ROWS]
        stages.append(view)

    # quality control, campaign-wide
    reasons: Counter[tuple[str, str, str]] = Counter()
    for stg, worker, fb in feedback:
        reasons[(worker, stg, _short_reason(fb))] += 1
    blocked = [{"worker": w.worker_id, "reason": w.reason or ""} for w in workers if w.blocked]
    excluded = []
    for w in workers:
        per_stage = evidence[w.worker_id].get("stages") or {}
        for stg, ev in sorted(per_stage.items()):
            if ev.get("excluded"):
                excluded.append({"worker": w.worker_id, "stage": stg, "reason": ev.get("reason") or w.reason or ""})
        if w.excluded and not any(ev.get("excluded") for ev in per_stage.values()):
            excluded.append({"worker": w.worker_id, "stage": "", "reason": w.reason or ""})
    bonuses = [c for c in charges if c[1] == LedgerKind.BONUS_CHARGE]

    # spend over time
    start = camp.created_at
    series = spend_series(((float(ts), kind, amount, fee) for ts, kind, amount, fee in charges), start)
    span = max((t for t, _ in series["total"]), default=0.0)
    unit, unit_name = _time_unit(span)
    if charges:
        spend_chart = svg.lines(
            [(label, color, [(t / unit, float(v)) for t, v in series[key]])
             for key, label, color in (("total", "total", svg.PURPLE), ("rewards", "rewards", svg.BLUE),
                                       ("fees", "marketplace fees", svg.ORANGE), ("bonuses", "bonuses", svg.GREEN))],
            xlabel=f"{unit_name} since the campaign started", ylabel=f"spent so far ({cur})", title="spend over time",
            y_prefix=CURRENCY_SIGNS.get(cur, ""))
    else:  # an empty chart with a 0-1 axis only puzzles
        spend_chart = '<p class="muted">Nothing charged yet: rewards, fees and bonuses are booked as work is approved.</p>'
    final_spend = {k: (v[-1][1] if v else Decimal("0.00")) for k, v in series.items()}
    spend_table = [("rewards", _money(final_spend["rewards"], cur)), ("marketplace fees", _money(final_spend["fees"], cur)),
                   ("bonuses", _money(final_spend["bonuses"], cur)), ("total spent", _money(money.spent, cur)),
                   ("still reserved", _money(money.reserved, cur)), ("budget", _money(money.budget, cur)),
                   ("left", _money(money.remaining, cur))]

    all_workers = {j.worker for j in judgments}
    return {
        "name": name, "status": camp.status, "topic": spec.get("topic", ""), "created": _when(camp.created_at),
        "marketplace": spec.get("marketplace", ""),
        "crowd": (spec.get("crowd") or {}).get("kind", ""), "stages": stages,
        "summary": [("status", camp.status), ("stages", ", ".join(f"{v.name} ({v.kind})" for v in stages)),
                    ("items scored", ", ".join(f"{sum(1 for r in v.rows if r.get('score') is not None)} in {v.name}" for v in stages)),
                    ("answers", sum(sum(n for st, n in v.counts.items() if st != "invalid") for v in stages)),
                    ("labels excluded", excluded_text(sum(v.labels for v in stages), sum(v.labels_excluded for v in stages))),
                    ("workers", len(all_workers)), ("spent", f"{_money(money.spent, cur)} of {_money(money.budget, cur)}")],
        "qc_stages": [{"stage": v.name, "approved": v.counts.get(AssignmentStatus.APPROVED, 0), "rejected": v.counts.get(AssignmentStatus.REJECTED, 0),
                       "pending": sum(n for st, n in v.counts.items() if st not in (AssignmentStatus.APPROVED, AssignmentStatus.REJECTED, "invalid")),
                       "invalid": v.counts.get("invalid", 0), "labels": v.labels, "labels_excluded": v.labels_excluded,
                       "labels_excluded_text": excluded_text(v.labels, v.labels_excluded),
                       "workers_excluded": sum(1 for e in excluded if e["stage"] == v.name)} for v in stages],
        "excluded": excluded, "blocked": blocked, "rejections": [{"worker": w, "stage": stg, "reason": why, "answers": n} for (w, stg, why), n in reasons.most_common()],
        # rows a step failed on and quarantined (invariant 8): open ones wait for `campaign decide`
        "held": _held_rows(store, name),
        "bonuses": {"count": len(bonuses), "total": _money(sum((Decimal(a) - Decimal(f) for _, _, a, f in bonuses), Decimal("0.00")), cur)},
        "spend_chart": Markup(spend_chart), "spend_table": spend_table,
        "generated": _when(time.time()), "headings": HEADINGS, "top_rows": TOP_ROWS, "cell": _cell,
    }


def _short_reason(feedback: str | None) -> str:
    """The reason inside a rejection's feedback text (the part after the polite opening)."""
    text = (feedback or "no feedback").strip()
    marker = "We could not accept this assignment:"
    if marker in text:
        text = text.split(marker, 1)[1].split(". The task asks", 1)[0].strip()
    return text


def _charts(view: StageView, sj: Sequence[Label], batches: Sequence[tuple[str, str]]) -> None:
    rows = [r for r in view.rows if r.get("score") is not None]
    unscored = len(view.rows) - len(rows)
    labels = [j.value for j in sj if not j.item.startswith(TRAP_PREFIX)]
    if rows:
        lo, hi, step, own = score_scale(rows, labels)
        scale = f"the labels' own scale, {svg.fmt_tick(lo, step)} to {svg.fmt_tick(hi, step)}" if own else "the scores' range"
        support = possible_means(labels, (r.get("n") or 0 for r in rows)) if own else None
        if support is not None:
            view.charts.append({
                "title": "Score distribution",
                "svg": Markup(svg.discrete_bars([float(r["score"]) for r in rows], support, xlabel="score (mean of the item's labels)",
                                                ylabel="items", title=f"{view.name}: score distribution")),
                "note": f"{len(rows)} items on {scale}: one bar per value a mean of the stage's labels can take, so no bar "
                        "stands for a gap between possible values."
                        + (f" {unscored} item{' has' if unscored == 1 else 's have'} no score in this stage (not ranked in it)." if unscored else "")})
        else:
            view.charts.append({
                "title": "Score distribution",
                "svg": Markup(svg.histogram([float(r["score"]) for r in rows if r.get("score") is not None], lo, hi, step,
                                            xlabel=f"score (bins of {svg.fmt_tick(step, step)})", ylabel="items",
                                            title=f"{view.name}: score distribution")),
                "note": f"{len(rows)} items, binned on {scale}; each bin holds scores from its left edge up to (not "
                        "including) the next, the last one both edges."
                        + (f" {unscored} item{' has' if unscored == 1 else 's have'} no score in this stage (not ranked in it)." if unscored else "")})
        points = []
        for k, r in enumerate(rows, start=1):
            err, what = uncertainty(r)
            view.uncertainty_note = view.uncertainty_note or what
            points.append((float(r.get("rank") or k), float(r["score"]), err))
        view.charts.append({
            "title": "Scores by rank",
            "svg": Markup(svg.error_bars(points, xlabel="rank", ylabel="score", title=f"{view.name}: scores by rank",
                                         y_range=(lo, hi) if own else None)),
            "note": ("Bars: ± one " + view.uncertainty_note + ".") if view.uncertainty_note else "No uncertainty in this export."})
    mine = [(k, json.loads(v)) for k, v in batches if k.startswith(Keys.batch_progress_prefix(view.kind, view.name))]
    if mine:
        bars = [svg.Bar(label=f"batch {int(k.rsplit(':', 1)[1]) + 1}", value=float(d.get("mean_sigma", 0.0)),
                        tip=f"{d.get('pairs_planned', '?')} pairs planned by then") for k, d in mine]
        pairs = mine[-1][1].get("pairs_planned")
        view.charts.append({
            "title": "Ranking uncertainty per batch",
            "svg": Markup(svg.vbars(bars, xlabel="adaptive batch", ylabel="mean TrueSkill σ", title=f"{view.name}: uncertainty per batch")),
            "note": f"{len(mine)} batch{'es' if len(mine) != 1 else ''}: the mean TrueSkill σ over the ranked items when each "
                    f"batch was planned (lower is surer); {pairs} pairs planned in all."})


def _agreement(view: StageView, sj: Sequence[Label], evidence: Mapping[str, Mapping[str, Any]],
               by_worker: Mapping[str, WorkerRow]) -> None:
    real = [j for j in sj if not j.item.startswith(TRAP_PREFIX)]
    answers: dict[str, list[float]] = defaultdict(list)
    for j in sj:
        answers[j.assignment].append(j.value)
    for what, subset in (("all answers", real), ("kept by quality control", [j for j in real if not j.excluded and j.status == AssignmentStatus.APPROVED])):
        units: dict[tuple[str, str], list[float]] = defaultdict(list)
        for j in subset:
            units[(j.hit, j.item)].append(j.value)
        if not units:
            continue
        if is_ranking(answers):
            per_answer: dict[str, dict[str, float]] = defaultdict(dict)
            hit_of: dict[str, str] = {}
            for j in subset:
                per_answer[j.assignment][j.item] = j.value
                hit_of[j.assignment] = j.hit
            grouped: dict[str, list[dict[str, float]]] = defaultdict(list)
            for a, ranks in per_answer.items():
                grouped[hit_of[a]].append(ranks)
            ws = []
            for rankings in grouped.values():
                common = sorted(set.intersection(*(set(r) for r in rankings)))
                if len(rankings) < 2 or len(common) < 2:
                    continue
                # re-ranked over the items every worker ranked (traps left out): ranks 1..n again
                reranked = [[float(sorted(common, key=r.__getitem__).index(i) + 1) for i in common] for r in rankings]
                w = kendall_w(reranked)
                if w is not None:
                    ws.append(w)
            if ws:
                view.agreement.append({"what": what, "measure": "Kendall's W (mean over HITs)", "value": statistics.fmean(ws),
                                       "detail": f"{len(ws)} HITs ranked by 2 or more workers (1 = identical orders)"})
        elif _CATEGORICAL is not None and len({x for v in units.values() for x in v}) <= CATEGORICAL_MAX:
            fig = _CATEGORICAL([((j.hit, j.item), j.worker, j.value) for j in subset])
            detail = (f"{fig['items_with_two_or_more']} items with 2 or more raters, {fig['categories']} label values"
                      + (f"; observed agreement {fig['percent_agreement']:.2f}" if fig.get("percent_agreement") is not None else ""))
            for key, measure in (("fleiss_kappa", "Fleiss' κ"), ("krippendorff_alpha", "Krippendorff's α (nominal)")):
                if fig.get(key) is not None:
                    view.agreement.append({"what": what, "measure": measure, "value": fig[key], "detail": detail})
        else:
            fk = fleiss_modal(units)
            if fk:
                view.agreement.append({"what": what, "measure": "Fleiss' κ", "value": fk["kappa"],
                                       "detail": f"{fk['units']} of {fk['of_units']} items with {fk['raters']} raters each, "
                                                 f"{fk['categories']} label values; observed agreement {fk['agreement']:.2f}"})
    corr = worker_agreement([(j.worker, (j.hit, j.item), j.value) for j in real])
    label_count = Counter(j.worker for j in real)
    rows: list[dict[str, Any]] = []
    for worker in sorted(label_count, key=lambda w: (corr.get(w, math.inf), w)):
        ev = (evidence.get(worker, {}).get("stages") or {}).get(view.name, {})
        row = by_worker.get(worker)
        excluded = bool(ev.get("excluded")) if ev else bool(row and row.excluded)
        blocked = bool(row and row.blocked)
        reason = (ev.get("reason") if ev else None) or (row.reason if row and (excluded or blocked) else None) or ""
        rows.append({"worker": worker, "r": corr.get(worker), "labels": label_count[worker], "excluded": excluded,
                     "blocked": blocked, "reason": reason})
    view.workers = rows
    rated = [w for w in rows if w["r"] is not None]
    if rated:
        view.worst = rated[0]
        bars = [svg.Bar(label=w["worker"], value=w["r"],
                        color=svg.PURPLE if w["blocked"] else svg.RED if w["excluded"] else svg.BLUE,
                        note=WorkerStanding.BLOCKED if w["blocked"] else WorkerStanding.EXCLUDED if w["excluded"] else "",
                        tip=f"{w['worker']}: r = {w['r']:.2f} over {w['labels']} labels" + (f" — {w['reason']}" if w["reason"] else ""))
                for w in rated]
        view.charts.append({
            "title": "Agreement per worker",
            "svg": Markup(svg.hbars(bars, -1.0, 1.0, 0.5, xlabel="r: worker's labels vs the mean of the other workers on the same items",
                                    title=f"{view.name}: agreement per worker", ylabel="worker (worst first)", row=14 if len(bars) <= 50 else 11)),
            "note": f"{len(rated)} workers with 3 or more shared items, worst first, excluded (red) and blocked (purple) "
                    "workers included; all their labels counted, excluded ones too."})


_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


def with_breaks(text: Any) -> Markup:
    """Source texts (UKPConvArg1's among them) mark line breaks with a literal `<br/>`: each becomes a real
    line break and everything else is escaped, so no other markup from the text reaches the page."""
    return Markup("<br>").join(escape(part) for part in _BREAK.split(str(text if text is not None else "")))


def plain_breaks(text: Any) -> str:
    """The same text for a tooltip (an attribute, which cannot hold markup): `<br/>` as a newline."""
    return _BREAK.sub("\n", str(text if text is not None else ""))


def build_report(store: Store, name: str, export_dir: Path | None = None) -> str:
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("campaign", "report_templates"), autoescape=select_autoescape(["html", "j2"]),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["breaks"] = with_breaks
    env.filters["plain_breaks"] = plain_breaks
    return env.get_template("report.html.j2").render(**build_context(store, name, export_dir))


def write_report(store: Store, name: str, out: Path, export_dir: Path | None = None) -> Path:
    from campaign.outfile import write_out

    write_out(out, [build_report(store, name, export_dir)])
    return out
