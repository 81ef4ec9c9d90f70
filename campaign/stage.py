"""What every stage of a spec is, and how its fields are read from YAML.

`Stage` carries the fields all task kinds share; each kind's own stage type (a subclass, defined with its
kind in `campaign.tasks`) adds its fields and rules. Every field is declared once, on its dataclass, with
its default and the converter that reads it from YAML (`opt(...)`); the spec loader (`campaign.spec`)
walks the dataclass fields, so the allowed keys, the defaults and the checks cannot drift apart. Below
the task kinds: it knows none of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from campaign.spec import _Checker

QUAL_COMPARATORS = ("Exists", "DoesNotExist", "GreaterThanOrEqualTo", "GreaterThan", "LessThan", "LessThanOrEqualTo",
                    "EqualTo", "NotEqualTo")

# MTurk's limits (reference §2, legacy limits) so a spec is refused here rather than by the marketplace.
LIFETIME_RANGE = (30, 31_536_000)
DURATION_RANGE = (30, 31_536_000)
AUTO_APPROVAL_RANGE = (0, 2_592_000)
MIN_REWARD = Decimal("0.01")  # MTurk refuses a smaller reward; a $0.00 HIT would book fee-only charges
MAX_INSTRUCTIONS = 20_000  # characters of a stage's own Markdown instructions; a page is not the place for a manual

At = tuple[Any, ...]
Conv = Callable[["_Checker", Any, At], Any]


def opt(default: Any = MISSING, conv: Conv | None = None, *, key: str | None = None,
        factory: Callable[[], Any] | None = None) -> Any:
    """A spec field: its one default and the converter that reads it from YAML key `key` (default: its name)."""
    md = {"conv": conv, "key": key}
    if factory is not None:
        return field(default_factory=factory, metadata=md)
    if default is MISSING:
        return field(metadata=md)
    return field(default=default, metadata=md)


# converters: each checks one YAML value and returns the typed value (or a stand-in after reporting)
def _string(ck: _Checker, v: Any, at: At) -> str:
    return ck.string(v, at)


def _integer(lo: int | None = None, hi: int | None = None) -> Conv:
    return lambda ck, v, at: ck.integer(lo, hi)(v, at)


def _number(lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> Conv:
    return lambda ck, v, at: ck.number(lo, hi, lo_open)(v, at)


def _boolean(ck: _Checker, v: Any, at: At) -> bool:
    return ck.boolean(v, at)


def _money(ck: _Checker, v: Any, at: At) -> Decimal:
    return ck.money(v, at)


def _reward(ck: _Checker, v: Any, at: At) -> Decimal:
    before = len(ck.problems)
    amount = ck.money(v, at)
    if len(ck.problems) == before and amount < MIN_REWARD:
        ck.err(at, f"must be at least ${MIN_REWARD} (MTurk's minimum reward), got ${amount}")
    return amount


def _money_text(ck: _Checker, v: Any, at: At) -> str:
    return str(ck.money(v, at))


def _duration(lo: int, hi: int) -> Conv:
    return lambda ck, v, at: ck.duration(lo, hi)(v, at)


def _choice(options: tuple[str, ...]) -> Conv:
    return lambda ck, v, at: ck.choice(options)(v, at)


def _locales(ck: _Checker, v: Any, at: At) -> tuple[str, ...]:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) and re.fullmatch(r"[A-Z]{2}(-[A-Z0-9]{1,3})?", x) for x in v):
        ck.err(at, "must be a list of ISO 3166 country codes like [US, GB] (optionally US-NY)")
        return ()
    return tuple(v)


def _custom_qualifications(ck: _Checker, v: Any, at: At) -> tuple[tuple[str, str, int], ...]:
    if not isinstance(v, list):
        ck.err(at, "must be a list of {name, comparator, value}")
        return ()
    out = []
    for j, c in enumerate(v):
        got = ck.read(_CustomQualification, c, at + (j,), required={"name"})
        out.append((got.get("name", ""), got.get("comparator", "Exists"), got.get("value", 1)))
    return tuple(out)


def _trap_texts(ck: _Checker, v: Any, at: At) -> tuple[str, ...]:
    if not isinstance(v, list) or not v or not all(isinstance(t, str) and t.strip() for t in v):
        ck.err(at, "must be a non-empty list of trap sentences")
        return ()
    return tuple(v)



def _instructions(ck: _Checker, v: Any, at: At) -> str | None:
    text = ck.string(v, at)
    if len(text) > MAX_INSTRUCTIONS:
        ck.err(at, f"must be at most {MAX_INSTRUCTIONS} characters of Markdown, got {len(text)}")
    return text or None


def _template_file(ck: _Checker, v: Any, at: At) -> str | None:
    """The stage's own page template: the file must exist, be UTF-8 and parse as a Jinja template (an
    error names its line); whether it renders with the kind's values is checked once the stage is read."""
    import jinja2

    name = ck.string(v, at)
    if not name:
        return None
    path = ck.base_dir / name
    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        ck.err(at, f"file not found: {name}")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        ck.err(at, f"{name}: cannot read it as UTF-8 text: {exc}")
        return None
    from campaign.untrusted import NOT_IN_A_PAGE

    bad = NOT_IN_A_PAGE.search(source)
    if bad is not None:  # the page would be refused by the marketplace at every post
        ck.err(at, f"{name}:{source.count(chr(10), 0, bad.start()) + 1}: holds the control character "
                   f"U+{ord(bad.group()):04X}, which no HIT page can carry")
        return None
    try:
        jinja2.Environment(autoescape=True).parse(source)
    except jinja2.TemplateSyntaxError as exc:
        ck.err(at, f"{name}:{exc.lineno}: {exc.message}")
        return None
    return str(path)



@dataclass(frozen=True)
class Qualifications:
    locales: tuple[str, ...] = opt(("US",), _locales, key="locale")
    approval_rate: int | None = opt(None, _integer(0, 100))  # the loader's default comes from the stage type
    approved_hits: int | None = opt(None, _integer(0))
    masters: bool = opt(False, _boolean)
    # (qualification type name, comparator, value)
    custom: tuple[tuple[str, str, int], ...] = opt((), _custom_qualifications)


@dataclass(frozen=True)
class _CustomQualification:
    name: str = opt("", _string)
    comparator: str = opt("Exists", _choice(QUAL_COMPARATORS))
    value: int = opt(1, _integer(0))


@dataclass(frozen=True)
class Traps:
    share: float = opt(0.0, _number(0.0, 1.0))  # share of HITs that carry one trap item
    texts: tuple[str, ...] = opt(("This sentence is not important.",), _trap_texts)
    max_rating: int = opt(2, _integer(1, 5))  # a Likert trap passes when rated at most this
    tolerance: int = opt(1, _integer(0, 10))  # a ranking trap passes when placed within this many positions of last


@dataclass(frozen=True)
class Repeat:
    """`repeat: {share: 0.1}`: after the stage's first pass, a seeded random share of its HITs is posted
    again to workers who did not do them; the per-item means of both passes give the stage's
    test-retest correlation (seed 000 §4). The repeat's answers are paid and reviewed like any other
    work but never enter the stage's scores."""

    share: float = opt(0.0, _number(0.0, 1.0))


def _repeat(ck: _Checker, v: Any, at: At) -> Repeat:
    return Repeat(**ck.read(Repeat, v, at))



@dataclass(frozen=True, kw_only=True)
class Stage:
    """What every stage has. A kind's own type adds its fields, its defaults and its rules (class attributes)."""

    # the campaign input this kind reads ("propositions" | "documents"; None: any)
    needs_input: ClassVar[str | None] = None
    # whether `needs_input` is checked only when the stage is the first (later stages may read an earlier one)
    input_checked_first_only: ClassVar[bool] = True
    may_be_first: ClassVar[bool] = True
    # after other stages it must name an earlier stage as `source`
    needs_source: ClassVar[bool] = False
    min_items_per_hit: ClassVar[int] = 1
    default_approval_rate: ClassVar[int] = 95  # seed 000: >=95%

    name: str = opt(conv=_string)  # default: the kind (first stage) or kind + index
    kind: str = opt()
    items_per_hit: int = opt(conv=_integer(1, 50))
    assignments: int = opt(conv=_integer(1, 100))
    reward: Decimal = opt(conv=_reward)
    lifetime: int = opt(3 * 86400, _duration(*LIFETIME_RANGE))
    duration: int = opt(1800, _duration(*DURATION_RANGE))
    auto_approval_delay: int = opt(3 * 86400, _duration(*AUTO_APPROVAL_RANGE))
    title: str = opt(conv=_string)
    description: str = opt(conv=_string)
    keywords: str = opt("importance, summary, rating", _string)
    # Markdown shown on the HIT page in place of the kind's built-in instructions (campaign.tasks.instructions)
    instructions: str | None = opt(None, _instructions)
    # the stage's own page: a Jinja template file (relative to the spec), autoescaped like the built-in ones
    template: str | None = opt(None, _template_file)
    qualifications: Qualifications = opt(factory=Qualifications)  # read by the loader (its default depends on the kind)
    traps: Traps = opt(factory=Traps)  # read by the loader
    repeat: Repeat = opt(conv=_repeat, factory=Repeat)

    def problems(self) -> list[tuple[str, str]]:
        """(field, message) for every rule across this stage's own fields; a kind overrides it to add its own."""
        if self.items_per_hit < self.min_items_per_hit:
            return [("items_per_hit", f"a {self.kind} HIT needs at least {self.min_items_per_hit} items")]
        return []

    def warnings(self, first: bool) -> list[tuple[str, str]]:
        """(field, message) for settings that run but are unlikely to be what the researcher meant
        (`campaign validate` and `run` print them); `first`: the campaign's first stage. A kind extends it."""
        if self.assignments == 1:
            return [("assignments", "1 worker per HIT: no answer can be checked against another's (only traps and "
                                    "constant answers show spam), and each item's score rests on one answer")]
        return []

