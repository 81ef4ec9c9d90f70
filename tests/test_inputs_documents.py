"""Raw documents in (a folder of .txt files, or a TSV of one document per row) and the paragraph check
on sentence-per-row files."""

from pathlib import Path

import pytest

from campaign.inputs import InputError, load_documents
from campaign.spec import SpecError, load_spec
from tests.support.paths import WATER
from tests.support.specs import campaign, write_spec

PARAGRAPH = ("Bottled water costs a thousand times more than tap water. Dr. Smith said so in the U.S. report of 2.5 pages. "
             "Plastic bottles take centuries to decompose. Many towns have banned them already.")


def test_a_folder_of_text_files_is_split_into_sentences(tmp_path):
    (tmp_path / "b.txt").write_text(PARAGRAPH + "\n\nA second paragraph\nwraps over a line. It ends here.\n", encoding="utf-8")
    (tmp_path / "a.txt").write_text("Only one sentence here.", encoding="utf-8")
    (tmp_path / "notes.md").write_text("Not a document.", encoding="utf-8")
    items = load_documents(tmp_path)
    assert [(i.doc, i.key) for i in items][:3] == [("a", "a.s0"), ("b", "b.s0"), ("b", "b.s1")]
    texts = [i.text for i in items if i.doc == "b"]
    assert texts == ["Bottled water costs a thousand times more than tap water.",
                     "Dr. Smith said so in the U.S. report of 2.5 pages.",
                     "Plastic bottles take centuries to decompose.", "Many towns have banned them already.",
                     "A second paragraph wraps over a line.", "It ends here."]
    assert [i.position for i in items] == list(range(len(items)))


def test_a_tsv_of_whole_documents_is_split_and_keeps_document_order(tmp_path):
    p = tmp_path / "docs.tsv"
    p.write_text(f"doc\ttext\nz\t{PARAGRAPH}\na\tShort text. Two sentences.\n", encoding="utf-8")
    items = load_documents(p)
    assert [i.key for i in items] == ["z.s0", "z.s1", "z.s2", "z.s3", "a.s0", "a.s1"]
    p.write_text("doc\ttext\nz\tOne.\nz\tTwo.\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"docs.tsv:3: duplicate doc 'z'"):
        load_documents(p)


def test_a_paragraph_in_a_sentence_per_row_file_names_its_line(tmp_path):
    p = tmp_path / "sents.tsv"
    p.write_text(f"doc\tid\ttext\nd\td.0\tA fine sentence.\nd\td.1\t{PARAGRAPH}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"sents.tsv:3: this row looks like a paragraph \(4 sentences\)"):
        load_documents(p)


def test_the_demo_sentence_file_still_loads_unchanged():
    items = load_documents(WATER / "documents.tsv")
    assert len(items) == 136 and items[0].key == "arg219207.s0"


def test_validate_names_the_paragraph_row_and_accepts_a_folder(tmp_path):
    sents = tmp_path / "sents.tsv"
    sents.write_text(f"doc\tid\ttext\nd\td.0\t{PARAGRAPH}\n", encoding="utf-8")
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "one.txt").write_text(PARAGRAPH, encoding="utf-8")
    def spec(documents: str) -> Path:
        return write_spec(tmp_path / "c.yaml", campaign("n", topic="Water", documents=documents, task={"kind": "nuggets"},
                                                        budget="10.00", crowd=None, poll_interval=None))

    with pytest.raises(SpecError, match=r"sents.tsv:2: this row looks like a paragraph"):
        load_spec(spec("sents.tsv"))
    assert load_spec(spec("texts")).campaigns[0].input_path.endswith("texts")


def test_a_folder_without_text_files_or_with_a_bad_byte_is_an_error(tmp_path):
    with pytest.raises(InputError, match=r"no \.txt files in this folder"):
        load_documents(tmp_path)
    (tmp_path / "a.txt").write_bytes(b"Fine line.\nBad \xff byte.\n")
    with pytest.raises(InputError, match=r"a.txt:2: not UTF-8 text"):
        load_documents(tmp_path)
    (tmp_path / "a.txt").write_text("  \n\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"no text found in its .txt files"):
        load_documents(tmp_path)
