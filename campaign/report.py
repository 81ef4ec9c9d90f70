"""`campaign report NAME`: one self-contained HTML page with the pictures that say more than tables:
score distribution, agreement per worker, spend over time, and ranking uncertainty per batch.

Plain inline SVG (no plotting library, no scripts, nothing fetched), and every text from the store
escaped, since item texts and worker ids come from outside.
"""

from __future__ import annotations

import html
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path

from sqlmodel import select

from campaign.store import CampaignRow, JudgmentRow, KVRow, LedgerRow, Store
from campaign.tasks.base import TRAP_PREFIX

W, H, PAD = 560, 220, 36


def _svg(bars: Sequence[tuple[str, float]] = (), line: Sequence[tuple[float, float]] = (), title: str = "",
         xlabel: str = "", ylabel: str = "") -> str:
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" aria-label="{html.escape(title)}">',
             f'<rect width="{W}" height="{H}" fill="#fff"/>',
             f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 8}" y2="{H - PAD}" stroke="#333"/>',
             f'<line x1="{PAD}" y1="8" x2="{PAD}" y2="{H - PAD}" stroke="#333"/>']
    if bars:
        top = max(v for _, v in bars) or 1.0
        bw = (W - PAD - 12) / len(bars)
        for i, (label, v) in enumerate(bars):
            h = (H - PAD - 12) * v / top
            x = PAD + 2 + i * bw
            parts.append(f'<rect x="{x:.1f}" y="{H - PAD - h:.1f}" width="{max(bw - 3, 1):.1f}" height="{h:.1f}" fill="#3b6ea5">'
                         f'<title>{html.escape(label)}: {v:g}</title></rect>')
            if len(bars) <= 20:
                parts.append(f'<text x="{x + bw / 2:.1f}" y="{H - PAD + 14}" font-size="10" text-anchor="middle">{html.escape(label)}</text>')
        parts.append(f'<text x="4" y="14" font-size="10">{top:g}</text>')
    if line:
        xs, ys = [p[0] for p in line], [p[1] for p in line]
        x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
        y1 = max(ys) or 1.0
        pts = " ".join(f"{PAD + (x - x0) / (x1 - x0) * (W - PAD - 12):.1f},{H - PAD - y / y1 * (H - PAD - 12):.1f}" for x, y in line)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#c0392b" stroke-width="2"/>')
        parts.append(f'<text x="4" y="14" font-size="10">{y1:g}</text>')
    parts.append(f'<text x="{W / 2}" y="{H - 4}" font-size="11" text-anchor="middle">{html.escape(xlabel)}</text>')
    parts.append(f'<text x="10" y="{H / 2}" font-size="11" transform="rotate(-90 10 {H / 2})" text-anchor="middle">{html.escape(ylabel)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def worker_agreement(judgments: Sequence[tuple[str, str, float]]) -> dict[str, float]:
    """Pearson correlation of each worker's labels with the mean of the other workers on the same items."""
    by_item: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for worker, item, value in judgments:
        by_item[item].append((worker, value))
    pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for labels in by_item.values():
        if len(labels) < 2:
            continue
        total = sum(v for _, v in labels)
        for worker, v in labels:
            pairs[worker].append((v, (total - v) / (len(labels) - 1)))
    out = {}
    for worker, ps in pairs.items():
        if len(ps) < 3:
            continue
        xs, ys = [p[0] for p in ps], [p[1] for p in ps]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxy = sum((x - mx) * (y - my) for x, y in ps)
        sx, sy = math.sqrt(sum((x - mx) ** 2 for x in xs)), math.sqrt(sum((y - my) ** 2 for y in ys))
        out[worker] = sxy / (sx * sy) if sx > 0 and sy > 0 else 0.0
    return out


def build_report(store: Store, name: str) -> str:
    with store.session() as s:
        camp = s.get(CampaignRow, name)
        if camp is None:
            raise KeyError(f"no campaign named {name!r}")
        judgments = s.exec(select(JudgmentRow.worker_id, JudgmentRow.item_key, JudgmentRow.value, JudgmentRow.stage)
                           .where(JudgmentRow.campaign == name, JudgmentRow.excluded == False)).all()  # noqa: E712
        charges = s.exec(select(LedgerRow.created_at, LedgerRow.amount).where(
            LedgerRow.campaign == name, LedgerRow.kind.in_(("charge", "bonus_charge"))).order_by(LedgerRow.created_at)).all()
        batches = s.exec(select(KVRow.value).where(KVRow.campaign == name, KVRow.key.like("ranking_batch:%")).order_by(KVRow.key)).all()
    first_stage = json.loads(camp.spec_json).get("stages", [{}])[0].get("name")
    stage_j = [(w, i, v) for w, i, v, st in judgments if st == first_stage and not i.startswith(TRAP_PREFIX)]
    means: dict[str, list[float]] = defaultdict(list)
    for _, item, v in stage_j:
        means[item].append(v)
    scores = [sum(v) / len(v) for v in means.values()]
    bins = [0] * 8
    for sc in scores:
        bins[min(int((sc - 1) / 4 * 8), 7)] += 1
    hist = [(f"{1 + k * 0.5:.1f}", float(n)) for k, n in enumerate(bins)]
    agree = sorted(worker_agreement(stage_j).items(), key=lambda kv: kv[1])
    spend, total, t0 = [], Decimal("0"), charges[0][0] if charges else 0.0
    for ts, amount in charges:
        total += Decimal(amount)
        spend.append(((ts - t0) / 60.0, float(total)))
    sections = [
        ("Score distribution", _svg(bars=hist, title="scores", xlabel="mean rating (bin start)", ylabel="items"),
         f"{len(scores)} items of stage {html.escape(str(first_stage))}."),
        ("Agreement per worker", _svg(bars=[(w, max(r, 0.0)) for w, r in agree], title="agreement", xlabel="workers (worst first)",
                                      ylabel="r with the rest"),
         "Pearson correlation of each worker's ratings with the mean of the other workers on shared items (negative shown as 0). "
         + ("Worst: " + ", ".join(f"{html.escape(w)} ({r:.2f})" for w, r in agree[:5]) if agree else "")),
        ("Spend over time", _svg(line=spend, title="spend", xlabel="minutes since first approval", ylabel="dollars"),
         f"${total} charged (rewards, fees and bonuses)."),
    ]
    if batches:
        unc = [json.loads(b).get("mean_sigma", 0.0) for b in batches]
        sections.append(("Ranking uncertainty per batch", _svg(line=list(enumerate(unc)), title="uncertainty", xlabel="batch",
                                                           ylabel="mean TrueSkill sigma"), f"{len(unc)} batches."))
    body = "".join(f"<section><h2>{t}</h2>{svg}<p>{note}</p></section>" for t, svg, note in sections)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>campaign {html.escape(name)}</title>'
            '<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:1rem auto}</style></head>'
            f"<body><h1>Campaign {html.escape(name)} ({html.escape(camp.status)})</h1>{body}</body></html>")


def write_report(store: Store, name: str, out: Path) -> Path:
    out.write_text(build_report(store, name), encoding="utf-8")
    return out
