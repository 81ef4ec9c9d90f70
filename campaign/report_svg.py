"""Small inline-SVG charts for `campaign report`: histogram, points with error bars, horizontal bars per
worker, cumulative lines, and labelled bars.

Each chart draws its own axes with a label, "nice" ticks (1, 2, 2.5 or 5 times a power of ten) and
zero wherever zero lies on the scale, because a chart without them cannot be read in a meeting. No
plotting library: the page must open anywhere, offline, with nothing fetched. Every text that reaches
the markup goes through `esc`, since worker ids and labels come from outside.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

FONT = 'font-family="system-ui,-apple-system,Segoe UI,sans-serif"'
BLUE, RED, PURPLE, GREY, ORANGE, GREEN = "#3b6ea5", "#c0392b", "#6c3483", "#888888", "#d68910", "#1e8449"


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def nice_step(span: float, target: int) -> float:
    """The smallest 1/2/2.5/5 x 10^k step that cuts `span` into at most about `target` parts."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * mag >= raw * (1 - 1e-9):
            return m * mag
    return 10 * mag


def ticks(lo: float, hi: float, step: float) -> list[float]:
    start = math.ceil(lo / step - 1e-9) * step
    out, k = [], 0
    while start + k * step <= hi + step * 1e-9:
        v = start + k * step
        out.append(0.0 if abs(v) < step * 1e-9 else v)
        k += 1
    return out


def fmt_tick(v: float, step: float) -> str:
    """`v` with as many decimals as `step` needs (0.25 -> 2, 0.5 -> 1, 5 -> 0)."""
    decimals = next((d for d in range(7) if abs(step * 10 ** d - round(step * 10 ** d)) < 1e-6), 6)
    return f"{v:.{decimals}f}"


def nice_range(lo: float, hi: float, target: int = 5, include_zero: bool = False) -> tuple[float, float, float]:
    """(lo, hi, step) widened to whole steps around the data."""
    if include_zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi <= lo:
        hi = lo + 1.0
    step = nice_step(hi - lo, target)
    return math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step, step


@dataclass
class Frame:
    """A plotting area inside an SVG: data coordinates to pixels, and the axes around it."""

    width: int
    height: int
    x0: float
    x1: float
    y0: float
    y1: float
    left: int = 60
    right: int = 20
    top: int = 18
    bottom: int = 46

    def sx(self, x: float) -> float:
        return self.left + (x - self.x0) / ((self.x1 - self.x0) or 1.0) * (self.width - self.left - self.right)

    def sy(self, y: float) -> float:
        return self.height - self.bottom - (y - self.y0) / ((self.y1 - self.y0) or 1.0) * (self.height - self.top - self.bottom)

    def open(self, title: str) -> list[str]:
        return [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" width="{self.width}" '
                f'height="{self.height}" role="img" aria-label="{esc(title)}" class="chart" {FONT} font-size="11">',
                f"<title>{esc(title)}</title>",
                f'<rect width="{self.width}" height="{self.height}" fill="#fff"/>']

    def x_axis(self, values: Sequence[float], labels: Sequence[str], title: str, grid: bool = False, zero: bool = True) -> list[str]:
        base = self.height - self.bottom
        out = [f'<line x1="{self.left}" y1="{base}" x2="{self.width - self.right}" y2="{base}" stroke="#333"/>']
        for v, lab in zip(values, labels):
            x = self.sx(v)
            if grid:
                out.append(f'<line x1="{x:.1f}" y1="{self.top}" x2="{x:.1f}" y2="{base}" stroke="#e6e6e6"/>')
            out.append(f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 5}" stroke="#333"/>')
            out.append(f'<text x="{x:.1f}" y="{base + 17}" text-anchor="middle">{esc(lab)}</text>')
        if zero and self.x0 < 0 < self.x1:
            out.append(f'<line x1="{self.sx(0):.1f}" y1="{self.top}" x2="{self.sx(0):.1f}" y2="{base}" stroke="#333" '
                       'stroke-dasharray="3 2"/>')
        out.append(f'<text x="{(self.left + self.width - self.right) / 2:.1f}" y="{self.height - 8}" text-anchor="middle" '
                   f'font-size="12">{esc(title)}</text>')
        return out

    def y_axis(self, values: Sequence[float], labels: Sequence[str], title: str, grid: bool = True) -> list[str]:
        out = [f'<line x1="{self.left}" y1="{self.top}" x2="{self.left}" y2="{self.height - self.bottom}" stroke="#333"/>']
        for v, lab in zip(values, labels):
            y = self.sy(v)
            if grid:
                out.append(f'<line x1="{self.left}" y1="{y:.1f}" x2="{self.width - self.right}" y2="{y:.1f}" stroke="#e6e6e6"/>')
            out.append(f'<line x1="{self.left - 5}" y1="{y:.1f}" x2="{self.left}" y2="{y:.1f}" stroke="#333"/>')
            out.append(f'<text x="{self.left - 8}" y="{y + 4:.1f}" text-anchor="end">{esc(lab)}</text>')
        if self.y0 < 0 < self.y1:
            out.append(f'<line x1="{self.left}" y1="{self.sy(0):.1f}" x2="{self.width - self.right}" y2="{self.sy(0):.1f}" '
                       'stroke="#333"/>')
        cy = (self.top + self.height - self.bottom) / 2
        out.append(f'<text x="14" y="{cy:.1f}" text-anchor="middle" font-size="12" transform="rotate(-90 14 {cy:.1f})">'
                   f"{esc(title)}</text>")
        return out


def _count_axis(top: int) -> tuple[float, list[float]]:
    """A 0-based axis for counts: whole-number steps of 1, 2 or 5 times a power of ten."""
    top = max(top, 1)
    mag = 10 ** max(0, math.floor(math.log10(top / 5))) if top >= 5 else 1
    step = next(m * mag for m in (1, 2, 5, 10) if top / (m * mag) <= 6)
    hi = math.ceil(top / step) * step
    return float(hi), ticks(0, hi, step)


def histogram(values: Sequence[float], lo: float, hi: float, step: float, xlabel: str, ylabel: str = "items",
              title: str = "distribution", width: int = 640, height: int = 260) -> str:
    """Counts of `values` in bins [lo, lo+step), ..., [hi-step, hi] (the last bin holds hi itself)."""
    nbins = max(1, round((hi - lo) / step))
    counts = [0] * nbins
    for v in values:
        k = math.floor((v - lo) / step + 1e-9)
        counts[min(max(k, 0), nbins - 1)] += 1
    ytop, yt = _count_axis(max(counts) if counts else 1)
    f = Frame(width, height, lo, hi, 0.0, ytop)
    parts = f.open(title)
    parts += f.y_axis(yt, [f"{int(v)}" for v in yt], ylabel)
    for k, n in enumerate(counts):
        a, b = lo + k * step, lo + (k + 1) * step
        x, w = f.sx(a) + 1, f.sx(b) - f.sx(a) - 2
        y = f.sy(n)
        interval = f"[{fmt_tick(a, step)}, {fmt_tick(b, step)}{']' if k == nbins - 1 else ')'}"
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 1):.1f}" height="{f.sy(0) - y:.1f}" fill="{BLUE}">'
                     f"<title>{esc(interval)}: {n} {esc(ylabel)}</title></rect>")
        if n:
            parts.append(f'<text x="{x + w / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" font-size="10">{n}</text>')
    edges = ticks(lo, hi, step)
    shown = edges if len(edges) <= 12 else edges[:: math.ceil(len(edges) / 12)]
    parts += f.x_axis(shown, [fmt_tick(v, step) for v in shown], xlabel)
    parts.append("</svg>")
    return "".join(parts)


def error_bars(points: Sequence[tuple[float, float, float | None]], xlabel: str, ylabel: str, title: str = "scores",
               y_range: tuple[float, float] | None = None, width: int = 640, height: int = 280) -> str:
    """One point per (x, y, ±err); `err` None draws the point alone."""
    ys = [y for _, y, _ in points] + [y + e for _, y, e in points if e] + [y - e for _, y, e in points if e]
    lo, hi = y_range if y_range else (min(ys, default=0.0), max(ys, default=1.0))
    if not y_range:
        lo, hi, ystep = nice_range(lo, hi, include_zero=lo <= 0 <= hi or lo * hi < 0)
    else:
        ystep = nice_step(hi - lo, 5)
    n = len(points)
    x0, x1, xstep = nice_range(0, max(n, 1), 8)
    f = Frame(width, height, 0.0, x1, lo, hi)
    parts = f.open(title)
    yt = ticks(lo, hi, ystep)
    parts += f.y_axis(yt, [fmt_tick(v, ystep) for v in yt], ylabel)
    xt = rank_ticks(n)
    r = 2.5 if n > 60 else 3.5
    for x, y, e in points:
        px, py = f.sx(x), f.sy(y)
        if e:
            parts.append(f'<line x1="{px:.1f}" y1="{f.sy(min(y + e, hi)):.1f}" x2="{px:.1f}" y2="{f.sy(max(y - e, lo)):.1f}" '
                         f'stroke="{GREY}"/>')
        tip = f"rank {x:g}: {y:.3f}" + (f" ± {e:.3f}" if e else "")
        parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="{r}" fill="{BLUE}"><title>{esc(tip)}</title></circle>')
    parts += f.x_axis(xt, [f"{int(v)}" for v in xt], xlabel)
    parts.append("</svg>")
    return "".join(parts)


def rank_ticks(n: int, target: int = 8) -> list[float]:
    """Ticks for ranks 1..n: rank 1, then the multiples of a whole 1, 2 or 5 x 10^k step (1, 5, 10, 15),
    a multiple closer to 1 than half a step left out so the first two labels do not collide."""
    n = max(n, 1)
    mag = 1
    while True:
        step = next((m * mag for m in (1, 2, 5) if n / (m * mag) <= target), None)
        if step is not None:
            break
        mag *= 10
    return [1.0] + [float(v) for v in range(step, n + 1, step) if v > 1 and v - 1 >= step / 2]


def discrete_bars(values: Sequence[float], support: Sequence[float], xlabel: str, ylabel: str = "items",
                  title: str = "distribution", width: int = 640, height: int = 260, labels: Sequence[str] | None = None) -> str:
    """Counts of `values` at each value that can occur (`support`, sorted), one bar per value, so no bar
    is an empty bin between two possible values; a value counts at the nearest support value."""
    support = sorted(support)
    counts = [0] * len(support)
    for v in values:
        counts[min(range(len(support)), key=lambda k: abs(support[k] - v))] += 1
    gap = min((b - a for a, b in zip(support, support[1:])), default=1.0) or 1.0
    lo, hi = support[0] - gap / 2, support[-1] + gap / 2
    ytop, yt = _count_axis(max(counts) if counts else 1)
    f = Frame(width, height, lo, hi, 0.0, ytop)
    parts = f.open(title)
    parts += f.y_axis(yt, [f"{int(v)}" for v in yt], ylabel)
    names = list(labels) if labels is not None else [f"{v:.2f}".rstrip("0").rstrip(".") for v in support]
    for v, n, name in zip(support, counts, names):
        x, w = f.sx(v - gap * 0.42), f.sx(v + gap * 0.42) - f.sx(v - gap * 0.42)
        y = f.sy(n)
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 1):.1f}" height="{f.sy(0) - y:.1f}" fill="{BLUE}">'
                     f"<title>{esc(name)}: {n} {esc(ylabel)}</title></rect>")
        if n:
            parts.append(f'<text x="{x + w / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" font-size="10">{n}</text>')
    every = math.ceil(len(support) / 14)
    shown = [k for k in range(len(support)) if k % every == 0 or k == len(support) - 1]
    parts += f.x_axis([support[k] for k in shown], [names[k] for k in shown], xlabel, zero=False)  # the axis starts half a bar left of the first value
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    color: str = BLUE
    note: str = ""  # shown after the bar (e.g. "excluded")
    tip: str = ""


def hbars(bars: Sequence[Bar], lo: float, hi: float, step: float, xlabel: str, title: str, ylabel: str = "", width: int = 640,
          row: int = 15, label_width: int = 130) -> str:
    """Horizontal bars from zero, one row per bar, labels on the left and notes on the right."""
    height = 24 + 50 + row * max(len(bars), 1)
    f = Frame(width, height, lo, hi, 0.0, float(max(len(bars), 1)), left=label_width, right=90, top=24, bottom=50)
    parts = f.open(title)
    parts.append(f'<text x="{label_width - 6}" y="14" text-anchor="end" font-size="12">{esc(ylabel)}</text>')
    parts.append(f'<line x1="{f.left}" y1="{f.top}" x2="{f.left}" y2="{f.height - f.bottom}" stroke="#333"/>')
    xt = ticks(lo, hi, step)
    for v in xt:
        parts.append(f'<line x1="{f.sx(v):.1f}" y1="{f.top}" x2="{f.sx(v):.1f}" y2="{f.height - f.bottom}" stroke="#e6e6e6"/>')
    for k, b in enumerate(bars):
        yc = f.top + row * k + row / 2
        a, z = f.sx(max(min(0.0, b.value), lo)), f.sx(min(max(0.0, b.value), hi))
        a, z = (a, z) if lo <= 0 else (f.sx(lo), f.sx(b.value))
        parts.append(f'<rect x="{a:.1f}" y="{yc - row * 0.36:.1f}" width="{max(z - a, 1):.1f}" height="{row * 0.72:.1f}" '
                     f'fill="{b.color}"><title>{esc(b.tip or f"{b.label}: {b.value:.2f}")}</title></rect>')
        parts.append(f'<circle cx="{f.sx(min(max(b.value, lo), hi)):.1f}" cy="{yc:.1f}" r="2.5" fill="{b.color}"/>')
        parts.append(f'<text x="{f.left - 6}" y="{yc + 4:.1f}" text-anchor="end" font-family="ui-monospace,monospace" '
                     f'font-size="10">{esc(b.label)}</text>')
        if b.note:
            parts.append(f'<text x="{f.width - f.right + 6}" y="{yc + 4:.1f}" font-size="10" fill="{b.color}">{esc(b.note)}</text>')
    parts += f.x_axis(xt, [fmt_tick(v, step) for v in xt], xlabel)
    parts.append("</svg>")
    return "".join(parts)


def lines(series: Sequence[tuple[str, str, Sequence[tuple[float, float]]]], xlabel: str, ylabel: str, title: str,
          x_max: float | None = None, width: int = 640, height: int = 280, y_prefix: str = "") -> str:
    """Step lines (name, colour, points sorted by x) over a shared axis starting at zero, with a legend."""
    xs = [x for _, _, pts in series for x, _ in pts]
    ys = [y for _, _, pts in series for _, y in pts]
    _, xhi, xstep = nice_range(0.0, max(xs + [x_max or 0.0], default=1.0) or 1.0, 6)
    _, yhi, ystep = nice_range(0.0, max(ys, default=1.0) or 1.0, 5)
    # the legend sits in its own band above the plotting area, where no line can run under it
    f = Frame(width, height + 14, 0.0, xhi, 0.0, yhi, top=34)
    parts = f.open(title)
    yt = ticks(0, yhi, ystep)
    parts += f.y_axis(yt, [y_prefix + fmt_tick(v, ystep) for v in yt], ylabel)
    for k, (name, color, pts) in enumerate(series):
        if pts:
            path = [f"M{f.sx(0):.1f},{f.sy(0):.1f}"]
            for x, y in pts:
                path.append(f"H{f.sx(x):.1f}V{f.sy(y):.1f}")
            if x_max is not None:
                path.append(f"H{f.sx(x_max):.1f}")
            parts.append(f'<path d="{"".join(path)}" fill="none" stroke="{color}" stroke-width="2"/>')
        lx = f.left + k * 130
        parts.append(f'<rect class="legend" x="{lx}" y="8" width="12" height="3" fill="{color}"/>'
                     f'<text class="legend" x="{lx + 16}" y="13">{esc(name)}</text>')
    xt = ticks(0, xhi, xstep)
    parts += f.x_axis(xt, [fmt_tick(v, xstep) for v in xt], xlabel, grid=True)
    parts.append("</svg>")
    return "".join(parts)


def vbars(bars: Sequence[Bar], xlabel: str, ylabel: str, title: str, width: int = 640, height: int = 260,
          value_fmt: str = "{:.2f}") -> str:
    """Vertical bars from zero, one per category (readable with a single bar), value written on each."""
    top = max((b.value for b in bars), default=1.0) or 1.0
    _, yhi, ystep = nice_range(0.0, top * 1.1, 5)
    n = max(len(bars), 1)
    f = Frame(width, height, 0.0, float(max(n, 3)), 0.0, yhi)
    parts = f.open(title)
    yt = ticks(0, yhi, ystep)
    parts += f.y_axis(yt, [fmt_tick(v, ystep) for v in yt], ylabel)
    for k, b in enumerate(bars):
        x, w = f.sx(k + 0.15), f.sx(k + 0.85) - f.sx(k + 0.15)
        y = f.sy(b.value)
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{f.sy(0) - y:.1f}" fill="{b.color}">'
                     f"<title>{esc(b.tip or b.label)}</title></rect>")
        parts.append(f'<text x="{x + w / 2:.1f}" y="{y - 4:.1f}" text-anchor="middle">{esc(value_fmt.format(b.value))}</text>')
    parts += f.x_axis([k + 0.5 for k in range(len(bars))], [b.label for b in bars], xlabel)
    parts.append("</svg>")
    return "".join(parts)
