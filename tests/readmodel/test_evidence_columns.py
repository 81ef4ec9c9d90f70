"""`EvidenceColumns` gives the views the figures that reading each worker's stored evidence text as a
dict gives (the way the Reader read it before it kept columns), through changes, new stages and odd
texts."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest

from campaign.readmodel.definitions import trap_pass_rate, trap_pass_rate_of, weighted_agreement, weighted_agreement_of
from campaign.readmodel.evidence_columns import TOP, EvidenceColumns
from campaign.readmodel.snapshot import _excluded, _trap_share

KEYS = ("correlation", "labels", "traps_seen", "traps_passed", "excluded")


def _as_read(raw: str | None) -> dict[str, Any]:
    """A worker's evidence as the dict reading used it: the five figures (null ones missing), and the
    stages' figures the same way."""
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        return {}
    out = {k: data[k] for k in KEYS if data.get(k) is not None}
    stages = data.get("stages")
    if isinstance(stages, dict):
        out["stages"] = {str(k): {f: v[f] for f in KEYS if v.get(f) is not None} for k, v in stages.items() if isinstance(v, dict)}
    return out


def _reference(texts: dict[str, str | None], marked: set[str], names: list[str], stage: str, primary: bool) -> dict[str, Any]:
    evidence = {w: _as_read(raw) for w, raw in texts.items()}
    agree: dict[str, float | None] = {}
    traps: dict[str, float | None] = {}
    excl: dict[str, float | None] = {}
    for w, e in evidence.items():
        ev = (e.get("stages") or {}).get(stage)
        if ev is None and primary:
            ev = e
        if ev is None:
            excl[w] = 1.0 if w in marked and primary else 0.0
            continue
        agree[w] = ev.get("correlation")
        seen = ev.get("traps_seen", 0)
        traps[w] = ev.get("traps_passed", 0) / seen if seen else None
        excl[w] = 1.0 if ev.get("excluded", w in marked) else 0.0

    def column(values: dict[str, float | None]) -> np.ndarray:
        return np.array([np.nan if (v := values.get(w)) is None else float(v) for w in names], dtype=float)

    stage_ev = [(e.get("stages") or {}).get(stage, e if primary else {}) for e in evidence.values()]
    return {"agree": column(agree), "traps": column(traps), "excl": column(excl),
            "agreement_now": weighted_agreement(stage_ev), "trap_pass_now": trap_pass_rate(stage_ev),
            "agreement": weighted_agreement(evidence.values()), "trap_pass_rate": trap_pass_rate(evidence.values())}


def _figures(rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in KEYS:
        roll = rng.random()
        if roll < 0.2:
            continue  # absent
        if roll < 0.3:
            out[key] = None
        elif key == "correlation":
            out[key] = round(rng.uniform(-1, 1), 3)
        elif key == "excluded":
            out[key] = rng.random() < 0.3
        else:
            out[key] = rng.randint(0, 40)
    if out.get("traps_seen") is not None and out.get("traps_passed") is not None:
        out["traps_passed"] = min(out["traps_passed"], out["traps_seen"])
    return out


def _text(rng: random.Random, stage_names: list[str]) -> str | None:
    roll = rng.random()
    if roll < 0.05:
        return None
    if roll < 0.08:
        return rng.choice(["", "[1, 2]", "not json", "null"])
    data = _figures(rng)
    if rng.random() < 0.7:
        data["stages"] = {st: _figures(rng) for st in stage_names if rng.random() < 0.6}
        if rng.random() < 0.05:
            data["stages"]["odd"] = [1, 2]  # not an object: no figures
    return json.dumps(data)


def _check(cols: EvidenceColumns, texts: dict[str, str | None], marked: set[str], names: list[str], stages: list[str]) -> None:
    rows = {w: names.index(w) for w in texts}
    current = np.zeros(len(names), dtype=bool)
    current[list(rows.values())] = True
    flags = np.zeros(len(names), dtype=bool)
    flags[[rows[w] for w in marked if w in rows]] = True
    for k, st in enumerate(stages):
        want = _reference(texts, marked, names, st, primary=k == 0)
        fig = cols.stage(st, primary=k == 0, current=current)
        np.testing.assert_array_equal(fig.correlation, want["agree"])
        np.testing.assert_array_equal(_trap_share(fig), want["traps"])
        np.testing.assert_array_equal(_excluded(fig, flags, current), want["excl"])
        assert weighted_agreement_of(fig.correlation, fig.labels) == pytest.approx(want["agreement_now"], abs=1e-12)
        assert trap_pass_rate_of(fig.traps_seen, fig.traps_passed) == want["trap_pass_now"]
    top = cols.stage(TOP, primary=True, current=current)
    want = _reference(texts, marked, names, stages[0], primary=True)
    assert weighted_agreement_of(top.correlation, top.labels) == pytest.approx(want["agreement"], abs=1e-12)
    assert trap_pass_rate_of(top.traps_seen, top.traps_passed) == want["trap_pass_rate"]


@pytest.mark.parametrize("seed", range(8))
def test_columns_give_what_reading_each_text_as_a_dict_gives(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"W{i}" for i in range(60)]  # the Arrivals' worker list; some have no row (no current evidence)
    stages = ["likert", "rank"]
    cols = EvidenceColumns()
    texts: dict[str, str | None] = {}
    for round_ in range(6):
        if round_ == 3:
            stages.append("later")  # a stage first named in evidence after the columns were made
        for w in rng.sample(names, 25):  # some workers' texts change, some workers appear
            texts[w] = _text(rng, stages)
        marked = {w for w in texts if rng.random() < 0.2}
        cols.update((names.index(w), raw) for w, raw in texts.items())
        _check(cols, texts, marked, names, stages)
        names += [f"N{round_}-{i}" for i in range(rng.randint(0, 5))]  # the worker list grows: the columns follow


def test_an_unchanged_text_is_not_parsed_again_and_a_changed_one_is(monkeypatch: pytest.MonkeyPatch) -> None:
    cols = EvidenceColumns()
    first = json.dumps({"correlation": 0.8, "labels": 45, "stages": {"likert": {"labels": 45}}})
    parsed: list[int] = []
    real = cols._fill
    monkeypatch.setattr(cols, "_fill", lambda row, text: (parsed.append(row), real(row, text)))
    cols.update([(0, first), (1, first)])
    cols.update([(0, first), (1, first)])
    assert parsed == [0, 1]
    cols.update([(0, json.dumps({"correlation": 0.2, "labels": 46}))])
    assert parsed == [0, 1, 0]
    current = np.array([True, True])
    fig = cols.stage("likert", primary=True, current=current)
    assert fig.labels.tolist() == [46, 45]  # row 0 lost its stage entry: the top level stands in for the primary stage
    assert np.isnan(fig.correlation[1]) and fig.correlation[0] == 0.2
    cols.update([(1, None)])  # evidence gone: no figures
    assert cols.stage(TOP, primary=True, current=current).labels.tolist() == [46, 0]


def test_a_worker_costs_tens_of_bytes_not_hundreds() -> None:
    cols = EvidenceColumns()
    text = json.dumps({"correlation": 0.5, "labels": 10, "traps_seen": 2, "traps_passed": 1,
                       "stages": {"likert": {"correlation": 0.5, "labels": 10}, "rank": {"labels": 3, "excluded": False}}})
    cols.update((i, text) for i in range(10_000))
    held = sum(a.nbytes for a in (cols._hash, cols._len, cols._present, cols._corr, cols._labels, cols._seen,
                                  cols._passed, cols._excl))
    assert held / 10_000 < 1.25 * (16 + 3 * 30)  # at most a quarter spare room
