"""`campaign preview` in Debian's chromium: each stage's page of every shipped spec opened from the
files the command wrote, the HIT in its sandboxed frame filled in and submitted as a worker would, the
answer the preview shows parsed by the stage's kind (so it is one the real HIT would accept); and the
command leaves no state folder behind."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from campaign.preview import PREVIEW_ASSIGNMENT, write_previews
from campaign.spec import load_spec
from campaign.tasks import get as get_kind
from tests.support.cli import run_campaign
from tests.support.paths import ROOT

pytestmark = pytest.mark.browser

SPECS = [ROOT / "campaigns.yaml", *sorted((ROOT / "examples").glob("*.yaml"))]


def _wait(driver, cond, timeout: float = 15.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond(driver)
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("timed out")


def _fill(driver, kind: str) -> None:
    """What a worker does in the HIT's form, kind by kind (the page is the kind's own)."""
    from selenium.webdriver.common.by import By

    if kind == "likert":
        for i, fs in enumerate(driver.find_elements(By.CSS_SELECTOR, "fieldset[data-slot]")):
            fs.find_element(By.CSS_SELECTOR, f'input[value="{1 + i % 5}"]').find_element(By.XPATH, "..").click()
    elif kind == "ranking":
        driver.find_elements(By.CSS_SELECTOR, "#ranking li .down")[0].click()
        driver.find_elements(By.CSS_SELECTOR, "#ranking li .up")[-1].click()
    elif kind == "nuggets":
        sentence = next(p for p in driver.find_elements(By.CSS_SELECTOR, "p.sentence")
                        if len(p.find_elements(By.CSS_SELECTOR, ".tok")) >= 4)
        toks = sentence.find_elements(By.CSS_SELECTOR, ".tok")
        toks[0].click()
        toks[3].click()
    else:  # pragma: no cover - a new kind needs its worker here
        raise AssertionError(f"no worker for kind {kind}")


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda p: p.name)
def test_preview_pages_are_completed_like_the_real_hit(driver, spec_path, tmp_path):
    from selenium.webdriver.common.by import By

    out = tmp_path / "preview"
    run = run_campaign("preview", "--config", spec_path, "--out", out, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    spec = load_spec(spec_path)
    stages = [(c, s) for c in spec.campaigns for s in c.stages]
    pages = sorted(p for p in out.glob("*.html") if not p.name.endswith(".hit.html") and p.name != "index.html")
    assert len(pages) == len(stages)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["preview"]  # no state folder, nothing else
    previews = {(p.campaign, p.stage): p for p in write_previews(spec.campaigns, tmp_path / "again")}
    for c, stage in stages:
        p = previews[(c.name, stage.name)]
        assert (out / p.hit.name).read_text() == p.hit.read_text()  # the command and the library agree
        driver.get((out / p.page.name).as_uri())
        note = driver.find_element(By.ID, "preview-note")
        marked = [li.get_attribute("data-key") for li in note.find_elements(By.CSS_SELECTOR, "li.trap")]
        assert marked == [it.key for it in p.items if it.is_trap]
        if stage.traps.share > 0:
            assert marked, f"{c.name}/{stage.name}: a stage with traps previews a HIT with one"
        frame = driver.find_element(By.ID, "hit-frame")
        assert frame.get_attribute("sandbox") == "allow-scripts allow-forms"
        driver.switch_to.frame(frame)
        _wait(driver, lambda d: d.find_elements(By.ID, "submitButton"))
        assert driver.find_element(By.ID, "submitButton").is_enabled()  # an accepted assignment, not a preview
        _fill(driver, stage.kind)
        driver.find_element(By.ID, "submitButton").click()
        driver.switch_to.default_content()
        _wait(driver, lambda d: d.find_element(By.ID, "answer-box").is_displayed())
        fields = [tuple(f) for f in json.loads(driver.find_element(By.ID, "answer-json").text)]
        assert ("assignmentId", PREVIEW_ASSIGNMENT) in fields
        assert driver.find_element(By.ID, "answer-action").text.endswith("/mturk/externalSubmit")
        judgments = get_kind(stage.kind).parse(stage, fields, list(p.items))  # InvalidAnswer fails the test
        assert judgments
        shots = Path("/tmp") / "campaign-browser-shots"
        shots.mkdir(exist_ok=True)
        driver.save_screenshot(str(shots / f"preview-{c.name}-{stage.name}.png"))
