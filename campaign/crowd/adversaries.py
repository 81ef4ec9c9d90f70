"""Adversarial simulated workers: a seeded share of a simulated crowd that misbehaves, on purpose or by
carelessness, through the same worker side real people use (the worker site's forms on both origins,
the Prolific door's API, the Prolific emulator's participant app). Nothing here writes a store.

Behaviours (`campaign.spec.ADVERSARY_BEHAVIOURS`; docs/hostile-crowd.md has the table):

- `control_chars`: the form's real fields, every value (and one extra field's name) laced with control
  characters (NUL, ESC, BEL, DEL, vertical tab, U+FFFE, a right-to-left override).
- `garbage`: the form's fields with junk values (out of range, NaN, 1e309, huge strings, markup, broken
  JSON, invalid UTF-8 and lone surrogates as raw bytes), repeated names with conflicting values and
  unknown fields; on the door, JSON of the wrong shape and types as well.
- `empty`: the form posted with every answer field blank, or with no answer field at all.
- `foreign`: answers another worker's assignment of the same HIT (an id leaked from elsewhere in the
  crowd, a held one if any) through their own session, and through the content origin, which knows
  assignments by id alone; on the door, another participant's latest assignment.
- `double_submit`: a real answer, then the same assignment posted again with another answer, through
  both origins (on the door, twice through its API).
- `hold`: accepts work and never answers nor returns it (the marketplace's deadline takes it back).
- `return_midway`: opens the task and returns it unanswered; on Prolific, does part of the bundle and
  returns the place.
- `no_work`: submits without ever opening the task; on Prolific, starts a place and completes it at
  once, with a completion code leaked from an earlier participant when the crowd has seen one, else
  with none.
- `fast`: submits the moment the page has loaded, random values in its fields, nothing read. (The
  simulated honest workers take no simulated time either, so answer times cannot tell them apart here;
  quality control sees a fast adversary by its answers.)

An adversary that the site refuses (a 4xx) gives up as a person would: it returns the assignment, or
on Prolific the place. Which workers misbehave, how, and every junk value come from the crowd's seed,
so a run is reproducible.
"""

from __future__ import annotations

import dataclasses
import html.parser
import http.client
import json
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from campaign.crowd.forms import Form
from campaign.crowd.models import SimWorker
from campaign.rng import rng_for, stable_seed
from campaign.spec import ADVERSARY_BEHAVIOURS, Adversaries

CONTROL = ("\x00", "\x1b", "\x07", "\x7f", "\x0b", "\x1b[2J", "\ufffe", "\u202e", "\x08", "\x1f")
JUNK_VALUES = ("99", "-1", "0", "6", "NaN", "inf", "1e309", "", " ", "<script>alert(1)</script>", "' OR 1=1 --",
               "[[[[[[[[", '{"a":', "null", "true", "\u0000", "A" * 100_000, "٣", "①", "３")
# raw bytes that are not valid UTF-8 (a lone surrogate, a stray continuation byte, an overlong encoding)
BAD_UTF8 = (b"\xed\xa0\x80", b"\xff\xfe", b"\x80", b"\xc0\xaf", b"4\xe2\x82")


@dataclass
class AdversaryStats:
    """Per behaviour: what it tried (`tried`), what the site took (`accepted`) and refused (`refused`)."""

    tried: dict[str, int] = field(default_factory=dict)
    accepted: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)  # refusals by the site's error code

    def note(self, behaviour: str, outcome: str, code: str = "") -> None:
        table = {"tried": self.tried, "accepted": self.accepted, "refused": self.refused}[outcome]
        table[behaviour] = table.get(behaviour, 0) + 1
        if code:
            self.codes[code] = self.codes.get(code, 0) + 1


def assign(workers: Sequence[SimWorker], adversaries: Adversaries, seed: int) -> dict[str, str]:
    """worker id -> behaviour for round(share x crowd) workers chosen by the seed; behaviours are allotted
    to the weights by largest remainder (so 9 adversaries over 9 equal weights are one of each), then
    shuffled with the seed. The same crowd, share and seed always give the same adversaries."""
    n = int(round(adversaries.share * len(workers)))
    weights = {b: w for b, w in adversaries.behaviours if w > 0 and b in ADVERSARY_BEHAVIOURS}
    if n <= 0 or not weights:
        return {}
    chosen = sorted(workers, key=lambda w: stable_seed(seed, "adversary", w.worker_id))[:n]
    total = sum(weights.values())
    quotas = {b: n * w / total for b, w in weights.items()}
    counts = {b: int(q) for b, q in quotas.items()}
    for b in sorted(quotas, key=lambda b: (counts[b] - quotas[b], b))[: n - sum(counts.values())]:
        counts[b] += 1
    kinds = [b for b in sorted(counts) for _ in range(counts[b])]
    rng_for(seed, "adversary-behaviours").shuffle(kinds)
    return {w.worker_id: kinds[i] for i, w in enumerate(chosen)}


def as_spammer(w: SimWorker) -> SimWorker:
    """The same worker answering at random (what a bot or a careless adversary's values look like)."""
    return dataclasses.replace(w, kind="random_spammer")


# ------------------------------------------------------------------------------------- junk in form fields


def control_fields(fields: Sequence[tuple[str, str]], rng: np.random.Generator) -> list[tuple[str, str]]:
    """Every value laced with a control character (before, after or instead), plus one extra field whose
    name carries one."""
    out = []
    for k, v in fields:
        c = CONTROL[int(rng.integers(len(CONTROL)))]
        where = int(rng.integers(3))
        out.append((k, v + c if where == 0 else c + v if where == 1 else c))
    out.append(("note" + CONTROL[int(rng.integers(len(CONTROL)))], "x\x00y"))
    return out


def garbage_body(assignment_id: str, fields: Sequence[tuple[str, str]], rng: np.random.Generator) -> bytes:
    """A urlencoded form body (bytes: it may carry invalid UTF-8) with the real field names given junk,
    repeated with conflicting values, and unknown fields added."""
    parts = [b"assignmentId=" + urllib.parse.quote_from_bytes(assignment_id.encode()).encode()]
    for k, v in fields:
        key = urllib.parse.quote_from_bytes(k.encode()).encode()
        pick = int(rng.integers(len(JUNK_VALUES) + len(BAD_UTF8)))
        raw = JUNK_VALUES[pick].encode() if pick < len(JUNK_VALUES) else BAD_UTF8[pick - len(JUNK_VALUES)]
        parts.append(key + b"=" + urllib.parse.quote_from_bytes(raw).encode())
        if rng.random() < 0.5:  # the same name again, another value
            parts.append(key + b"=" + urllib.parse.quote_from_bytes(v.encode() + b"\xff").encode())
    parts.append(b"%ED%A0%80=%ED%A0%80")  # a lone surrogate as name and value
    parts.append(b"unknown_field=" + urllib.parse.quote_from_bytes(b"\x00" * 3).encode())
    if rng.random() < 0.3:
        parts.append(b"%%%&&&==")  # not even percent-encoding
    return b"&".join(parts)


def garbage_json_fields(fields: Sequence[tuple[str, str]], rng: np.random.Generator) -> object:
    """What the door's JSON API gets as `fields` from a garbage adversary: the wrong shapes and types."""
    shapes: list[object] = [
        [[k, JUNK_VALUES[int(rng.integers(len(JUNK_VALUES)))]] for k, _ in fields],
        [[k, None] for k, _ in fields],
        [[k, {"nested": [1, 2, {"x": v}]}] for k, v in fields],
        [[k, float("inf")] for k, _ in fields],
        [[k, 4.5] for k, _ in fields],
        {k: v for k, v in fields},
        "fields",
        [[k] for k, _ in fields],
        [[k, v, "extra"] for k, v in fields],
    ]
    return shapes[int(rng.integers(len(shapes)))]


def empty_fields(fields: Sequence[tuple[str, str]], rng: np.random.Generator) -> list[tuple[str, str]]:
    """Every answer field blank, or none at all."""
    return [(k, "") for k, _ in fields] if rng.random() < 0.5 else []


def encode_form(assignment_id: str, fields: Sequence[tuple[str, str]]) -> bytes:
    """A browser's urlencoded body; text a browser cannot encode (lone surrogates) is sent as its raw
    UTF-8 bytes, as a hand-made request would."""
    pairs = [("assignmentId", assignment_id)] + [(k, v) for k, v in fields if k != "assignmentId"]
    return "&".join(urllib.parse.quote_plus(k.encode("utf-8", "surrogatepass")) + "=" +
                    urllib.parse.quote_plus(v.encode("utf-8", "surrogatepass")) for k, v in pairs).encode("ascii")


# ----------------------------------------------------------------------------------------------- raw HTTP


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    code: str  # the site's error code (X-Error-Code or the JSON error), "" when it took the request


def request(url: str, method: str = "GET", body: bytes | None = None, headers: Mapping[str, str] | None = None,
            timeout: float = 30.0) -> Reply:
    """One HTTP request on its own connection: an adversary's hand-made request, bytes as given."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)
    try:
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request(method, path, body=body, headers=dict(headers or {}))
        resp = conn.getresponse()
        data = resp.read()
        code = resp.getheader("X-Error-Code", "") or ""
        if resp.status >= 400 and not code:
            try:
                code = str(json.loads(data.decode("utf-8")).get("error", ""))
            except (ValueError, AttributeError):
                code = f"HTTP{resp.status}"
        return Reply(resp.status, data, code if resp.status >= 400 else "")
    finally:
        conn.close()


class _Frames(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.srcs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "iframe":
            self.srcs += [v for k, v in attrs if k == "src" and v]


def frame_srcs(page: str) -> list[str]:
    """The iframe addresses of a worker-site page (where a browser would load the HIT from)."""
    p = _Frames()
    p.feed(page)
    return p.srcs


def origin_of(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def answer_names(form: Form, fields: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The answer fields of a filled-in form: all but the assignmentId (the poster sets that). Hidden
    inputs stay: a page's script may keep the answer in one (a ranking's order)."""
    return [(k, v) for k, v in fields if k != "assignmentId"]
