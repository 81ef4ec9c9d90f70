"""`campaign preview` without a browser: which pages it writes, what they hold, `--serve` on loopback,
and that it creates no state (the browser test completes the pages: tests/browser/test_preview_browser.py)."""

from __future__ import annotations

import signal
import subprocess
import urllib.request
from pathlib import Path

from tests.support.cli import cli_output, start_campaign
from tests.support.paths import ROOT


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return cli_output("preview", *args, cwd=cwd)


def test_one_stage_of_one_campaign_with_its_trap_marked(tmp_path):
    out = _cli("--config", str(ROOT / "examples" / "two-stage.yaml"), "--stage", "likert", "--out", "p", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert sorted(f.name for f in (tmp_path / "p").iterdir()) == [
        "index.html", "water-two-stage--likert.hit.html", "water-two-stage--likert.html"]
    assert sorted(f.name for f in tmp_path.iterdir()) == ["p"]
    page = (tmp_path / "p" / "water-two-stage--likert.html").read_text()
    assert page.count('class="trap"') == 1 and "TRAP: " in page
    hit = (tmp_path / "p" / "water-two-stage--likert.hit.html").read_text()
    assert hit.count('name="rating-') == 6 * 5  # 5 propositions and the trap, a 5-point scale each
    assert "campaign preview: show the answer instead of sending it" in hit


def test_unknown_campaign_or_stage_is_an_error(tmp_path):
    bad = _cli("--config", str(ROOT / "campaigns.yaml"), "--campaign", "nope", "--out", "p", cwd=tmp_path)
    assert bad.returncode == 2 and "no campaign named nope" in bad.stderr
    bad = _cli("--config", str(ROOT / "campaigns.yaml"), "--stage", "nope", "--out", "p", cwd=tmp_path)
    assert bad.returncode == 2 and "no stage named 'nope'" in bad.stderr


def test_serve_answers_on_loopback_until_interrupted(tmp_path):
    proc = start_campaign("preview", "--config", ROOT / "campaigns.yaml", "--campaign", "water-bottles", "--out", "p",
                          "--serve", cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = ""
        for line in proc.stdout:
            if line.startswith("preview served at "):
                break
        url = line.split()[3]
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "water-bottles--likert.html", timeout=10) as r:
            assert "hit-frame" in r.read().decode()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0  # a bound for a hung server, not a speed check: loaded machines are slow to exit
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert sorted(f.name for f in tmp_path.iterdir()) == ["p"]


def test_item_and_spec_texts_are_escaped_in_the_frame_page():
    from campaign.preview import frame_page
    from campaign.spec import load_spec
    from campaign.tasks.base import ShownItem

    c = load_spec(ROOT / "campaigns.yaml").campaigns[0]
    hostile = '<img src=x onerror="alert(1)">\u202e'
    page = frame_page(c, c.stages[0], [ShownItem("a", hostile), ShownItem("trap:likert:0", "</li><script>x()</script>")],
                      "h.html", 1)
    assert "<img" not in page and "<script>x()" not in page and "\u202e" not in page
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in page
    assert page.count('class="trap"') == 1
