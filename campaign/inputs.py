"""Reading a campaign's input files into items: propositions (TSV of id and text) or documents.

Errors name the file and line, as spec errors do. Items are copied into the store once, at a
campaign's first run: later edits to the file do not reach a campaign that has started.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


class InputError(Exception):
    pass


@dataclass(frozen=True)
class Item:
    key: str
    text: str
    doc: str | None = None  # document id, for sentences
    position: int = 0  # order within the input (sentence index within a document)


def _rows(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, the named columns) of every non-blank row of a TSV whose header names `columns`;
    a short row or an empty cell is an error that names its line."""
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None or not set(columns) <= set(header):
            names = ", ".join(f"'{c}'" for c in columns)
            raise InputError(f"{path}:1: the header must name the columns {names} (tab-separated)")
        index = {c: header.index(c) for c in columns}
        for line_no, row in enumerate(reader, start=2):
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) <= max(index.values()):
                raise InputError(f"{path}:{line_no}: expected {len(header)} tab-separated columns, got {len(row)}")
            values = {c: row[i].strip() for c, i in index.items()}
            if not all(values.values()):
                raise InputError(f"{path}:{line_no}: empty {' or '.join(c for c, v in values.items() if not v)}")
            yield line_no, values


def _items(path: str | Path, columns: tuple[str, ...], what: str) -> list[Item]:
    p = Path(path)
    items: list[Item] = []
    seen: set[str] = set()
    for line_no, v in _rows(p, columns):
        if v["id"] in seen:
            raise InputError(f"{p}:{line_no}: duplicate id {v['id']!r}")
        seen.add(v["id"])
        items.append(Item(key=v["id"], text=v["text"], doc=v.get("doc"), position=len(items)))
    if not items:
        raise InputError(f"{p}: no {what} found")
    return items


def load_propositions(path: str | Path) -> list[Item]:
    """A TSV with a header naming at least `id` and `text`; ids must be unique and non-empty."""
    return _items(path, ("id", "text"), "propositions")


def load_truth(path: str | Path) -> dict[str, float]:
    """Hidden importance per item (0..1) for the simulated crowd: TSV with `id` and `importance`."""
    p = Path(path)
    out: dict[str, float] = {}
    with p.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        if reader.fieldnames is None or "id" not in reader.fieldnames or "importance" not in reader.fieldnames:
            raise InputError(f"{p}:1: the header must name the columns 'id' and 'importance'")
        for line_no, row in enumerate(reader, start=2):
            try:
                out[row["id"].strip()] = float(row["importance"])
            except (TypeError, ValueError):
                raise InputError(f"{p}:{line_no}: importance must be a number, got {row.get('importance')!r}") from None
    return out


def load_documents(path: str | Path) -> list[Item]:
    """Sentences of documents: a TSV with columns `doc`, `id` (the sentence's source id) and `text`,
    one sentence per row, in document order. Ids must be unique across the file."""
    return _items(path, ("doc", "id", "text"), "sentences")


def load_items(kind: str, path: str | Path) -> list[Item]:
    return load_documents(path) if kind == "documents" else load_propositions(path)
