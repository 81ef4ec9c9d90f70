"""Reading a campaign's input files into items: propositions (TSV of id and text) or documents.

Documents come in three shapes: a TSV of sentences (`doc`, `id`, `text`, one sentence per row, in
document order), a TSV of whole documents (`doc`, `text` and no `id`: one document per row), or a folder
of plain-text files (one document per `.txt` file, named by the file's stem). The last two are split into
sentences by `campaign.sentences`, and each sentence is keyed `<doc>.s<n>` (n from 0 within the document),
the key shape the sentence TSVs of the examples use.

Errors name the file and line, as spec errors do. Items are copied into the store once, at a
campaign's first run: later edits to the file do not reach a campaign that has started.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from campaign.sentences import split_sentences
from campaign.untrusted import NOT_IN_A_PAGE


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
    text = text.translate(_PAGE_BREAKS)
    bad = NOT_IN_A_PAGE.search(text)
    if bad is not None:
        line = len(re.findall(r"\r\n|\r|\n", text[:bad.start()])) + 1
        raise InputError(f"{path}:{line}: holds the control character U+{ord(bad.group()):04X}, which no HIT page can "
                         "carry (MTurk refuses the HIT); remove it, or check that this is a text file")
    lines = re.split(r"\r\n|\r|\n", text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


#: Form feeds and vertical tabs (page and line breaks in text taken from PDFs and word processors) read
#: as spaces; any other character a HIT page cannot carry (`untrusted.NOT_IN_A_PAGE`) is refused.
_PAGE_BREAKS = str.maketrans({"\f": " ", "\v": " "})


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
    """Sentences of documents, from a sentence TSV, a document TSV or a folder of `.txt` files (see the
    module's docstring). In a sentence TSV ids must be unique across the file, and a row the segmenter
    reads as a paragraph (`looks_like_paragraph`) is an error naming its line: it would be shown to
    workers as one giant "sentence" and scored as one."""
    p = Path(path)
    if p.is_dir():
        return _folder_documents(p)
    header = _read_lines(p)[:1]
    if header and "id" not in header[0].split("\t") and {"doc", "text"} <= set(header[0].split("\t")):
        return _split_documents(p, ((line_no, v["doc"], v["text"]) for line_no, v in _rows(p, ("doc", "text"))), "rows")
    items = _items(p, ("doc", "id", "text"), "sentences")
    line_of = {v["id"]: line_no for line_no, v in _rows(p, ("id",))}
    for it in items:
        found = looks_like_paragraph(it.text)
        if found:
            raise InputError(f"{p}:{line_of[it.key]}: this row looks like a paragraph ({found} sentences); a file with an "
                             "'id' column holds one sentence per row; drop the 'id' column to have each row's text "
                             "split into sentences")
    return items


def looks_like_paragraph(text: str) -> int:
    """How many sentences `text` holds if it reads as a paragraph rather than one sentence, else 0.

    Three or more sentences, or two in more than `PARAGRAPH_WORDS` words. Two short ones pass: real
    sentence files hold rows like "Most water costs less than 1 cent per gallon. <br/> So why pay?", a
    splitting slip that costs a worker nothing, and refusing them would refuse files that work today."""
    if not _SENTENCE_END.search(text):  # one sentence at most: skip the segmenter (most rows of a sentence file)
        return 0
    found = len(split_sentences(text))
    return found if found >= 3 or (found == 2 and len(text.split()) > PARAGRAPH_WORDS) else 0


PARAGRAPH_WORDS = 60
# a sentence's end followed by more text: without one, a row cannot hold two sentences
_SENTENCE_END = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]]*\s+\S")


def _split_documents(path: Path, docs: Iterable[tuple[int, str, str]], what: str) -> list[Item]:
    """Items for whole documents given as (line or 0, document id, text), split into sentences."""
    items: list[Item] = []
    seen: set[str] = set()
    for line_no, doc, text in docs:
        if doc in seen:
            raise InputError(f"{path}:{line_no}: duplicate doc {doc!r}; one document per {what[:-1]}")
        seen.add(doc)
        for n, sentence in enumerate(split_sentences(text)):
            items.append(Item(key=f"{doc}.s{n}", text=sentence, doc=doc, position=len(items)))
    if not items:
        raise InputError(f"{path}:2: no documents found below the header" if what == "rows"
                         else f"{path}: no text found in its .txt files")
    return items


def _folder_documents(folder: Path) -> list[Item]:
    """One document per `.txt` file in `folder` (not its subfolders), in file-name order."""
    files = sorted(f for f in folder.iterdir() if f.suffix == ".txt" and f.is_file())
    if not files:
        raise InputError(f"{folder}: no .txt files in this folder (one plain-text file per document)")
    return _split_documents(folder, ((0, f.stem, "\n".join(_read_lines(f))) for f in files), "files")


def load_items(kind: str, path: str | Path) -> list[Item]:
    return load_documents(path) if kind == "documents" else load_propositions(path)
