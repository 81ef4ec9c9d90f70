"""File readers for `campaign evaluate`: every malformed line is reported as `file:line: message`.

Formats (docs/evaluation.md): TSV files start with a header naming their
columns (other columns are ignored); blank lines and lines starting with `#` are skipped everywhere
except in summaries. All files are UTF-8.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from campaign.evaluate.extract import AbstractSentence
from campaign.evaluate.hierarchy import Hierarchy
from campaign.evaluate.nuggets import GoldNugget

T = TypeVar("T")


class FormatError(Exception):
    """A malformed input file; str() is `path:line: message` (line omitted when it is the whole file)."""

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        self.path, self.line, self.message = str(path), line, message
        super().__init__(f"{self.path}:{line}: {message}" if line else f"{self.path}: {message}")


def _text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FormatError(path, None, "no such file") from None
    except IsADirectoryError:
        raise FormatError(path, None, "is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise FormatError(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, line) for every line that is not blank or a comment."""
    for no, line in enumerate(_text(path).splitlines(), start=1):
        if line.strip() and not line.lstrip().startswith("#"):
            yield no, line


def _tsv(path: str | Path, required: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    rows = _lines(path)
    try:
        no, header = next(rows)
    except StopIteration:
        raise FormatError(path, None, f"empty file; expected a header with columns {', '.join(required)}") from None
    names = [h.strip().lower() for h in header.split("\t")]
    missing = [r for r in required if r not in names]
    if missing:
        raise FormatError(path, no, f"header must name the tab-separated columns {', '.join(required)} "
                                    f"(missing {', '.join(missing)}; found {names})")
    if len(set(names)) != len(names):
        raise FormatError(path, no, "header names a column twice")
    for no, line in rows:
        fields = line.split("\t")
        if len(fields) != len(names):
            raise FormatError(path, no, f"expected {len(names)} tab-separated fields ({', '.join(names)}), found {len(fields)}")
        yield no, {n: f.strip() for n, f in zip(names, fields)}


# --- extract (TSC3) -----------------------------------------------------------------------------

RANKS = ("A", "B", "C")


def _sets_from_text(path: str | Path, no: int, text: str) -> tuple[frozenset[str], ...]:
    sets = []
    for group in text.split():
        ids = [x.strip() for x in group.split(",")]
        if any(not x for x in ids):
            raise FormatError(path, no, f"empty sentence id in set {group!r} (sets are space-separated, ids in a set comma-separated)")
        sets.append(frozenset(ids))
    if not sets:
        raise FormatError(path, no, "no set of source sentences")
    return tuple(sets)


def read_extract_gold(path: str | Path) -> list[AbstractSentence]:
    """TSV (columns sentence, rank, sets) or, for a `.jsonl` file, {"sentence", "rank", "sets": [[ids]]}."""
    out: list[AbstractSentence] = []
    seen: dict[str, int] = {}
    if str(path).endswith(".jsonl"):
        rows: Iterator[tuple[int, tuple[str, str, tuple[frozenset[str], ...]]]] = _extract_jsonl(path)
    else:
        rows = ((no, (r["sentence"], r["rank"], _sets_from_text(path, no, r["sets"])))
                for no, r in _tsv(path, ("sentence", "rank", "sets")))
    for no, (key, rank, sets) in rows:
        if not key:
            raise FormatError(path, no, "empty sentence id")
        if key in seen:
            raise FormatError(path, no, f"abstract sentence {key!r} already listed on line {seen[key]}")
        if rank not in RANKS:
            raise FormatError(path, no, f"rank must be one of {', '.join(RANKS)}, not {rank!r}")
        seen[key] = no
        out.append(AbstractSentence(key=key, rank=rank, sets=sets))
    if not out:
        raise FormatError(path, None, "no abstract sentence")
    return out


def _extract_jsonl(path: str | Path) -> Iterator[tuple[int, tuple[str, str, tuple[frozenset[str], ...]]]]:
    for no, obj in _jsonl(path):
        key, rank, sets = obj.get("sentence"), obj.get("rank"), obj.get("sets")
        if isinstance(key, int) and not isinstance(key, bool):
            key = str(key)
        if not isinstance(key, str):
            raise FormatError(path, no, "\"sentence\" must be a string or an integer")
        if not isinstance(rank, str):
            raise FormatError(path, no, "\"rank\" must be a string (A, B or C)")
        if (not isinstance(sets, list) or not sets
                or not all(isinstance(g, list) and g and all(isinstance(x, str) and x for x in g) for g in sets)):
            raise FormatError(path, no, "\"sets\" must be a non-empty list of non-empty lists of sentence ids (strings)")
        yield no, (key, rank, tuple(frozenset(g) for g in sets))


def read_extract_system(path: str | Path) -> list[str]:
    """One source sentence id per line."""
    out: list[str] = []
    seen: dict[str, int] = {}
    for no, line in _lines(path):
        sid = line.strip()
        if len(sid.split()) != 1:
            raise FormatError(path, no, f"expected one sentence id per line, found {sid!r}")
        if sid in seen:
            raise FormatError(path, no, f"sentence {sid!r} already listed on line {seen[sid]}")
        seen[sid] = no
        out.append(sid)
    return out


def parse_weights(text: str) -> dict[str, float]:
    """`A=1,B=0.5,C=0.333` -> {"A": 1.0, ...}; raises ValueError with a readable message."""
    out: dict[str, float] = {}
    for part in text.split(","):
        rank, sep, value = part.partition("=")
        rank = rank.strip()
        try:
            w = float(value)
        except ValueError:
            w = math.nan
        if not sep or rank not in RANKS or not math.isfinite(w) or w < 0:
            raise ValueError(f"weights must look like A=1,B=0.5,C=0.33 (ranks A, B, C; weights >= 0), not {text!r}")
        out[rank] = w
    return out


# --- JSONL ---------------------------------------------------------------------------------------

def _jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    for no, line in enumerate(_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(path, no, f"not JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise FormatError(path, no, "expected a JSON object")
        yield no, obj


# --- nuggets ------------------------------------------------------------------------------------

def _field(path: str | Path, no: int, obj: dict, name: str, kind: type[T]) -> T:
    """obj[name] if it has the type (an integer is a number; a boolean is neither)."""
    if name not in obj:
        raise FormatError(path, no, f"missing field {name!r}")
    v = obj[name]
    ok = isinstance(v, (int, float)) if kind is float else isinstance(v, kind)
    if isinstance(v, bool) or not ok:
        want = {str: "a string", int: "an integer", float: "a number"}.get(kind, kind.__name__)
        raise FormatError(path, no, f"field {name!r} must be {want}, not {json.dumps(v)}")
    return v


def read_gold_nuggets(path: str | Path) -> list[GoldNugget]:
    """gold_nuggets.jsonl as a nugget stage writes it (campaign.steps.nugget_export.write_gold)."""
    out: list[GoldNugget] = []
    for no, obj in _jsonl(path):
        hit, item, text = (_field(path, no, obj, k, str) for k in ("hit", "item", "text"))
        first, last, workers = (_field(path, no, obj, k, int) for k in ("first", "last", "workers"))
        mace = float(_field(path, no, obj, "mace_weight", float))
        if first < 0 or last < first:
            raise FormatError(path, no, f"span first={first} last={last} is not a token range")
        if workers < 1:
            raise FormatError(path, no, f"workers must be >= 1, not {workers}")
        if not math.isfinite(mace) or mace < 0:
            raise FormatError(path, no, f"mace_weight must be a finite number >= 0, not {mace}")
        if not text.strip():
            raise FormatError(path, no, "empty nugget text")
        out.append(GoldNugget(hit=hit, item=item, first=first, last=last, workers=workers, mace_weight=mace, text=text))
    if not out:
        raise FormatError(path, None, "no gold nugget (a nugget stage that found none writes an empty file)")
    return out


def read_summary(path: str | Path) -> str:
    return _text(path)


# --- clusters -----------------------------------------------------------------------------------

def read_clustering(path: str | Path) -> tuple[dict[str, str], dict[str, int]]:
    """TSV with columns item, cluster: (item -> cluster, item -> line)."""
    labels: dict[str, str] = {}
    where: dict[str, int] = {}
    for no, r in _tsv(path, ("item", "cluster")):
        item, cluster = r["item"], r["cluster"]
        if not item:
            raise FormatError(path, no, "empty item")
        if not cluster:
            raise FormatError(path, no, f"item {item!r} has an empty cluster (give an unclustered item a cluster of its own)")
        if item in labels:
            raise FormatError(path, no, f"item {item!r} already assigned on line {where[item]}")
        labels[item], where[item] = cluster, no
    if not labels:
        raise FormatError(path, None, "no item")
    return labels, where


# --- hierarchy ----------------------------------------------------------------------------------

def read_hierarchy(path: str | Path) -> tuple[Hierarchy, dict[str, int]]:
    """TSV with columns node, parent (empty for a root), nuggets (space- or comma-separated ids):
    (the hierarchy, nugget -> line)."""
    parent: dict[str, str | None] = {}
    nuggets: dict[str, list[str]] = {}
    line_of: dict[str, int] = {}
    home: dict[str, str] = {}
    for no, r in _tsv(path, ("node", "parent", "nuggets")):
        node, par = r["node"], r["parent"] or None
        if not node:
            raise FormatError(path, no, "empty node id")
        if node in parent:
            raise FormatError(path, no, f"node {node!r} already defined on line {line_of[node]}")
        if par == node:
            raise FormatError(path, no, f"node {node!r} is its own parent")
        ids = r["nuggets"].replace(",", " ").split()
        if not ids:
            raise FormatError(path, no, f"node {node!r} holds no nugget")
        for n in ids:
            if n in home:
                raise FormatError(path, no, f"nugget {n!r} is already in node {home[n]!r} (line {line_of[home[n]]})")
            home[n] = node
        parent[node], nuggets[node], line_of[node] = par, ids, no
    if not parent:
        raise FormatError(path, None, "no node")
    for node, par in parent.items():
        if par is not None and par not in parent:
            raise FormatError(path, line_of[node], f"parent {par!r} of node {node!r} is not defined in the file")
    for node in parent:
        seen = {node}
        p = parent[node]
        while p is not None:
            if p in seen:
                raise FormatError(path, line_of[node], f"node {node!r} is on a cycle of parents")
            seen.add(p)
            p = parent[p]
    return Hierarchy(parent=parent, nuggets=nuggets), {n: line_of[node] for n, node in home.items()}
