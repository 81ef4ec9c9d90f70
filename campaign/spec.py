"""The campaign spec: YAML in, a typed and frozen `Spec` out, or every problem as `file:line: field: message`.

Validation collects all problems instead of stopping at the first, because a researcher editing a long
spec wants one round trip, not ten. Unknown keys are errors: a misspelt `asignments:` silently ignored
would post HITs with the default and spend money on the wrong design.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from campaign.money import MoneyError, hit_cost, parse_amount

MARKETPLACES = ("local", "mturk-sandbox", "mturk")
TASK_KINDS = ("likert", "ranking", "nuggets")
CROWD_KINDS = ("simulated", "none")
WORKER_KINDS = ("diligent", "noisy", "biased", "constant_spammer", "random_spammer")
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
DURATION_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}

# MTurk's limits (reference §2, legacy limits) so a spec is refused here rather than by the marketplace.
LIFETIME_RANGE = (30, 31_536_000)
DURATION_RANGE = (30, 31_536_000)
AUTO_APPROVAL_RANGE = (0, 2_592_000)


class SpecError(Exception):
    """One or more problems in a spec; `problems` are ready-to-print `file:line: field: message` lines."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


# ---------------------------------------------------------------------------------------------- typed spec


@dataclass(frozen=True)
class Qualifications:
    locales: tuple[str, ...] = ()
    approval_rate: int | None = None
    approved_hits: int | None = None
    masters: bool = False
    custom: tuple[tuple[str, str, int], ...] = ()  # (qualification type name, comparator, value)


@dataclass(frozen=True)
class Traps:
    share: float = 0.0  # share of HITs that carry one trap item
    texts: tuple[str, ...] = ("This sentence is not important.",)
    max_rating: int = 2  # a Likert trap passes when rated at most this
    tolerance: int = 1  # a ranking trap passes when placed within this many positions of last


@dataclass(frozen=True)
class QualityPolicy:
    enabled: bool = True
    min_shared: int = 5  # items shared with the rest before a worker's correlation counts
    min_correlation: float = 0.2
    max_excluded_share: float = 0.05
    reject_spam: bool = True
    block: bool = False
    block_list: str | None = None  # campaigns naming the same list share their blocks
    bonus: str | None = None  # bonus amount for consistently good workers, or None


@dataclass(frozen=True)
class Stage:
    name: str
    kind: str
    items_per_hit: int
    assignments: int
    reward: Decimal
    lifetime: int
    duration: int
    auto_approval_delay: int
    title: str
    description: str
    keywords: str
    qualifications: Qualifications
    traps: Traps
    # ranking stage only
    source: str | None = None  # name of the stage whose top items feed this one
    shortlist: int = 100
    keep: int = 50
    batch_pairs: int = 100
    pair_budget: float = 0.10
    target_confidence: float | None = None
    # nugget stage only
    window: int = 7
    min_nugget_tokens: int = 3
    require_verb: bool = False
    min_workers: int = 3


@dataclass(frozen=True)
class Crowd:
    kind: str = "simulated"
    workers: int = 40
    mix: tuple[tuple[str, float], ...] = (
        ("diligent", 0.6),
        ("noisy", 0.2),
        ("biased", 0.1),
        ("random_spammer", 0.05),
        ("constant_spammer", 0.05),
    )
    speed: float = 3600.0  # simulated seconds per real second
    arrival_span: int = 3600  # simulated seconds over which workers arrive
    truth: str | None = None  # file with the hidden importance per item (simulation only)


@dataclass(frozen=True)
class Campaign:
    name: str
    topic: str
    input_kind: str  # "propositions" | "documents"
    input_path: str
    stages: tuple[Stage, ...]
    budget: Decimal
    marketplace: str
    crowd: Crowd
    quality: QualityPolicy
    poll_interval: float
    endpoint_url: str | None = None

    def fingerprint(self) -> str:
        """A hash of everything that shapes HITs; a resumed run refuses a changed spec."""
        blob = json.dumps(asdict(self), default=str, sort_keys=True).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()[:16]

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)


@dataclass(frozen=True)
class Spec:
    path: str
    campaigns: tuple[Campaign, ...]

    def campaign(self, name: str) -> Campaign:
        for c in self.campaigns:
            if c.name == name:
                return c
        raise KeyError(f"no campaign named {name!r} in {self.path}; it has: {', '.join(c.name for c in self.campaigns)}")


# --------------------------------------------------------------------------------- YAML with line numbers


class _Doc:
    """Plain Python values plus the line of every mapping key and value, by path."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lines: dict[tuple[Any, ...], int] = {}

    def build(self, node: yaml.Node, at: tuple[Any, ...] = ()) -> Any:
        self.lines.setdefault(at, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k.value)
                self.lines[at + (key,)] = k.start_mark.line + 1
                out[key] = self.build(v, at + (key,))
                self.lines[at + (key,)] = k.start_mark.line + 1
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.build(v, at + (i,)) for i, v in enumerate(node.value)]
        return yaml.constructor.SafeConstructor().construct_object(node, deep=True)

    def line(self, at: tuple[Any, ...]) -> int:
        while at and at not in self.lines:
            at = at[:-1]
        return self.lines.get(at, 1)


def _field_name(at: tuple[Any, ...]) -> str:
    out = ""
    for p in at:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top)"


class _Checker:
    def __init__(self, doc: _Doc) -> None:
        self.doc = doc
        self.problems: list[str] = []

    def err(self, at: tuple[Any, ...], message: str) -> None:
        self.problems.append(f"{self.doc.path}:{self.doc.line(at)}: {_field_name(at)}: {message}")

    def mapping(self, value: Any, at: tuple[Any, ...], allowed: set[str], required: set[str] = frozenset()) -> dict:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            self.err(at, f"must be a mapping, got {type(value).__name__}")
            return {}
        for k in value:
            if k not in allowed:
                hint = _closest(k, allowed)
                self.err(at + (k,), "unknown key" + (f" (did you mean '{hint}'?)" if hint else f"; allowed: {', '.join(sorted(allowed))}"))
        for k in sorted(required):
            if k not in value:
                self.err(at, f"missing required key '{k}'")
        return value

    def get(self, m: dict, key: str, at: tuple[Any, ...], conv: Callable[[Any, tuple[Any, ...]], Any], default: Any) -> Any:
        if key not in m or m[key] is None:
            return default
        return conv(m[key], at + (key,))

    # converters ---------------------------------------------------------------------------------------
    def string(self, v: Any, at: tuple[Any, ...]) -> str:
        if not isinstance(v, str) or not v.strip():
            self.err(at, "must be a non-empty string")
            return ""
        return v

    def integer(self, lo: int | None = None, hi: int | None = None) -> Callable[[Any, tuple[Any, ...]], int]:
        def conv(v: Any, at: tuple[Any, ...]) -> int:
            if isinstance(v, bool) or not isinstance(v, int):
                self.err(at, f"must be a whole number, got {v!r}")
                return lo or 0
            if lo is not None and v < lo or hi is not None and v > hi:
                self.err(at, f"must be between {lo} and {hi}, got {v}" if hi is not None else f"must be at least {lo}, got {v}")
            return v

        return conv

    def number(self, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> Callable[[Any, tuple[Any, ...]], float]:
        def conv(v: Any, at: tuple[Any, ...]) -> float:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                self.err(at, f"must be a number, got {v!r}")
                return lo or 0.0
            if lo is not None and (v <= lo if lo_open else v < lo) or hi is not None and v > hi:
                self.err(at, f"must be {'>' if lo_open else '>='} {lo}" + (f" and <= {hi}" if hi is not None else "") + f", got {v}")
            return float(v)

        return conv

    def boolean(self, v: Any, at: tuple[Any, ...]) -> bool:
        if not isinstance(v, bool):
            self.err(at, f"must be true or false, got {v!r}")
            return False
        return v

    def money(self, v: Any, at: tuple[Any, ...]) -> Decimal:
        if isinstance(v, float):
            # YAML turns 0.06 into a float; its repr is exact enough to check the two-decimal rule on.
            v = repr(v)
        try:
            amount = parse_amount(str(v))
        except MoneyError as exc:
            if str(v).strip().startswith("-"):
                self.err(at, f"must not be negative, got {v}")
            else:
                self.err(at, f"{exc} (write amounts like \"0.06\")")
            return Decimal("0")
        return amount

    def duration(self, lo: int, hi: int) -> Callable[[Any, tuple[Any, ...]], int]:
        def conv(v: Any, at: tuple[Any, ...]) -> int:
            m = DURATION_PATTERN.match(str(v)) if not isinstance(v, bool) else None
            if not m:
                self.err(at, f"must be a duration like 600, \"10m\", \"2h\" or \"3d\", got {v!r}")
                return lo
            seconds = int(float(m.group(1)) * DURATION_UNITS[m.group(2)])
            if not lo <= seconds <= hi:
                self.err(at, f"must be between {lo} s and {hi} s (MTurk's limits), got {seconds} s")
            return seconds

        return conv

    def choice(self, options: tuple[str, ...]) -> Callable[[Any, tuple[Any, ...]], str]:
        def conv(v: Any, at: tuple[Any, ...]) -> str:
            if v not in options:
                self.err(at, f"must be one of {', '.join(options)}, got {v!r}")
                return options[0]
            return v

        return conv


def _closest(word: str, options: set[str]) -> str | None:
    import difflib

    match = difflib.get_close_matches(word, sorted(options), n=1, cutoff=0.7)
    return match[0] if match else None


# ----------------------------------------------------------------------------------------------- loading

STAGE_DEFAULTS: dict[str, dict[str, Any]] = {
    # seed 000 §4.1: 5 propositions per Likert HIT, 5 workers, $0.06
    "likert": {"items_per_hit": 5, "assignments": 5, "reward": Decimal("0.06")},
    # seed 000 §4.3: 5 propositions per ranking HIT, 5 workers, $0.05
    "ranking": {"items_per_hit": 5, "assignments": 5, "reward": Decimal("0.05")},
    # seed 002 §3: 7 sentences per HIT, 7 workers, $0.07, >=98% approval
    "nuggets": {"items_per_hit": 7, "assignments": 7, "reward": Decimal("0.07")},
}
STAGE_TITLES = {
    "likert": ("How important is this statement for the topic?", "Rate how important each of five short statements is for a summary of a topic."),
    "ranking": ("Order five statements by importance", "Put five short statements in order, from most to least important for a summary of a topic."),
    "nuggets": ("Mark the important facts in a short text", "Mark the facts, opinions or claims you would put in a summary of a topic."),
}
STAGE_KEYS = {
    "name", "kind", "items_per_hit", "assignments", "reward", "lifetime", "duration", "auto_approval_delay",
    "title", "description", "keywords", "qualifications", "traps", "source", "shortlist", "keep",
    "batch_pairs", "pair_budget", "target_confidence", "window", "min_nugget_tokens", "require_verb", "min_workers",
}
CAMPAIGN_KEYS = {"name", "topic", "input", "task", "stages", "budget", "marketplace", "endpoint_url", "crowd", "quality", "schedule"}


def load_spec(path: str | Path) -> Spec:
    """Read and validate a spec file; raise `SpecError` listing every problem."""
    p = Path(path)
    shown = str(path)
    if not p.is_file():
        raise SpecError([f"{shown}:0: (file): no such file (give one with --config, or create campaigns.yaml)"])
    text = p.read_text(encoding="utf-8")
    try:
        node = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 0
        raise SpecError([f"{shown}:{line}: (yaml): {getattr(exc, 'problem', None) or exc}"]) from None
    doc = _Doc(shown)
    data = doc.build(node) if node is not None else {}
    return _validate(data, doc, base_dir=p.parent)


def _validate(data: Any, doc: _Doc, base_dir: Path) -> Spec:
    ck = _Checker(doc)
    top = ck.mapping(data, (), {"campaigns"}, {"campaigns"})
    raw_campaigns = top.get("campaigns") or []
    if not isinstance(raw_campaigns, list) or not raw_campaigns:
        ck.err(("campaigns",), "must be a non-empty list of campaigns")
        raw_campaigns = []
    campaigns: list[Campaign] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_campaigns):
        c = _campaign(ck, raw, ("campaigns", i), base_dir)
        if c is None:
            continue
        if c.name in seen:
            ck.err(("campaigns", i, "name"), f"duplicate campaign name {c.name!r}")
        seen.add(c.name)
        campaigns.append(c)
    if ck.problems:
        raise SpecError(ck.problems)
    return Spec(path=doc.path, campaigns=tuple(campaigns))


def _campaign(ck: _Checker, raw: Any, at: tuple[Any, ...], base_dir: Path) -> Campaign | None:
    m = ck.mapping(raw, at, CAMPAIGN_KEYS, {"name", "topic", "input", "budget"})
    name = ck.get(m, "name", at, ck.string, "")
    if name and not NAME_PATTERN.match(name):
        ck.err(at + ("name",), "must be lower-case letters, digits, '-' or '_' (it names a folder under state/)")
    topic = ck.get(m, "topic", at, ck.string, "")

    inp = ck.mapping(m.get("input"), at + ("input",), {"propositions", "documents"})
    input_kind, input_path = "propositions", ""
    kinds = [k for k in ("propositions", "documents") if k in inp]
    if len(kinds) != 1 and "input" in m:
        ck.err(at + ("input",), "give exactly one of 'propositions' (a TSV of id and text) or 'documents'")
    elif kinds:
        input_kind = kinds[0]
        input_path = ck.get(inp, input_kind, at + ("input",), ck.string, "")
        if input_path and not (base_dir / input_path).is_file():
            ck.err(at + ("input", input_kind), f"file not found: {input_path} (relative to {base_dir or '.'})")
        input_path = str(base_dir / input_path) if input_path else ""

    if "task" in m and "stages" in m:
        ck.err(at + ("stages",), "give either 'task' (one stage) or 'stages', not both")
    raw_stages: list[tuple[Any, tuple[Any, ...]]] = []
    if "stages" in m:
        if not isinstance(m["stages"], list) or not m["stages"]:
            ck.err(at + ("stages",), "must be a non-empty list of stages")
        else:
            raw_stages = [(s, at + ("stages", j)) for j, s in enumerate(m["stages"])]
    elif "task" in m:
        raw_stages = [(m["task"], at + ("task",))]
    else:
        ck.err(at, "missing required key 'task' (or 'stages')")
    stages = [s for s in (_stage(ck, r, a, j) for j, (r, a) in enumerate(raw_stages)) if s is not None]
    names = [s.name for s in stages]
    for j, s in enumerate(stages):
        if names.count(s.name) > 1:
            ck.err(raw_stages[j][1] + ("name",), f"duplicate stage name {s.name!r}")
        if s.kind == "ranking" and len(stages) > 1:
            if s.source is None or s.source not in names[:j]:
                ck.err(raw_stages[j][1] + ("source",), "a ranking stage after others must name an earlier stage as 'source'")
        if s.kind == "nuggets" and input_kind != "documents":
            ck.err(raw_stages[j][1] + ("kind",), "a nuggets stage needs 'input: documents'")
        if s.kind in ("likert", "ranking") and input_kind != "propositions" and j == 0:
            ck.err(raw_stages[j][1] + ("kind",), f"a {s.kind} stage needs 'input: propositions'")

    budget = ck.get(m, "budget", at, ck.money, Decimal("0"))
    if stages and budget > 0:
        first = stages[0]
        one_hit = hit_cost(first.reward, first.assignments)
        if budget < one_hit:
            ck.err(at + ("budget",), f"${budget} is below the cost of one HIT (${one_hit} = {first.assignments} x ${first.reward} + fees)")
    elif "budget" in m and budget <= 0:
        ck.err(at + ("budget",), "must be more than 0")

    marketplace = ck.get(m, "marketplace", at, ck.choice(MARKETPLACES), "local")
    endpoint_url = ck.get(m, "endpoint_url", at, ck.string, None)
    crowd = _crowd(ck, m.get("crowd"), at + ("crowd",), base_dir)
    if crowd.kind == "simulated" and marketplace != "local":
        ck.err(at + ("crowd", "kind"), "a simulated crowd can only work the built-in marketplace (marketplace: local)")
    quality = _quality(ck, m.get("quality"), at + ("quality",))
    sched = ck.mapping(m.get("schedule"), at + ("schedule",), {"poll_interval"})
    poll = ck.get(sched, "poll_interval", at + ("schedule",), ck.number(0.05, 86400.0), 1.0)
    if not name:
        return None
    return Campaign(
        name=name, topic=topic, input_kind=input_kind, input_path=input_path, stages=tuple(stages),
        budget=budget, marketplace=marketplace, crowd=crowd, quality=quality, poll_interval=poll,
        endpoint_url=endpoint_url,
    )


def _stage(ck: _Checker, raw: Any, at: tuple[Any, ...], index: int) -> Stage | None:
    m = ck.mapping(raw, at, STAGE_KEYS, {"kind"})
    kind = ck.get(m, "kind", at, ck.choice(TASK_KINDS), None)
    if kind is None:
        return None
    d = STAGE_DEFAULTS[kind]
    title, description = STAGE_TITLES[kind]
    items_per_hit = ck.get(m, "items_per_hit", at, ck.integer(1, 50), d["items_per_hit"])
    if kind == "ranking" and items_per_hit < 2:
        ck.err(at + ("items_per_hit",), "a ranking HIT needs at least 2 items")
    quals = _qualifications(ck, m.get("qualifications"), at + ("qualifications",), kind)
    traps = _traps(ck, m.get("traps"), at + ("traps",))
    return Stage(
        name=ck.get(m, "name", at, ck.string, kind if index == 0 else f"{kind}{index}"),
        kind=kind,
        items_per_hit=items_per_hit,
        assignments=ck.get(m, "assignments", at, ck.integer(1, 100), d["assignments"]),
        reward=ck.get(m, "reward", at, ck.money, d["reward"]),
        lifetime=ck.get(m, "lifetime", at, ck.duration(*LIFETIME_RANGE), 3 * 86400),
        duration=ck.get(m, "duration", at, ck.duration(*DURATION_RANGE), 1800),
        auto_approval_delay=ck.get(m, "auto_approval_delay", at, ck.duration(*AUTO_APPROVAL_RANGE), 3 * 86400),
        title=ck.get(m, "title", at, ck.string, title),
        description=ck.get(m, "description", at, ck.string, description),
        keywords=ck.get(m, "keywords", at, ck.string, "importance, summary, rating"),
        qualifications=quals,
        traps=traps,
        source=ck.get(m, "source", at, ck.string, None),
        shortlist=ck.get(m, "shortlist", at, ck.integer(2), 100),
        keep=ck.get(m, "keep", at, ck.integer(1), 50),
        batch_pairs=ck.get(m, "batch_pairs", at, ck.integer(1), 100),
        pair_budget=ck.get(m, "pair_budget", at, ck.number(0.0, 1.0, lo_open=True), 0.10),
        target_confidence=ck.get(m, "target_confidence", at, ck.number(0.0, 1.0), None),
        window=ck.get(m, "window", at, ck.integer(1, 50), 7),
        min_nugget_tokens=ck.get(m, "min_nugget_tokens", at, ck.integer(1), 3),
        require_verb=ck.get(m, "require_verb", at, ck.boolean, False),
        min_workers=ck.get(m, "min_workers", at, ck.integer(1), 3),
    )


def _qualifications(ck: _Checker, raw: Any, at: tuple[Any, ...], kind: str) -> Qualifications:
    m = ck.mapping(raw, at, {"locale", "approval_rate", "approved_hits", "masters", "custom"})
    locales = m.get("locale", ["US"])
    if isinstance(locales, str):
        locales = [locales]
    if not isinstance(locales, list) or not all(isinstance(x, str) and re.fullmatch(r"[A-Z]{2}(-[A-Z0-9]{1,3})?", x) for x in locales):
        ck.err(at + ("locale",), "must be a list of ISO 3166 country codes like [US, GB] (optionally US-NY)")
        locales = []
    default_rate = 98 if kind == "nuggets" else 95  # seed 002: >=98%; seed 000: >=95%
    custom: list[tuple[str, str, int]] = []
    for j, c in enumerate(m.get("custom") or []):
        cm = ck.mapping(c, at + ("custom", j), {"name", "comparator", "value"}, {"name"})
        custom.append((
            ck.get(cm, "name", at + ("custom", j), ck.string, ""),
            ck.get(cm, "comparator", at + ("custom", j), ck.choice(
                ("Exists", "DoesNotExist", "GreaterThanOrEqualTo", "GreaterThan", "LessThan", "LessThanOrEqualTo", "EqualTo", "NotEqualTo")
            ), "Exists"),
            ck.get(cm, "value", at + ("custom", j), ck.integer(0), 1),
        ))
    return Qualifications(
        locales=tuple(locales),
        approval_rate=ck.get(m, "approval_rate", at, ck.integer(0, 100), default_rate),
        approved_hits=ck.get(m, "approved_hits", at, ck.integer(0), None),
        masters=ck.get(m, "masters", at, ck.boolean, False),
        custom=tuple(custom),
    )


def _traps(ck: _Checker, raw: Any, at: tuple[Any, ...]) -> Traps:
    m = ck.mapping(raw, at, {"share", "texts", "max_rating", "tolerance"})
    texts = m.get("texts", list(Traps.texts))
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t.strip() for t in texts):
        ck.err(at + ("texts",), "must be a non-empty list of trap sentences")
        texts = list(Traps.texts)
    return Traps(
        share=ck.get(m, "share", at, ck.number(0.0, 1.0), 0.0),
        texts=tuple(texts),
        max_rating=ck.get(m, "max_rating", at, ck.integer(1, 5), 2),
        tolerance=ck.get(m, "tolerance", at, ck.integer(0, 10), 1),
    )


def _crowd(ck: _Checker, raw: Any, at: tuple[Any, ...], base_dir: Path) -> Crowd:
    m = ck.mapping(raw, at, {"kind", "workers", "mix", "speed", "arrival_span", "truth"})
    kind = ck.get(m, "kind", at, ck.choice(CROWD_KINDS), "simulated" if raw is not None else "none")
    mix = Crowd.mix
    if "mix" in m:
        mm = ck.mapping(m["mix"], at + ("mix",), set(WORKER_KINDS))
        vals = [(k, ck.number(0.0, 1.0)(v, at + ("mix", k))) for k, v in mm.items()]
        if vals and sum(v for _, v in vals) <= 0:
            ck.err(at + ("mix",), "shares must add up to more than 0")
        mix = tuple(sorted(vals)) or mix
    truth = ck.get(m, "truth", at, ck.string, None)
    if truth is not None:
        if not (base_dir / truth).is_file():
            ck.err(at + ("truth",), f"file not found: {truth}")
        truth = str(base_dir / truth)
    return Crowd(
        kind=kind,
        workers=ck.get(m, "workers", at, ck.integer(1, 100000), 40),
        mix=mix,
        speed=ck.get(m, "speed", at, ck.number(0.0, 1e7, lo_open=True), 3600.0),
        arrival_span=ck.get(m, "arrival_span", at, ck.duration(0, 31_536_000), 3600),
        truth=truth,
    )


def _quality(ck: _Checker, raw: Any, at: tuple[Any, ...]) -> QualityPolicy:
    m = ck.mapping(raw, at, {"enabled", "min_shared", "min_correlation", "max_excluded_share", "reject_spam", "block", "block_list", "bonus"})
    bonus = ck.get(m, "bonus", at, ck.money, None)
    return QualityPolicy(
        enabled=ck.get(m, "enabled", at, ck.boolean, True),
        min_shared=ck.get(m, "min_shared", at, ck.integer(1), 5),
        min_correlation=ck.get(m, "min_correlation", at, ck.number(-1.0, 1.0), 0.2),
        max_excluded_share=ck.get(m, "max_excluded_share", at, ck.number(0.0, 1.0), 0.05),
        reject_spam=ck.get(m, "reject_spam", at, ck.boolean, True),
        block=ck.get(m, "block", at, ck.boolean, False),
        block_list=ck.get(m, "block_list", at, ck.string, None),
        bonus=str(bonus) if bonus is not None else None,
    )
