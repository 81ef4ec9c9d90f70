"""The requester API's wire protocol: botocore's own MTurk model as the validator, MTurk's error shapes.

botocore checks only required members, types and `min` on the client side; the real service enforces
the rest (`max`, `pattern`, `enum`) and answers with a `ValidationException` whose member paths are
camelCase. Validating against the very model boto3 serializes from keeps the emulator and the client
in lock step: any request boto3 can build is understood here, and anything the real service would
refuse on shape grounds is refused here with the same text.
"""

from __future__ import annotations

import json
import math
import re
import time
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from campaign.untrusted import MAX_JSON_DEPTH, Refused, loads_json_object

TARGET_PREFIX = "MTurkRequesterServiceV20170117."
CONTENT_TYPE = "application/x-amz-json-1.1"
TURK_PREFIX = "AWS.MechanicalTurk."


@lru_cache(maxsize=1)
def service_model():
    """Loaded once: building the model takes tens of milliseconds. botocore is imported here, not with the
    module: `campaign validate` and `preview` need this module's limits, not botocore's session (0.12 s)."""
    import botocore.session  # type: ignore[import-untyped]

    return botocore.session.get_session().get_service_model("mturk")


@lru_cache(maxsize=1)
def operation_names() -> frozenset[str]:
    return frozenset(service_model().operation_names)


def warm_up() -> None:
    """Load the model and resolve every operation's input shape now (botocore does it lazily), so the
    first requests a long-running server answers do not pay tens of milliseconds for it."""
    model = service_model()
    for name in operation_names():
        model.operation_model(name).input_shape  # noqa: B018 - resolving is the point


# -- errors ---------------------------------------------------------------------------------------------
@dataclass
class ApiError(Exception):
    """An error answer: HTTP status plus the JSON body the real service would send."""

    status: int
    body: dict[str, Any]

    def __str__(self) -> str:  # pragma: no cover - debugging aid
        return f"{self.status} {self.body}"


class TurkError(Exception):
    """A `RequestError` with a TurkErrorCode; raised by the engine, rendered by `request_error`."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


def _stamp(message: str) -> str:
    # MTurk ends messages with the server's epoch milliseconds; wall time, because clients read it as such.
    return f"{message} ({int(time.time() * 1000)})"


def request_error(code: str, message: str) -> ApiError:
    return ApiError(400, {"__type": "RequestError", "Message": _stamp(message), "TurkErrorCode": TURK_PREFIX + code})


def service_fault(message: str = "The service is temporarily unable to process your request.") -> ApiError:
    return ApiError(500, {"__type": "ServiceFault", "Message": _stamp(message), "TurkErrorCode": TURK_PREFIX + "ServiceFault"})


def throttling() -> ApiError:
    return ApiError(400, {"__type": "com.amazon.coral.availability#ThrottlingException", "message": "Rate exceeded"})


def validation_error(problems: list[str]) -> ApiError:
    n = len(problems)
    noun = "validation error" if n == 1 else "validation errors"
    return ApiError(400, {"__type": "ValidationException", "message": f"{n} {noun} detected: " + "; ".join(problems)})


def serialization_error(message: str) -> ApiError:
    return ApiError(400, {"__type": "com.amazon.coral.service#SerializationException", "Message": message})


def unknown_operation(target: str) -> ApiError:
    return ApiError(400, {"__type": "com.amazon.coral.service#UnknownOperationException",
                          "message": f"Unknown operation {target!r}" if target else "Missing X-Amz-Target header"})


def new_request_id() -> str:
    return str(uuid.uuid4())


# -- request parsing and validation ---------------------------------------------------------------------
def operation_for(target: str | None) -> str:
    if not target or not target.startswith(TARGET_PREFIX):
        raise unknown_operation(target or "")
    op = target[len(TARGET_PREFIX):]
    if op not in operation_names():
        raise unknown_operation(target)
    return op


MAX_DEPTH = MAX_JSON_DEPTH  # no MTurk request shape nests deeper than a handful of levels


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """A JSON object or a SerializationException: never a RecursionError or a 500. The body must be UTF-8
    JSON nested at most `MAX_DEPTH` deep, with finite numbers and no lone surrogate (`campaign.untrusted`):
    the real service refuses a body it cannot read as its shape the same way."""
    try:
        return loads_json_object(raw, "the request body")
    except Refused as exc:
        raise serialization_error(f"Malformed JSON request body: {exc}") from None


def parse_body(raw: bytes) -> dict[str, Any]:
    return parse_json_object(raw)


def _camel(name: str) -> str:
    # AWS's own paths lower only the first letter: "Reward" -> "reward", "HITId" -> "hITId".
    return name[:1].lower() + name[1:]


def _render(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def validate(op: str, params: dict[str, Any]) -> dict[str, Any]:
    """Check `params` against the operation's input shape; return them with timestamps as epoch floats.

    Wrong JSON types and unknown members are serialization errors (the request cannot be read as the
    shape); constraint violations are collected into one ValidationException, as AWS does.
    """
    shape = service_model().operation_model(op).input_shape
    problems: list[str] = []
    if shape is None:
        return {}
    out = _check(shape, params, "", problems)
    question = out.get("Question")
    if isinstance(question, str) and len(question.encode("utf-8")) > QUESTION_MAX:
        problems.append(f"Value at 'question' failed to satisfy constraint: Member must have length less than or "
                        f"equal to {QUESTION_MAX}")
    for member in ("Reward", "BonusAmount"):
        v = out.get(member)
        if isinstance(v, str) and MODEL_AMOUNT_RE.match(v) and not AMOUNT_RE.match(v):
            problems.append(f"Value '{v[:40]}' at '{_camel(member)}' failed to satisfy constraint: Member must be an "
                            f"amount of US dollars between 0.00 and {AMOUNT_MAX} with at most two decimals")
    problems += bound_problems(out)
    if problems:
        raise validation_error(problems)
    if isinstance(question, str):
        check_external_url(question)
    return out


# Every time, count and amount a request can carry, bounded. MTurk's documented limits where it has them
# (mturk-api.md "Limits"); where MTurk states none, the bound is what its own types allow (qualification
# values are 32-bit integers) or the longest time any of its other durations may have (one year).
# Amounts are checked above (AMOUNT_RE) and MaxResults by the model itself (1-100).
YEAR = 31_536_000
INT32 = (-(2**31), 2**31 - 1)
TIME_MAX = 253_402_300_799.0  # 9999-12-31T23:59:59Z: the last instant a datetime (boto3's type) can hold
BOUNDS: dict[str, tuple[int, int]] = {
    "AssignmentDurationInSeconds": (30, YEAR),
    "LifetimeInSeconds": (30, YEAR),
    "AutoApprovalDelayInSeconds": (0, 2_592_000),
    "MaxAssignments": (1, 1_000_000_000),
    "NumberOfAdditionalAssignments": (1, 1_000_000_000),
    "RetryDelayInSeconds": (0, YEAR),
    "TestDurationInSeconds": (1, YEAR),
    "IntegerValue": INT32,
    "AutoGrantedValue": INT32,
    "IntegerValues": INT32,
}


def bound_problems(params: dict[str, Any], path: str = "") -> list[str]:
    """Out-of-range members anywhere in validated parameters, as ValidationException lines."""
    problems: list[str] = []
    for key, value in params.items():
        where = _join(path, key)
        if isinstance(value, dict):
            problems += bound_problems(value, where)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                if isinstance(v, dict):
                    problems += bound_problems(v, f"{where}.{i + 1}.member")
                elif key in BOUNDS and isinstance(v, int) and not isinstance(v, bool):
                    problems += _bound(f"{where}.{i + 1}.member", v, *BOUNDS[key])
        elif key in BOUNDS and isinstance(value, int) and not isinstance(value, bool):
            problems += _bound(where, value, *BOUNDS[key])
    return problems


def _bound(where: str, value: int, lo: int, hi: int) -> list[str]:
    if value < lo:
        return [f"Value '{value}' at '{where}' failed to satisfy constraint: Member must have value greater than or equal to {lo}"]
    if value > hi:
        return [f"Value '{value}' at '{where}' failed to satisfy constraint: Member must have value less than or equal to {hi}"]
    return []


QUESTION_MAX = 65_535  # MTurk: "The Question ... must not exceed 64 kilobytes"
AMOUNT_MAX = "99999999.99"
MODEL_AMOUNT_RE = re.compile(r"^[0-9]+(\.)?[0-9]{0,2}$")  # botocore's own pattern, reported by _check
AMOUNT_RE = re.compile(r"^[0-9]{1,8}(\.)?[0-9]{0,2}$")
LOOPBACK_HOSTS = {"127.0.0.1", "::1", "localhost"}


def check_external_url(question: str) -> None:
    """MTurk frames only https ExternalURLs; plain http is allowed for a loopback host (local testing).
    Malformed XML is left to the engine, which answers it with XMLParseError."""
    if "ExternalQuestion" not in question:  # no parse for the other question kinds (most HITs)
        return
    try:
        root = ET.fromstring(question)
    except ET.ParseError:
        return
    if root.tag.rsplit("}", 1)[-1] != "ExternalQuestion":
        return
    url = next(((c.text or "").strip() for c in root if c.tag.rsplit("}", 1)[-1] == "ExternalURL"), "")
    parts = urllib.parse.urlsplit(url)
    ok = parts.scheme == "https" and bool(parts.hostname)
    ok = ok or (parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS)
    if not ok:
        raise request_error("XMLParseError", "There was an error parsing the XML question or answer data in your request. "
                            f"The ExternalURL must be an https URL (http only for a loopback host): {url[:200]!r}")


def _check(shape, value: Any, path: str, problems: list[str]) -> Any:
    t = shape.type_name
    meta = shape.metadata
    where = path or shape.name
    if t == "structure":
        if not isinstance(value, dict):
            raise serialization_error(f"Expected an object at '{where}'")
        out: dict[str, Any] = {}
        for key in value:
            if key not in shape.members:
                raise serialization_error(f"Unknown member '{key}' at '{where}'")
        for req in shape.required_members:
            if value.get(req) is None:
                problems.append(f"Value null at '{_join(path, req)}' failed to satisfy constraint: Member must not be null")
        for key, v in value.items():
            if v is None:
                continue
            out[key] = _check(shape.members[key], v, _join(path, key), problems)
        return out
    if t == "list":
        if not isinstance(value, list):
            raise serialization_error(f"Expected a list at '{where}'")
        _length(len(value), meta, value, where, problems)
        return [_check(shape.member, v, f"{where}.{i + 1}.member", problems) for i, v in enumerate(value)]
    if t == "map":
        if not isinstance(value, dict):
            raise serialization_error(f"Expected a map at '{where}'")
        return {k: _check(shape.value, v, f"{where}.{k}", problems) for k, v in value.items()}
    if t == "string":
        if not isinstance(value, str):
            raise serialization_error(f"Expected a string at '{where}'")
        _length(len(value), meta, value, where, problems)
        if "pattern" in meta and not re.search(meta["pattern"], value):
            problems.append(f"Value '{value}' at '{where}' failed to satisfy constraint: "
                            f"Member must satisfy regular expression pattern: {meta['pattern']}")
        if shape.enum and value not in shape.enum:
            problems.append(f"Value '{value}' at '{where}' failed to satisfy constraint: "
                            f"Member must satisfy enum value set: [{', '.join(shape.enum)}]")
        return value
    if t in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise serialization_error(f"Expected an integer at '{where}'")
        if "min" in meta and value < meta["min"]:
            problems.append(f"Value '{value}' at '{where}' failed to satisfy constraint: Member must have value greater than or equal to {meta['min']}")
        if "max" in meta and value > meta["max"]:
            problems.append(f"Value '{value}' at '{where}' failed to satisfy constraint: Member must have value less than or equal to {meta['max']}")
        return value
    if t == "boolean":
        if not isinstance(value, bool):
            raise serialization_error(f"Expected a boolean at '{where}'")
        return value
    if t == "timestamp":
        if isinstance(value, bool):
            raise serialization_error(f"Expected a timestamp at '{where}'")
        when: float | None = None
        if isinstance(value, (int, float)):
            when = float(value)
        elif isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                parsed = None
            if parsed is not None:
                when = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
        if when is None:
            raise serialization_error(f"Expected a timestamp at '{where}'")
        if not math.isfinite(when) or not 0.0 <= when <= TIME_MAX:
            # a time no client can read back (boto3 fails on every later answer that shows it) or NaN
            problems.append(f"Value '{_render(value)[:40]}' at '{where}' failed to satisfy constraint: Member must be "
                            "a time between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z")
            return 0.0
        return when
    if t in ("double", "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise serialization_error(f"Expected a number at '{where}'")
        return float(value)
    return value


def _join(path: str, member: str) -> str:
    return f"{path}.{_camel(member)}" if path else _camel(member)


def _length(n: int, meta: dict, value: Any, where: str, problems: list[str]) -> None:
    if "min" in meta and n < meta["min"]:
        problems.append(f"Value '{_render(value)}' at '{where}' failed to satisfy constraint: Member must have length greater than or equal to {meta['min']}")
    if "max" in meta and n > meta["max"]:
        problems.append(f"Value '{_render(value)}' at '{where}' failed to satisfy constraint: Member must have length less than or equal to {meta['max']}")


def range_problem(member: str, value: Any, lo: int | None, hi: int | None, *, length: bool = False) -> str | None:
    """MTurk's documented limits that the model does not carry (durations, title length...)."""
    what = "length" if length else "value"
    n = len(value) if length else value
    if lo is not None and n < lo:
        return f"Value '{value}' at '{_camel(member)}' failed to satisfy constraint: Member must have {what} greater than or equal to {lo}"
    if hi is not None and n > hi:
        return f"Value '{value}' at '{_camel(member)}' failed to satisfy constraint: Member must have {what} less than or equal to {hi}"
    return None
