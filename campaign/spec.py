"""The campaign spec: YAML in, a typed and frozen `Spec` out, or every problem as `file:line: field: message`.

Validation collects all problems instead of stopping at the first, because a researcher editing a long
spec wants one round trip, not ten. Unknown keys are errors: a misspelt `asignments:` silently ignored
would post HITs with the default and spend money on the wrong design.

Every field is declared once, on its dataclass, with its default and the converter that reads it from
YAML (`opt(...)`); the loader walks the dataclass fields, so the allowed keys, the defaults and the
checks cannot drift apart (`campaign.stage`). Each task kind has its own stage type carrying only its
own fields and its own rules (class attributes): the kind registered under a stage's `kind`
(`campaign.tasks.register`) says which type reads it.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import re
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, asdict, dataclass, fields, replace
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import yaml

from campaign import tasks
from campaign.inputs import InputError, load_items, load_truth
from campaign.money import MoneyError, hit_cost, parse_amount
from campaign.prolific.study import ProlificConfig, place_cost, reward_per_submission
from campaign.stage import (
    At,
    Conv,
    Qualifications,
    Repeat,
    Stage,
    Traps,
    _boolean,
    _choice,
    _duration,
    _integer,
    _money,
    _money_text,
    _number,
    _string,
    opt,
)
from campaign.tasks.base import ShownItem, TemplateError
from campaign.untrusted import NOT_IN_A_PAGE

MARKETPLACES = ("local", "mturk-sandbox", "mturk", "prolific", "prolific-local")
PROLIFIC_MARKETPLACES = ("prolific", "prolific-local")
SIMULATED_OK = ("local", "prolific-local")  # marketplaces a simulated crowd can work (both run in-process)
CROWD_KINDS = ("simulated", "none")
WORKER_KINDS = ("diligent", "noisy", "biased", "constant_spammer", "random_spammer")
# What an adversarial simulated worker does (`crowd.adversaries.behaviours`); campaign.crowd.adversaries
# implements each through the worker side people use. Named here so the spec can check them without
# importing the simulated crowd.
ADVERSARY_BEHAVIOURS = ("control_chars", "garbage", "empty", "foreign", "double_submit", "hold", "return_midway",
                        "no_work", "fast")
# `CAMPAIGN_ADVERSARIES=SHARE` in the environment gives every simulated crowd that names no adversaries
# of its own this share of adversaries (every behaviour alike): the switch that runs any test or
# benchmark against a hostile crowd. Real crowds (`crowd: none`) are never touched.
ADVERSARIES_ENV = "CAMPAIGN_ADVERSARIES"
INPUT_KINDS = ("propositions", "documents")
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
DURATION_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}

# A spec is a few hundred values; a document that expands (through YAML aliases) to far more is an
# alias bomb, refused before it can take seconds and gigabytes.
MAX_VALUES = 100_000
MAX_DEPTH = 64



class SpecError(Exception):
    """One or more problems in a spec; `problems` are ready-to-print `file:line: field: message` lines."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems



def _mix(ck: _Checker, v: Any, at: At) -> tuple[tuple[str, float], ...]:
    mm = ck.mapping(v, at, set(WORKER_KINDS))
    vals = [(k, ck.number(0.0, 1.0)(x, at + (k,))) for k, x in mm.items()]
    if vals and sum(x for _, x in vals) <= 0:
        ck.err(at, "shares must add up to more than 0")
    if not vals:
        return _default(Crowd, "mix")
    return tuple(sorted(vals))


def _behaviours(ck: _Checker, v: Any, at: At) -> tuple[tuple[str, float], ...]:
    mm = ck.mapping(v, at, set(ADVERSARY_BEHAVIOURS))
    vals = [(k, ck.number(0.0, 1e6)(x, at + (k,))) for k, x in mm.items()]
    if vals and sum(x for _, x in vals) <= 0:
        ck.err(at, "weights must add up to more than 0")
    if not vals:
        return _default(Adversaries, "behaviours")
    return tuple(sorted(vals))


def _adversaries(ck: _Checker, v: Any, at: At) -> Adversaries:
    return Adversaries(**ck.read(Adversaries, v, at))


TRUTH_NONE = "none"  # `truth: none`: a simulated crowd without hidden truth, on purpose (answers are noise)


def _not_a_file(path: Path, given: str) -> str:
    """Why `path` (named `given` in the spec) cannot be read as an input file."""
    if path.is_dir():
        return f"{given} is a folder; name a file"
    return f"file not found: {given}"


def _truth_file(ck: _Checker, v: Any, at: At) -> str | None:
    name = ck.string(v, at)
    if name.strip().lower() == TRUTH_NONE:
        return None
    if not name:
        return name
    path = ck.base_dir / name
    if not path.is_file():
        ck.err(at, _not_a_file(path, name))
    else:
        try:
            load_truth(path)
        except InputError as exc:
            ck.err(at, str(exc))
    return str(path)



# ---------------------------------------------------------------------------------------------- typed spec


@dataclass(frozen=True)
class QualityPolicy:
    enabled: bool = opt(True, _boolean)
    min_shared: int = opt(5, _integer(1))  # items shared with the rest before a worker's correlation counts
    min_correlation: float = opt(0.2, _number(-1.0, 1.0))
    max_excluded_share: float = opt(0.05, _number(0.0, 1.0))
    reject_spam: bool = opt(True, _boolean)
    block: bool = opt(False, _boolean)
    block_list: str | None = opt(None, _string)  # campaigns naming the same list share their blocks
    bonus: str | None = opt(None, _money_text)  # bonus amount for consistently good workers, or None
    # every stage asks again for answers that were rejected or whose labels quality control left out, where
    # the marketplace can add slots (`campaign.steps.replace`); a kind that needs every answer (nuggets)
    # does so on MTurk-style marketplaces whatever this says
    replace_excluded: bool = opt(False, _boolean)


@dataclass(frozen=True)
class Adversaries:
    """`crowd.adversaries: {share: 0.25, behaviours: {garbage: 2, hold: 1}}`: a seeded `share` of the
    simulated crowd's workers misbehave, each with one behaviour drawn to the given weights (default:
    every behaviour alike). They work through the same worker side as everyone else (the worker site's
    forms, the Prolific door); what each behaviour does is documented in campaign.crowd.adversaries and
    docs/hostile-crowd.md. Simulation only: a real crowd's workers are who they are."""

    share: float = opt(0.0, _number(0.0, 1.0))
    behaviours: tuple[tuple[str, float], ...] = opt(tuple((b, 1.0) for b in ADVERSARY_BEHAVIOURS), _behaviours)


@dataclass(frozen=True)
class Crowd:
    kind: str = opt("simulated", _choice(CROWD_KINDS))  # with no `crowd:` section at all: none
    workers: int = opt(40, _integer(1, 100000))
    mix: tuple[tuple[str, float], ...] = opt((
        ("diligent", 0.6),
        ("noisy", 0.2),
        ("biased", 0.1),
        ("random_spammer", 0.05),
        ("constant_spammer", 0.05),
    ), _mix)
    speed: float = opt(3600.0, _number(0.0, 1e7, lo_open=True))  # simulated seconds per real second
    arrival_span: int = opt(3600, _duration(0, 31_536_000))  # simulated seconds over which workers arrive
    truth: str | None = opt(None, _truth_file)  # file with the hidden importance per item (simulation only)
    adversaries: Adversaries = opt(conv=_adversaries, factory=Adversaries)


@dataclass(frozen=True)
class _Schedule:
    poll_interval: float = opt(1.0, _number(0.05, 86400.0))
    # requests per second to the marketplace; unset: the marketplace's own (`campaign.marketplaces.default_max_rps`)
    max_rps: float | None = opt(None, _number(0.0, 1e6, lo_open=True))


@dataclass(frozen=True)
class Campaign:
    name: str = opt(conv=_string)
    topic: str = opt(conv=_string)
    input_kind: str = opt()  # "propositions" | "documents"
    input_path: str = opt()
    stages: tuple[Stage, ...] = opt()
    budget: Decimal = opt(conv=_money)
    marketplace: str = opt("local", _choice(MARKETPLACES))
    crowd: Crowd = opt(factory=lambda: Crowd(kind="none"))
    quality: QualityPolicy = opt(factory=QualityPolicy)
    poll_interval: float = opt(_Schedule.poll_interval)
    max_rps: float | None = opt(_Schedule.max_rps)
    endpoint_url: str | None = opt(None, _string)
    # `prolific:` (its fields minus public_url, which comes from `task_site.public_url` or the run)
    prolific: ProlificConfig | None = None
    public_url: str | None = None  # `task_site.public_url`: where participants reach the task site

    def fingerprint(self) -> str:
        """A hash of everything that shapes HITs; a resumed run refuses a changed spec.

        Computed as it was when every stage carried every kind's fields, so that campaigns stored before
        stages got one type per kind resume: a stage lacks the built-in kinds' fields it does not have, and
        their defaults stand in.
        """
        data = asdict(self)
        data.pop("max_rps")  # how fast we talk to the marketplace shapes no HIT: changing it on resume is fine
        for key in ("prolific", "public_url"):  # absent before Prolific existed: older campaigns still resume
            if data.get(key) is None:
                data.pop(key, None)
        legacy = _LEGACY_STAGE_FIELDS
        data["stages"] = [{**legacy, **s} for s in data["stages"]]
        if not data["quality"].get("replace_excluded"):  # off: as before the switch existed, so older campaigns resume
            data["quality"].pop("replace_excluded", None)
        if data["crowd"].get("adversaries") == asdict(Adversaries()):  # none: as before adversaries existed
            del data["crowd"]["adversaries"]
        for st in data["stages"]:  # no repeat: as before `repeat:` existed, so older campaigns still resume
            if st.get("repeat") == asdict(Repeat()):
                del st["repeat"]
            for key in ("instructions", "template"):  # absent before stages had their own pages: likewise
                if st.get(key) is None:
                    st.pop(key, None)
            if st.get("template"):  # the page is the file's content: an edited template is a changed spec
                st["template"] = [st["template"], _file_digest(st["template"])]
        blob = json.dumps(data, default=str, sort_keys=True).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()[:16]

    @property
    def currency(self) -> str:
        """What the campaign pays in: MTurk and the built-in marketplace pay dollars, Prolific the
        `prolific.currency` of the spec."""
        return self.prolific.currency if self.prolific is not None else "USD"

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)


def currency_of(spec: dict[str, Any]) -> str:
    """A stored campaign's currency, from its spec as the store keeps it (`CampaignRow.spec_json`)."""
    prolific = spec.get("prolific")
    return str(prolific.get("currency") or "GBP") if isinstance(prolific, dict) else "USD"


def _file_digest(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


# The ranking and nugget stages' own fields with their defaults, as every stage carried them before stages
# got one type per kind: fixed here, because stored campaigns' fingerprints were computed with them.
_LEGACY_STAGE_FIELDS: dict[str, Any] = {
    "source": None, "shortlist": 100, "keep": 50, "batch_pairs": 100, "pair_budget": 0.1, "target_confidence": None,
    "window": 7, "min_nugget_tokens": 3, "require_verb": False, "min_workers": 3}


@dataclass(frozen=True)
class Spec:
    path: str
    campaigns: tuple[Campaign, ...]
    warnings: tuple[str, ...] = ()  # `file:line: field: message`, as problems are, for what runs but deserves a word

    def campaign(self, name: str) -> Campaign:
        for c in self.campaigns:
            if c.name == name:
                return c
        raise KeyError(f"no campaign named {name!r} in {self.path}; it has: {', '.join(c.name for c in self.campaigns)}")


T = TypeVar("T")


def _default(cls: type, name: str) -> Any:
    for f in fields(cls):
        if f.name == name:
            if f.default is not MISSING:
                return f.default
            if f.default_factory is not MISSING:
                return f.default_factory()
    raise KeyError(name)


def _spec_fields(cls: type) -> dict[str, tuple[str, Conv]]:
    """field name -> (YAML key, converter), for every field of `cls` read from YAML. A subclass that only
    changes a default keeps its base's converter."""
    out: dict[str, tuple[str, Conv]] = {}
    for klass in reversed(cls.__mro__):
        for f in getattr(klass, "__dataclass_fields__", {}).values():
            conv = f.metadata.get("conv")
            if conv is not None:
                out[f.name] = (f.metadata.get("key") or f.name, conv)
    return out


def _has_default(cls: type, name: str) -> bool:
    f = cls.__dataclass_fields__[name]  # type: ignore[attr-defined]
    return f.default is not MISSING or f.default_factory is not MISSING


# --------------------------------------------------------------------------------- YAML with line numbers


class _TooBig(Exception):
    pass


class _Doc:
    """Plain Python values plus the line of every mapping key and value, by path."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lines: dict[tuple[Any, ...], int] = {}
        self.values = 0
        self.duplicates: list[tuple[Any, ...]] = []  # keys given twice in one mapping (YAML keeps the last)

    def build(self, node: yaml.Node, at: tuple[Any, ...] = ()) -> Any:
        self.values += 1
        if self.values > MAX_VALUES or len(at) > MAX_DEPTH:
            raise _TooBig(node.start_mark.line + 1)
        self.lines.setdefault(at, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k.value)
                if key in out:
                    self.duplicates.append(at + (key,))
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


MAX_WHOLE = 2**31 - 1  # the largest whole number a spec field takes (a 32-bit integer, as MTurk's)


class _Checker:
    def __init__(self, doc: _Doc, base_dir: Path) -> None:
        self.doc = doc
        self.base_dir = base_dir
        self.problems: list[str] = []
        self.warnings: list[str] = []

    def warn(self, at: tuple[Any, ...], message: str) -> None:
        """Not a problem (the spec runs), but what the user should know before it does."""
        self.warnings.append(f"{self.doc.path}:{self.doc.line(at)}: {_field_name(at)}: {message}")

    def err(self, at: tuple[Any, ...], message: str) -> None:
        self.problems.append(f"{self.doc.path}:{self.doc.line(at)}: {_field_name(at)}: {message}")

    def mapping(self, value: Any, at: tuple[Any, ...], allowed: set[str], required: frozenset[str] | set[str] = frozenset(),
                elsewhere: Mapping[str, str] | None = None) -> dict:
        """`value` as a dict, every unknown key and missing required key reported; `elsewhere` names, for a
        key this mapping does not take, where it would belong (e.g. "ranking stages")."""
        if value is None:
            value = {}
        if not isinstance(value, dict):
            self.err(at, f"must be a mapping, got {type(value).__name__}")
            return {}
        for k in value:
            if k not in allowed:
                if elsewhere and k in elsewhere:
                    self.err(at + (k,), f"unknown key here (only {elsewhere[k]} take it)")
                    continue
                hint = _closest(k, allowed)
                self.err(at + (k,), "unknown key" + (f" (did you mean '{hint}'?)" if hint else f"; allowed: {', '.join(sorted(allowed))}"))
        for k in sorted(required):
            if k not in value:
                self.err(at, f"missing required key '{k}'")
        return value

    def read(self, cls: type, value: Any, at: At, *, extra: frozenset[str] | set[str] = frozenset(),
             required: frozenset[str] | set[str] = frozenset(),
             elsewhere: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The fields of `cls` given in mapping `value`, converted; keys in `extra` are allowed and left to
        the caller. Returns only what the YAML gave, so every default stays on the dataclass."""
        spec_fields = _spec_fields(cls)
        m = self.mapping(value, at, {k for k, _ in spec_fields.values()} | set(extra), set(required), elsewhere)
        out: dict[str, Any] = {}
        for name, (key, conv) in spec_fields.items():
            if key in m and m[key] is not None:
                out[name] = conv(self, m[key], at + (key,))
        return out

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
            elif hi is None and abs(v) > MAX_WHOLE:  # no field needs more; MTurk's and SQL's integers stop near here
                self.err(at, f"must be at most {MAX_WHOLE}, got {v}")
            return v

        return conv

    def number(self, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> Callable[[Any, tuple[Any, ...]], float]:
        def conv(v: Any, at: tuple[Any, ...]) -> float:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                self.err(at, f"must be a number, got {v!r}")
                return lo or 0.0
            if not math.isfinite(v):  # YAML's .nan and .inf: every comparison below would let NaN through
                self.err(at, f"must be a finite number, got {v}")
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
                hint = _closest(v, set(options)) if isinstance(v, str) else None
                self.err(at, f"must be one of {', '.join(options)}, got {v!r}" + (f" (did you mean '{hint}'?)" if hint else ""))
                return options[0]
            return v

        return conv


def _closest(word: str, options: set[str]) -> str | None:
    match = difflib.get_close_matches(word, sorted(options), n=1, cutoff=0.7)
    return match[0] if match else None


# ----------------------------------------------------------------------------------------------- loading

CAMPAIGN_EXTRA_KEYS = {"input", "task", "stages", "crowd", "quality", "schedule", "prolific", "task_site"}


def load_spec(path: str | Path) -> Spec:
    """Read and validate a spec file, its input files included; raise `SpecError` listing every problem.

    Input files are read here too (not only when a campaign first runs), so that `validate` sees an
    empty or damaged TSV and `run` refuses it before it creates any state.
    """
    p = Path(path)
    shown = str(path)
    if not p.is_file():
        raise SpecError([f"{shown}:0: (file): no such file (give one with --config, or create campaigns.yaml)"])
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SpecError([f"{shown}:{line}: (file): not UTF-8 text (byte 0x{raw[exc.start]:02x}); save the file as UTF-8"]) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 0
        raise SpecError([f"{shown}:{line}: (yaml): {getattr(exc, 'problem', None) or exc}"]) from None
    doc = _Doc(shown)
    try:
        data = doc.build(node) if node is not None else {}
    except _TooBig as exc:
        raise SpecError([f"{shown}:{exc.args[0]}: (yaml): the document expands to more than {MAX_VALUES} values or "
                         f"{MAX_DEPTH} levels (through aliases?); a spec is far smaller"]) from None
    except yaml.YAMLError as exc:  # e.g. an unknown tag (`!foo`) on a value
        mark = getattr(exc, "problem_mark", None)
        raise SpecError([f"{shown}:{mark.line + 1 if mark else 0}: (yaml): {getattr(exc, 'problem', None) or exc}"]) from None
    return _validate(data, doc, base_dir=p.parent)


def _validate(data: Any, doc: _Doc, base_dir: Path) -> Spec:
    ck = _Checker(doc, base_dir)
    for at in doc.duplicates:
        ck.err(at, "duplicate key (given twice in the same mapping; only the last would count)")
    for at, ch in _control_characters(data, ()):
        ck.err(at, f"holds the control character U+{ord(ch):04X} (a YAML escape?), which no HIT page can carry")
    top = ck.mapping(data, (), {"campaigns"}, {"campaigns"})
    raw_campaigns = top.get("campaigns") or []
    if not isinstance(raw_campaigns, list) or not raw_campaigns:
        ck.err(("campaigns",), "must be a non-empty list of campaigns")
        raw_campaigns = []
    campaigns: list[Campaign] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_campaigns):
        name, c = _campaign(ck, raw, ("campaigns", i), base_dir)
        if not name:
            continue
        if name in seen:
            ck.err(("campaigns", i, "name"), f"duplicate campaign name {name!r}")
        seen.add(name)
        if c is not None:
            campaigns.append(c)
    if ck.problems:
        raise SpecError(ck.problems)
    return Spec(path=doc.path, campaigns=tuple(campaigns), warnings=tuple(ck.warnings))


def _control_characters(value: Any, at: At) -> Iterator[tuple[At, str]]:
    """(where, the character) for every string of the document holding one that XML 1.0, and so a HIT
    page, cannot carry: a double-quoted YAML string may spell one (`"\\x00"`), and a trap text holding it
    made its HITs fail to post."""
    if isinstance(value, str):
        bad = NOT_IN_A_PAGE.search(value)
        if bad is not None:
            yield at, bad.group()
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _control_characters(v, at + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _control_characters(v, at + (i,))


def _input(ck: _Checker, m: dict, at: At, base_dir: Path) -> tuple[str, str]:
    inp = ck.mapping(m.get("input"), at + ("input",), set(INPUT_KINDS))
    input_kind, input_path = INPUT_KINDS[0], ""
    kinds = [k for k in INPUT_KINDS if k in inp]
    if len(kinds) != 1 and "input" in m:
        ck.err(at + ("input",), "give exactly one of 'propositions' (a TSV of id and text) or 'documents'")
    elif kinds:
        input_kind = kinds[0]
        here = at + ("input", input_kind)
        given = ck.string(inp[input_kind], here) if inp[input_kind] is not None else ""
        if given:
            path = base_dir / given
            if not (path.is_file() or (input_kind == "documents" and path.is_dir())):
                where = "" if Path(given).is_absolute() else f" (relative to {base_dir or '.'})"
                ck.err(here, _not_a_file(path, given) + where)
            else:
                try:
                    load_items(input_kind, path)
                except InputError as exc:
                    ck.err(here, str(exc))
            input_path = str(path)
    return input_kind, input_path


def _campaign(ck: _Checker, raw: Any, at: At, base_dir: Path) -> tuple[str, Campaign | None]:
    before = len(ck.problems)
    got = ck.read(Campaign, raw, at, extra=CAMPAIGN_EXTRA_KEYS, required={"name", "topic", "input", "budget"})
    m = raw if isinstance(raw, dict) else {}
    name = got.get("name", "")
    if name and not NAME_PATTERN.match(name):
        ck.err(at + ("name",), "must be lower-case letters, digits, '-' or '_' (it names a folder under state/)")

    input_kind, input_path = _input(ck, m, at, base_dir)
    stages = _stages(ck, m, at, input_kind)

    budget = got.get("budget", Decimal("0"))
    marketplace = got.get("marketplace", _default(Campaign, "marketplace"))
    prolific, public_url = _prolific_and_site(ck, m, at, marketplace)
    if prolific is not None and budget > 0:
        one_place = place_cost(prolific)
        if budget < one_place:
            ck.err(at + ("budget",), f"{budget} is below the cost of one Prolific place ({one_place} {prolific.currency} "
                   "with fee and VAT)")
        elif prolific.pilot is not None and prolific.pilot * one_place > budget:
            ck.err(at + ("prolific", "pilot"), f"{prolific.pilot} places are more than the budget pays for "
                   f"({int(budget // one_place)} at {one_place} {prolific.currency} a place)")
    elif stages and budget > 0:
        first = stages[0]
        one_hit = hit_cost(first.reward, first.assignments)
        if budget < one_hit:
            ck.err(at + ("budget",), f"${budget} is below the cost of one HIT (${one_hit} = {first.assignments} x ${first.reward} + fees)")
    elif "budget" in m and budget <= 0 and not any(f": {_field_name(at + ('budget',))}: " in p for p in ck.problems):
        ck.err(at + ("budget",), "must be more than 0")  # unless it is no amount at all (said already)

    crowd_given = ck.read(Crowd, m.get("crowd"), at + ("crowd",))
    if "crowd" not in m or m["crowd"] is None:  # no crowd section: the campaign's default crowd (none)
        crowd_given.setdefault("kind", _default(Campaign, "crowd").kind)
    if "adversaries" not in crowd_given and crowd_given.get("kind", _default(Crowd, "kind")) == "simulated":
        crowd_given.update(_adversaries_from_env(ck, at + ("crowd",)))
    crowd = Crowd(**crowd_given)
    if crowd.kind == "simulated" and marketplace not in SIMULATED_OK and not (marketplace == "prolific" and prolific_is_emulated()):
        ck.err(at + ("crowd", "kind"), "a simulated crowd can only work the built-in marketplace (marketplace: local) "
               "or the Prolific emulator (marketplace: prolific-local, or marketplace: prolific with PROLIFIC_BASE_URL "
               "on this machine: `campaign prolific serve`, its participants played by `campaign crowd run`)")
    if crowd.kind == "simulated" and crowd.truth is None:
        raw_crowd = m.get("crowd")
        if isinstance(raw_crowd, dict) and "truth" in raw_crowd:
            ck.warn(at + ("crowd", "truth"), "none: the simulated workers know nothing of the items, so every answer "
                    "is noise and the scores mean nothing (fine for trying the machinery, not for results)")
        else:
            ck.err(at + ("crowd",), "a simulated crowd answers from each item's hidden truth: add `truth: FILE` "
                   "(tab-separated item and truth in 0..1, one row per item) or `truth: none` to run it on noise")
    quality = QualityPolicy(**ck.read(QualityPolicy, m.get("quality"), at + ("quality",)))
    schedule = _Schedule(**ck.read(_Schedule, m.get("schedule"), at + ("schedule",)))
    if len(ck.problems) > before or not name:
        return name, None
    return name, Campaign(**got, input_kind=input_kind, input_path=input_path, stages=tuple(stages), crowd=crowd,
                          quality=quality, poll_interval=schedule.poll_interval, max_rps=schedule.max_rps,
                          prolific=prolific, public_url=public_url)


def prolific_is_emulated() -> bool:
    """Whether `marketplace: prolific` reaches an emulator on this machine (`PROLIFIC_BASE_URL` on a
    loopback address: `campaign prolific serve`), where a simulated crowd may take the places. On the real
    Prolific it may not: real people would share studies with simulated ones and be compared with them,
    and the simulation's places would be paid with real money. The daemon never plays that crowd itself
    (`campaign crowd run --prolific-url` does), so the rule only decides whether the spec is accepted."""
    return loopback_url(os.environ.get("PROLIFIC_BASE_URL", ""))


def loopback_url(url: str | None) -> bool:
    """Whether `url` names this machine (a loopback address or `localhost`)."""
    import ipaddress

    host = urllib.parse.urlsplit(url or "").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _adversaries_from_env(ck: _Checker, at: At) -> dict[str, Adversaries]:
    """`CAMPAIGN_ADVERSARIES=SHARE` (see ADVERSARIES_ENV) as this crowd's adversaries; empty when unset."""
    raw = os.environ.get(ADVERSARIES_ENV, "").strip()
    if not raw:
        return {}
    try:
        share = float(raw)
    except ValueError:
        share = -1.0
    if not 0.0 <= share <= 1.0:
        ck.err(at, f"{ADVERSARIES_ENV}={raw!r} in the environment must be a share between 0 and 1")
        return {}
    return {"adversaries": Adversaries(share=share)}


def with_adversaries(spec: Spec, share: float, behaviours: Mapping[str, float] | None = None) -> Spec:
    """`spec` with every simulated crowd given `share` adversaries (`behaviours`: weights; default every
    behaviour alike). For tests and benchmarks that build their spec in code."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"adversary share must be between 0 and 1, got {share}")
    unknown = set(behaviours or {}) - set(ADVERSARY_BEHAVIOURS)
    if unknown:
        raise ValueError(f"unknown adversary behaviours {sorted(unknown)}; known: {', '.join(ADVERSARY_BEHAVIOURS)}")
    adv = Adversaries(share=share, behaviours=tuple(sorted((behaviours or dict(_default(Adversaries, "behaviours"))).items())))
    campaigns = tuple(replace(c, crowd=replace(c.crowd, adversaries=adv)) if c.crowd.kind == "simulated" else c
                      for c in spec.campaigns)
    return replace(spec, campaigns=campaigns)


PROLIFIC_KEYS = {"workspace", "project", "reward", "reward_per_hour", "currency", "bundle", "estimated_minutes",
                 "maximum_minutes", "devices", "filters", "fee_rate", "vat_rate", "completion_url", "too_quick", "pilot"}
PROLIFIC_FILTER_KEYS = {"approval_rate", "countries", "languages", "block_list"}
PROLIFIC_DEVICES = ("desktop", "mobile", "tablet")
PROLIFIC_CURRENCIES = ("GBP", "USD")


def _url(ck: _Checker, v: Any, at: At) -> str:
    text = ck.string(v, at)
    if text and not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", text):
        ck.err(at, f"must be an http(s) address like https://tasks.example.org, got {text!r}")
    return text


def _rate(ck: _Checker, v: Any, at: At) -> Decimal:
    try:
        rate = Decimal(repr(v) if isinstance(v, float) else str(v))
    except ArithmeticError:
        rate = Decimal("-1")
    if isinstance(v, bool) or not rate.is_finite() or not Decimal(0) <= rate <= Decimal(1):
        ck.err(at, f"must be a fraction between 0 and 1 written as a string like \"0.333\", got {v!r}")
        return Decimal(0)
    return rate


def _words(ck: _Checker, v: Any, at: At, pattern: str = r"\S.*", what: str = "non-empty strings") -> tuple[str, ...]:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) and re.fullmatch(pattern, x) for x in v):
        ck.err(at, f"must be a list of {what}")
        return ()
    return tuple(v)


def _prolific_and_site(ck: _Checker, m: dict, at: At, marketplace: str) -> tuple[ProlificConfig | None, str | None]:
    """The `prolific:` block as a `ProlificConfig` (public_url left empty: the run fills it in) and
    `task_site.public_url`, each problem at its own line. Only Prolific marketplaces take them."""
    here = at + ("prolific",)
    site = ck.mapping(m.get("task_site"), at + ("task_site",), {"public_url"})
    public_url = _url(ck, site["public_url"], at + ("task_site", "public_url")) if site.get("public_url") is not None else None
    if marketplace not in PROLIFIC_MARKETPLACES:
        for key in ("prolific", "task_site"):
            if key in m:
                ck.err(at + (key,), f"only Prolific campaigns take '{key}' (marketplace: prolific or prolific-local)")
        return None, None
    if m.get("prolific") is None:
        ck.err(here, f"marketplace {marketplace} needs a 'prolific:' block (reward, bundle, estimated_minutes, ...)")
        return None, public_url
    if marketplace == "prolific":
        if public_url is None:
            ck.err(at + ("task_site",), "marketplace prolific needs task_site.public_url: the https address where "
                   "participants reach this machine's task site (a reverse proxy in front of it)")
        elif re.search(r":0(/|$)", public_url):
            ck.err(at + ("task_site", "public_url"), "port 0 stands for the built-in marketplace's own address, "
                   "which real participants cannot reach; give the public address")
    p = ck.mapping(m["prolific"], here, PROLIFIC_KEYS)
    before = len(ck.problems)
    kw: dict[str, Any] = {"public_url": ""}
    for key in ("workspace", "project", "completion_url"):
        if p.get(key) is not None:
            kw[key] = _url(ck, p[key], here + (key,)) if key == "completion_url" else ck.string(p[key], here + (key,))
    for key in ("reward", "reward_per_hour"):
        if p.get(key) is not None:
            kw[key] = ck.money(p[key], here + (key,))
    if ("reward" in kw) == ("reward_per_hour" in kw):
        ck.err(here, "give exactly one of 'reward' (per submission) and 'reward_per_hour'")
    if p.get("currency") is not None:
        kw["currency"] = ck.choice(PROLIFIC_CURRENCIES)(p["currency"], here + ("currency",))
    for key, lo, hi in (("bundle", 1, 100), ("estimated_minutes", 1, 1440), ("maximum_minutes", 1, 10080)):
        if p.get(key) is not None:
            kw[key] = ck.integer(lo, hi)(p[key], here + (key,))
    if "maximum_minutes" in kw and kw["maximum_minutes"] < kw.get("estimated_minutes", 10):
        ck.err(here + ("maximum_minutes",), "must be at least estimated_minutes")
    if p.get("devices") is not None:
        devices = _words(ck, p["devices"], here + ("devices",), "|".join(PROLIFIC_DEVICES), ", ".join(PROLIFIC_DEVICES))
        if devices:
            kw["devices"] = devices
    for key in ("fee_rate", "vat_rate", "too_quick"):
        if p.get(key) is not None:
            kw[key] = _rate(ck, p[key], here + (key,))
    if p.get("pilot") is not None:
        kw["pilot"] = ck.integer(1)(p["pilot"], here + ("pilot",))
    if "filters" in p:
        fat = here + ("filters",)
        f = ck.mapping(p["filters"], fat, PROLIFIC_FILTER_KEYS)
        kw["approval_rate"] = ck.integer(0, 100)(f["approval_rate"], fat + ("approval_rate",)) if f.get("approval_rate") is not None else None
        if f.get("countries") is not None:
            kw["countries"] = _words(ck, f["countries"], fat + ("countries",), r"[A-Z]{2}", "ISO 3166 country codes like [GB, US]")
        if f.get("languages") is not None:
            kw["languages"] = _words(ck, f["languages"], fat + ("languages",))
        if f.get("block_list") is not None:
            kw["block_list"] = ck.string(f["block_list"], fat + ("block_list",))
    if len(ck.problems) > before:
        return None, public_url
    cfg = ProlificConfig(**kw)
    try:
        reward_per_submission(cfg)
    except ValueError as exc:
        ck.err(here + ("reward" if "reward" in kw else "reward_per_hour",), str(exc))
        return None, public_url
    return cfg, public_url


def _stages(ck: _Checker, m: dict, at: At, input_kind: str) -> list[Stage]:
    if "task" in m and "stages" in m:
        ck.err(at + ("stages",), "give either 'task' (one stage) or 'stages', not both")
    raw_stages: list[tuple[Any, At]] = []
    if "stages" in m:
        if not isinstance(m["stages"], list) or not m["stages"]:
            ck.err(at + ("stages",), "must be a non-empty list of stages")
        else:
            raw_stages = [(s, at + ("stages", j)) for j, s in enumerate(m["stages"])]
    elif "task" in m:
        raw_stages = [(m["task"], at + ("task",))]
    else:
        ck.err(at, "missing required key 'task' (or 'stages')")
    read = [(_stage(ck, r, a, j), a) for j, (r, a) in enumerate(raw_stages)]
    stages = [(s, a) for s, a in read if s is not None]
    names = [s.name for s, _ in stages]
    for j, (s, sat) in enumerate(stages):
        if names.count(s.name) > 1:
            ck.err(sat + ("name",), f"duplicate stage name {s.name!r}")
        if j == 0 and not s.may_be_first:
            ck.err(sat + ("kind",), f"a {s.kind} stage cannot be the first stage")
        if s.needs_source and len(stages) > 1 and j > 0:
            source = getattr(s, "source", None)
            if source is None or source not in names[:j]:
                ck.err(sat + ("source",), f"a {s.kind} stage after others must name an earlier stage as 'source'")
        if s.needs_input is not None and input_kind != s.needs_input and (j == 0 or not s.input_checked_first_only):
            ck.err(sat + ("kind",), f"a {s.kind} stage needs 'input: {s.needs_input}'")
    return [s for s, _ in stages]


def _elsewhere(cls: type[Stage] | None) -> dict[str, str]:
    """For keys other kinds take and `cls` does not: which kinds' stages take them."""
    own = {k for k, _ in _spec_fields(cls).values()} if cls else set()
    out: dict[str, list[str]] = {}
    for kind, other in tasks.stage_types().items():
        for k, _ in _spec_fields(other).values():
            if k not in own and kind not in out.setdefault(k, []):
                out[k].append(kind)
    return {k: " and ".join(v) + " stages" for k, v in out.items()}


def _stage(ck: _Checker, raw: Any, at: At, index: int) -> Stage | None:
    kind = raw.get("kind") if isinstance(raw, dict) else None
    cls = tasks.stage_types().get(kind) if isinstance(kind, str) else None
    before = len(ck.problems)
    if cls is None or not isinstance(kind, str):
        # unknown kind: report it, and check the keys against every kind's so a typo elsewhere still shows
        ck.mapping(raw, at, {k for t in tasks.stage_types().values() for k, _ in _spec_fields(t).values()}
                   | {"kind", "qualifications", "traps"}, {"kind"})
        if isinstance(raw, dict) and "kind" in raw and raw["kind"] is not None:
            ck.choice(tasks.names())(raw["kind"], at + ("kind",))
        return None
    got = ck.read(cls, raw, at, extra={"kind", "qualifications", "traps"}, required={"kind"}, elsewhere=_elsewhere(cls))
    quals = ck.read(Qualifications, raw.get("qualifications"), at + ("qualifications",))
    quals.setdefault("approval_rate", cls.default_approval_rate)
    traps = ck.read(Traps, raw.get("traps"), at + ("traps",))
    got.setdefault("name", kind if index == 0 else f"{kind}{index}")
    missing = [f.name for f in fields(cls) if f.name not in got and f.name != "kind" and not _has_default(cls, f.name)]
    for name in missing:
        ck.err(at, f"missing required key '{name}' (a {kind} stage has no default for it)")
    if missing:
        return None
    stage = cls(**got, kind=kind, qualifications=Qualifications(**quals), traps=Traps(**traps))
    for name, message in stage.problems():
        ck.err(at + (name,), message)
    for name, message in stage.warnings(first=index == 0):
        ck.warn(at + (name,), message)
    if stage.template and len(ck.problems) == before:
        problem = _template_renders(stage)
        if problem:
            ck.err(at + ("template",), problem)
    return None if len(ck.problems) > before else stage


def _template_renders(stage: Stage) -> str | None:
    """Why the stage's own template fails to render with its kind's values (an unknown variable, a
    filter that raises), tried on example sentences; None when it renders."""
    try:
        kind = tasks.get(stage.kind)
    except KeyError:
        return None
    examples = [ShownItem(key=f"example-{i}", text=f"Example sentence number {i + 1} for the check.")
                for i in range(max(2, stage.items_per_hit))]
    try:
        kind.page(stage, examples, "An example topic")
    except TemplateError as exc:
        return str(exc)
    return None
