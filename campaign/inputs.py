"""Reading a campaign's input files into items: propositions (TSV of id and text) or documents.

Errors name the file and line, as spec errors do; an input that changes after a campaign started is
caught by the store (items are keyed by id and their text hash is kept).
"""

from __future__ import annotations

import csv
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


def load_propositions(path: str | Path) -> list[Item]:
    """A TSV with a header naming at least `id` and `text`; ids must be unique and non-empty."""
    p = Path(path)
    items: list[Item] = []
    seen: set[str] = set()
    with p.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None or "id" not in header or "text" not in header:
            raise InputError(f"{p}:1: the header must name the columns 'id' and 'text' (tab-separated)")
        i_id, i_text = header.index("id"), header.index("text")
        for line_no, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) <= max(i_id, i_text):
                raise InputError(f"{p}:{line_no}: expected {len(header)} tab-separated columns, got {len(row)}")
            key, text = row[i_id].strip(), row[i_text].strip()
            if not key or not text:
                raise InputError(f"{p}:{line_no}: empty id or text")
            if key in seen:
                raise InputError(f"{p}:{line_no}: duplicate id {key!r}")
            seen.add(key)
            items.append(Item(key=key, text=text, position=len(items)))
    if not items:
        raise InputError(f"{p}: no propositions found")
    return items


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
    p = Path(path)
    items: list[Item] = []
    seen: set[str] = set()
    with p.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None or not {"doc", "id", "text"} <= set(header):
            raise InputError(f"{p}:1: the header must name the columns 'doc', 'id' and 'text' (tab-separated)")
        i_doc, i_id, i_text = header.index("doc"), header.index("id"), header.index("text")
        for line_no, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) <= max(i_doc, i_id, i_text):
                raise InputError(f"{p}:{line_no}: expected {len(header)} tab-separated columns, got {len(row)}")
            doc, key, text = row[i_doc].strip(), row[i_id].strip(), row[i_text].strip()
            if not doc or not key or not text:
                raise InputError(f"{p}:{line_no}: empty doc, id or text")
            if key in seen:
                raise InputError(f"{p}:{line_no}: duplicate sentence id {key!r}")
            seen.add(key)
            items.append(Item(key=key, text=text, doc=doc, position=len(items)))
    if not items:
        raise InputError(f"{p}: no sentences found")
    return items


def load_items(kind: str, path: str | Path) -> list[Item]:
    return load_documents(path) if kind == "documents" else load_propositions(path)
