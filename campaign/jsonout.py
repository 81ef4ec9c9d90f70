"""Strict JSON for every `--json` output: what `jq`, JavaScript's `JSON.parse` and any RFC 8259 parser read.

Python's `json.dumps` writes NaN and Infinity as the bare words `NaN` and `Infinity`, which are not
JSON. `dumps` writes them as null (a figure that could not be computed); the command that produced the
figure says why beside it where it knows (e.g. `campaign aggregate`'s `null_because`). NumPy scalars
and arrays are written as the plain numbers and lists they hold. The shape of the object is otherwise
untouched: each command's JSON shape is a contract.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(obj: Any) -> Any:
    """`obj` with every NaN / infinite float replaced by None, NumPy values by Python ones, tuples by lists."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    tolist = getattr(obj, "tolist", None)  # NumPy scalar or array, without importing NumPy here
    if callable(tolist):
        return finite(tolist())
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """`json.dumps` that never writes NaN or Infinity (raises if anything non-finite is left)."""
    return json.dumps(finite(obj), allow_nan=False, **kwargs)
