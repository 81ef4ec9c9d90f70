"""`campaign.outfile.write_out`: what `--out` names is written whole or not at all, and a device or pipe
it names is written to, never replaced (an export to /dev/full once put a regular file in its place)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from campaign.outfile import OutputError, write_out


def test_a_new_file_is_written_and_no_tmp_is_left(tmp_path):
    out = tmp_path / "scores.csv"
    write_out(out, ["a,b\r\n", "1,2\n"])
    assert out.read_bytes() == b"a,b\r\n1,2\n"  # newlines as given: csv's \r\n stay
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.csv"]


def test_a_failure_midway_keeps_the_old_file_whole(tmp_path):
    out = tmp_path / "scores.csv"
    out.write_text("the old export\n")
    out.chmod(0o640)

    def rows():
        yield "half of a new"
        raise RuntimeError("the store went away")

    with pytest.raises(RuntimeError):
        write_out(out, rows())
    assert out.read_text() == "the old export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.csv"]
    write_out(out, ["new\n"])
    assert out.read_text() == "new\n" and (out.stat().st_mode & 0o777) == 0o640  # the owner's mode is kept


def test_a_symlink_to_a_file_stays_a_link(tmp_path):
    real = tmp_path / "real.csv"
    real.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    write_out(link, ["new\n"])
    assert link.is_symlink() and real.read_text() == "new\n"


def test_a_fifo_is_written_to_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_out(fifo, ["through the pipe\n"])
    reader.join(timeout=10)
    assert got == [b"through the pipe\n"]
    assert fifo.is_fifo()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_full_device_is_a_clear_error_and_stays_a_device():
    with pytest.raises(OutputError, match=r"cannot write /dev/full: No space left on device"):
        write_out(Path("/dev/full"), ["x" * 100_000])
    assert Path("/dev/full").is_char_device()


def test_a_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(OutputError, match=r"cannot write .*nowhere/x.csv: No such file or directory"):
        write_out(tmp_path / "nowhere" / "x.csv", ["x"])
    assert not (tmp_path / "nowhere").exists()
