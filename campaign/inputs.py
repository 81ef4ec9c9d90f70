"""Reading a campaign's input files into items: propositions (TSV of id and text) or documents.

Errors name the file and line, as spec errors do. Items are copied into the store once, at a
campaign's first run: later edits to the file do not reach a campaign that has started.
"""

from __future__ import annotations

import re
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


def _read_lines(path: Path) -> list[str]:
    """The file's lines, split the way a tab-separated file without quoting is: at \\n, \\r\\n or \\r only.

    Read whole and split by hand rather than with `csv`, which caps a field at 128 KiB and would also
    need the text decoded first; a file that is not UTF-8 is an error naming the line of the first bad byte.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}:0: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start + (3 if raw.startswith(b"\xef\xbb\xbf") else 0)
        line = raw[:start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[start]:02x}); save the file as UTF-8") from None
    lines = re.split(r"\r\n|\r|\n", text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _table(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, the named columns) of every non-blank row of a TSV whose header names `columns`.
    Every row must have as many cells as the header: a longer row would otherwise lose cells silently."""
    lines = _read_lines(path)
    names = ", ".join(f"'{c}'" for c in columns)
    if not lines or not any(line.strip() for line in lines):
        raise InputError(f"{path}:1: the file is empty; the first line must be a header naming the columns {names} (tab-separated)")
    header = lines[0].split("\t")
    if not set(columns) <= set(header):
        raise InputError(f"{path}:1: the header must name the columns {names} (tab-separated)")
    index = {c: header.index(c) for c in columns}
    for line_no, line in enumerate(lines[1:], start=2):
        row = line.split("\t")
        if all(not cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise InputError(f"{path}:{line_no}: expected {len(header)} tab-separated columns, got {len(row)}")
        yield line_no, {c: row[i].strip() for c, i in index.items()}


def _rows(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """Rows of `_table` with every named cell non-empty; an empty cell is an error that names its line."""
    for line_no, values in _table(path, columns):
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
        raise InputError(f"{p}:2: no {what} found below the header")
    return items


def load_propositions(path: str | Path) -> list[Item]:
    """A TSV with a header naming at least `id` and `text`; ids must be unique and non-empty."""
    return _items(path, ("id", "text"), "propositions")


def load_truth(path: str | Path) -> dict[str, float]:
    """Hidden importance per item (0..1) for the simulated crowd: TSV with `id` and `importance`."""
    p = Path(path)
    out: dict[str, float] = {}
    for line_no, row in _table(p, ("id", "importance")):
        try:
            out[row["id"]] = float(row["importance"])
        except ValueError:
            raise InputError(f"{p}:{line_no}: importance must be a number, got {row['importance']!r}") from None
    return out


def load_documents(path: str | Path) -> list[Item]:
    """Sentences of documents: a TSV with columns `doc`, `id` (the sentence's source id) and `text`,
    one sentence per row, in document order. Ids must be unique across the file."""
    return _items(path, ("doc", "id", "text"), "sentences")


def load_items(kind: str, path: str | Path) -> list[Item]:
    return load_documents(path) if kind == "documents" else load_propositions(path)
