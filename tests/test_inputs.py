import pytest

from campaign.inputs import InputError, load_documents, load_propositions, load_truth


def write(tmp_path, text, name="f.tsv"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_propositions_and_documents(tmp_path):
    items = load_propositions(write(tmp_path, "id\ttext\na\tFirst one\n\nb\tSecond\n"))
    assert [(i.key, i.text, i.position) for i in items] == [("a", "First one", 0), ("b", "Second", 1)]
    docs = load_documents(write(tmp_path, "doc\tid\ttext\nd1\td1.0\tA sentence.\nd1\td1.1\tAnother.\n"))
    assert [(i.doc, i.key) for i in docs] == [("d1", "d1.0"), ("d1", "d1.1")]


@pytest.mark.parametrize("text,message", [
    ("name\ttext\na\tx\n", ":1: the header must name the columns 'id', 'text'"),
    ("id\ttext\na\tx\na\ty\n", ":3: duplicate id 'a'"),
    ("id\ttext\na\n", ":2: expected 2 tab-separated columns, got 1"),
    ("id\ttext\na\t \n", ":2: empty text"),
    ("id\ttext\n", "no propositions found"),
])
def test_bad_inputs_name_file_and_line(tmp_path, text, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        load_propositions(write(tmp_path, text))


def test_truth_must_be_numeric(tmp_path):
    assert load_truth(write(tmp_path, "id\timportance\na\t0.5\n")) == {"a": 0.5}
    with pytest.raises(InputError, match=":2: importance must be a number"):
        load_truth(write(tmp_path, "id\timportance\na\thigh\n"))


def write_bytes(tmp_path, data: bytes, name="f.tsv"):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_non_utf8_names_the_line_of_the_bad_byte(tmp_path):
    p = write_bytes(tmp_path, "id\ttext\na\tfine\nb\tna\xefve\n".encode("latin-1"))
    with pytest.raises(InputError, match=r":3: not UTF-8 text \(byte 0xef\)"):
        load_propositions(p)


def test_a_field_over_the_csv_module_limit_loads(tmp_path):
    long = "word " * 40_000  # 200 KB, over csv's 128 KiB field limit
    items = load_propositions(write(tmp_path, f"id\ttext\na\t{long}\nb\tshort\n"))
    assert [len(i.text) for i in items] == [len(long.strip()), 5]


@pytest.mark.parametrize("text,message", [
    ("", ":1: the file is empty"),
    ("\n\n", ":1: the file is empty"),
    ("id\ttext\n", ":2: no propositions found below the header"),
    ("id\ttext\na\tx\tsurplus\n", ":2: expected 2 tab-separated columns, got 3"),
])
def test_empty_header_only_and_ragged_files(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        load_propositions(write(tmp_path, text))


def test_truth_rows_must_match_the_header(tmp_path):
    with pytest.raises(InputError, match=":2: expected 2 tab-separated columns, got 1"):
        load_truth(write(tmp_path, "id\timportance\na\n"))


def test_windows_line_ends_and_byte_order_mark(tmp_path):
    items = load_propositions(write_bytes(tmp_path, b"\xef\xbb\xbfid\ttext\r\na\tOne\r\nb\tTwo\r\n"))
    assert [(i.key, i.text) for i in items] == [("a", "One"), ("b", "Two")]


def test_a_control_character_no_hit_page_can_carry_is_refused_with_its_line(tmp_path):
    """Before: a proposition holding NUL passed `validate`, and its HIT was then refused by the marketplace
    (XMLParseError) at every pass; the campaign finished without those items."""
    from campaign.inputs import InputError, load_propositions

    f = tmp_path / "p.tsv"
    f.write_bytes(b"id\ttext\np1\tfine\np2\tbad \x00 text\n")
    with pytest.raises(InputError) as caught:
        load_propositions(f)
    assert str(caught.value).startswith(f"{f}:3: holds the control character U+0000")
    for bad in (b"\x01", b"\x1b", b"\x08", "\ufffe".encode()):
        f.write_bytes(b"id\ttext\np1\tx" + bad + b"y\n")
        with pytest.raises(InputError):
            load_propositions(f)


def test_page_breaks_from_pdfs_read_as_spaces(tmp_path):
    from campaign.inputs import load_documents, load_propositions

    f = tmp_path / "p.tsv"
    f.write_bytes(b"id\ttext\np1\tone\x0cpage\x0bbreak\n")
    assert [i.text for i in load_propositions(f)] == ["one page break"]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "d.txt").write_bytes(b"First sentence here.\x0cSecond sentence here.\n")
    assert [i.text for i in load_documents(docs)] == ["First sentence here.", "Second sentence here."]
