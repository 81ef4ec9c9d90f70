"""`campaign report` for each task kind (Likert, two-stage Likert + ranking, nuggets) from real small
campaigns, opened in Debian's headless chromium: a screenshot of each page, and the page's layout
measured by the browser itself (it fits a 1280-px window, every chart is drawn with a size).

Also checks, on the same runs, that the last progress line `campaign run` printed for each campaign
agrees with `campaign status` (the nugget campaign used to end on "running 412/427")."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest

from tests.support.cli import clean_env, run_campaign
from tests.support.paths import ROOT, WATER
from tests.support.specs import campaign, head_tsv, simulated, write_spec

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)

CROWD = simulated(14, speed=3600, arrival_span="1h", truth="truth.tsv")
SPEC = [campaign("small-likert", task={"kind": "likert"}, budget="10.00", propositions="propositions.tsv", poll_interval=0.3,
                 crowd=CROWD | {"mix": {"diligent": 0.7, "noisy": 0.1, "constant_spammer": 0.2}}),
        campaign("small-ranking", budget="20.00", propositions="propositions.tsv", crowd=CROWD, poll_interval=0.3,
                 stages=[{"name": "likert", "kind": "likert"},
                         {"name": "ranking", "kind": "ranking", "source": "likert", "shortlist": 12, "keep": 6, "batch_pairs": 15,
                          "pair_budget": 0.3}]),
        campaign("small-nuggets", task={"kind": "nuggets", "assignments": 5}, budget="20.00", documents="documents.tsv",
                 crowd=simulated(14, speed=3600, arrival_span="1h", truth="sentence_truth.tsv"), poll_interval=0.3)]
NAMES = ("small-likert", "small-ranking", "small-nuggets")


def cli(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_campaign(*args, cwd=cwd, env=clean_env(PYTHONPATH=str(ROOT)), timeout=timeout)


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    work = tmp_path_factory.mktemp("reports")
    head_tsv(WATER / "propositions.tsv", work / "propositions.tsv", 25)
    head_tsv(WATER / "truth.tsv", work / "truth.tsv", 60)
    head_tsv(WATER / "documents.tsv", work / "documents.tsv", 28)
    head_tsv(WATER / "sentence_truth.tsv", work / "sentence_truth.tsv", 136)
    write_spec(work / "campaigns.yaml", *SPEC)
    run = cli(work, "run", "--seed", "3", timeout=600)  # stdout is a pipe: the plain progress lines
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return work, run


@pytest.mark.slow
def test_last_progress_line_agrees_with_status(campaigns):
    work, run = campaigns
    status = json.loads(cli(work, "status", "--json").stdout)
    by_name = {c["name"]: c for c in status["campaigns"]}
    for name in NAMES:
        last = [line for line in run.stdout.splitlines() if line.startswith(f"{name}: ") and "HITs" in line][-1]
        f = by_name[name]
        a = f["assignments"]
        assert f"{name}: {f['status']};" in last, last
        assert f"answers {a['submitted']}/{a['expected']} ({a['approved']} approved, {a['rejected']} rejected)" in last, last
        assert f["status"] == "finished"


def _png_size_and_colours(path: Path) -> tuple[int, int, int]:
    """Width, height and the number of distinct byte values in the decoded image data (a blank page has few)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def _chromium(*args: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def chromium() -> str:
    if CHROMIUM is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; CI must install Debian's chromium for the browser tests")
        pytest.skip("chromium is not installed (Debian package chromium); CI installs it and runs this test")
    return CHROMIUM


MEASURE = """
<script>
window.addEventListener("load", () => {
  const charts = [...document.querySelectorAll("svg.chart")].map(s => s.getBoundingClientRect());
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify({
    scrollWidth: document.documentElement.scrollWidth,
    charts: charts.map(r => [Math.round(r.width), Math.round(r.height), Math.round(r.right)]),
    tables: [...document.querySelectorAll("table")].map(t => Math.round(t.getBoundingClientRect().right)),
  });
  document.body.appendChild(out);
});
</script>
"""


@pytest.mark.browser
@pytest.mark.parametrize("name", NAMES)
def test_report_in_a_browser(campaigns, chromium, name, tmp_path):
    work, _ = campaigns
    out = cli(work, "report", name)
    assert out.returncode == 0, out.stderr
    page_path = work / "state" / name / "report.html"
    page = page_path.read_text(encoding="utf-8")

    # content: one section per stage with its ranked items, the charts, quality control and spend
    spec_stages = {"small-likert": ["likert"], "small-ranking": ["likert", "ranking"], "small-nuggets": ["nuggets"]}[name]
    for stage in spec_stages:
        assert f'id="stage-{stage}"' in page
    scores = [json.loads(line) for line in (work / "state" / name / "scores.jsonl").read_text().splitlines()]
    scored = [r for r in scores if r["score"] is not None]
    assert f"Results: {len(scored)} items, ranked" in page
    assert page.count('<td class="id">') >= len(scores)  # every item listed (the rest under "all N items")
    top = scores[0]
    assert f'<td class="id">{top["item"]}</td>' in page
    assert "Score distribution" in page and "Scores by rank" in page and "Agreement per worker" in page
    assert "What quality control did" in page and "Spend over time" in page
    assert re.search(r"<td>rewards</td><td class=\"num\">\$\d+\.\d\d</td>", page)
    if name == "small-ranking":
        assert "Ranking uncertainty per batch" in page and "Kendall" in page and "± SE" in page
    else:
        assert "Fleiss" in page
    if name == "small-nuggets":
        assert "on the labels&#39; own scale, 0.0 to 1.0" in page or "labels' own scale, 0.0 to 1.0" in page
    if name == "small-likert":
        assert "labels&#39; own scale, 1.0 to 5.0" in page or "labels' own scale, 1.0 to 5.0" in page
        assert '<span class="tag excluded">excluded</span>' in page  # the constant spammers, marked with a reason

    # the browser's own layout: nothing wider than the window, every chart drawn with a size
    measured_page = tmp_path / "measured.html"
    measured_page.write_text(page.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = _chromium("--window-size=1280,2000", "--dump-dom", measured_page.as_uri())
    m = re.search(r'<pre id="measured">(.*?)</pre>', dom.stdout, flags=re.S)
    assert m, dom.stderr[-2000:]
    measured = json.loads(m.group(1).replace("&quot;", '"'))
    assert measured["scrollWidth"] <= 1280, measured
    assert len(measured["charts"]) >= 3 * len(spec_stages) + 1  # distribution, by rank, per worker; spend
    for width, height, right in measured["charts"]:
        assert width >= 300 and height >= 100 and right <= 1280, measured["charts"]
    assert all(right <= 1280 for right in measured["tables"]), measured["tables"]

    # and the screenshot someone would look at
    keep = os.environ.get("CAMPAIGN_SCREENSHOTS")  # a folder to keep the screenshots in, to look at them
    shot = (Path(keep) if keep else tmp_path) / f"report-{name}.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    _chromium(f"--screenshot={shot}", "--window-size=1280,2000", page_path.as_uri())
    width, height, colours = _png_size_and_colours(shot)
    assert (width, height) == (1280, 2000)
    assert colours > 50, "the screenshot is (nearly) blank"
