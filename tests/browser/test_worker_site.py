"""The worker site in a real browser: sign in, find a HIT, accept it, answer it by mouse or by keyboard,
come back; the answer is checked on the requester side. Hostile texts stay text, and a HIT's own
script cannot reach the worker site. A screenshot of each template lands in the test's tmp folder."""

from __future__ import annotations

import importlib
import json
import urllib.parse
from pathlib import Path

import pytest

from campaign.answer_xml import parse_answer_xml
from campaign.tasks.base import ShownItem, html_question

pytestmark = pytest.mark.browser

ITEMS = ["Plastic bottles take centuries to break down in landfills.",
         "Tap water is tested more often than bottled water.",
         "Bottled water is convenient when travelling.",
         "Recycling rates for bottles remain low in many countries."]
WAIT = 30


def _wait(driver, cond, timeout: float = WAIT):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(cond)


def _post(site, kind: str, texts: list[str], title: str) -> str:
    m = importlib.import_module(f"campaign.tasks.{kind}")  # each kind's module renders its own page
    items = [ShownItem(f"i{n}", t) for n, t in enumerate(texts)]
    question = m.render(items, "Should bottled water be banned?", title)
    t = site.client.call("create_hit_type", Title=title, Description=f"A {kind} task", Reward="0.25",
                         AssignmentDurationInSeconds=1200)
    return site.client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], LifetimeInSeconds=3600,
                            MaxAssignments=3, Question=question)["HIT"]["HITId"]


def _sign_in(driver, site, worker_id: str) -> None:
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()
    code = site.server.add_worker(worker_id)
    driver.get(f"{site.server.endpoint_url}/signin?{urllib.parse.urlencode({'code': code})}")
    driver.find_element(By.ID, "signin").click()
    _wait(driver, lambda d: urllib.parse.urlsplit(d.current_url).path == "/worker")


def _open_hit(driver, site, hit_id: str) -> None:
    """From the list: View the HIT, Accept it, and switch into its frame."""
    from selenium.webdriver.common.by import By

    driver.get(f"{site.server.endpoint_url}/worker")
    link = driver.find_element(By.CSS_SELECTOR, f'a.view[href="/worker/preview?hitId={hit_id}"]')
    row = link.find_element(By.XPATH, "./ancestor::tr").text
    assert "default" in row and "$0.25" in row and "20 min" in row  # requester, reward, time allotted
    link.click()
    driver.find_element(By.ID, "accept").click()
    _wait(driver, lambda d: urllib.parse.urlsplit(d.current_url).path == "/worker/work")
    frame = driver.find_element(By.ID, "hit-frame")
    assert frame.get_attribute("sandbox") == "allow-scripts allow-forms"
    driver.switch_to.frame(frame)
    _wait(driver, lambda d: d.find_elements(By.ID, "submitButton"))


def _finish(driver, site, hit_id: str) -> list[tuple[str, str]]:
    """After the frame's form was submitted: the done page offers Next HIT / Back to list; the answer is read back."""
    from selenium.webdriver.common.by import By

    driver.switch_to.default_content()
    _wait(driver, lambda d: urllib.parse.urlsplit(d.current_url).path == "/worker/done")
    assert "HIT submitted" in driver.find_element(By.TAG_NAME, "h1").text
    assert driver.find_element(By.ID, "back").get_attribute("href").endswith("/worker")
    got = site.client.call("list_assignments_for_hit", HITId=hit_id, AssignmentStatuses=["Submitted"])["Assignments"]
    return parse_answer_xml(sorted(got, key=lambda a: a["SubmitTime"])[-1]["Answer"])


def _shot(driver, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 5000
    shots = Path("/tmp") / "campaign-browser-shots"  # a stable place to look at them by hand
    shots.mkdir(exist_ok=True)
    (shots / path.name).write_bytes(path.read_bytes())
    return path


# -- Likert ---------------------------------------------------------------------------------------------------
def test_likert_by_mouse(driver, site, tmp_path):
    from selenium.webdriver.common.by import By

    hit = _post(site, "likert", ITEMS, "Rate statements (mouse)")
    another = _post(site, "likert", ITEMS[::-1], "Rate more statements")
    driver.delete_all_cookies()
    driver.get(site.server.endpoint_url + "/")
    assert driver.find_element(By.ID, "code") and driver.find_element(By.TAG_NAME, "h1").text == "Sign in"
    _shot(driver, tmp_path, "signin")
    _sign_in(driver, site, "AMOUSELIKERT")
    _shot(driver, tmp_path, "list")
    _open_hit(driver, site, hit)
    want = {}
    for i, fs in enumerate(driver.find_elements(By.CSS_SELECTOR, "fieldset[data-slot]")):
        value = 5 - i % 5
        fs.find_element(By.CSS_SELECTOR, f'input[value="{value}"]').find_element(By.XPATH, "..").click()  # the label
        want[f"rating-{i}"] = str(value)
    driver.switch_to.default_content()
    _shot(driver, tmp_path, "likert")
    driver.switch_to.frame(driver.find_element(By.ID, "hit-frame"))
    driver.find_element(By.ID, "submitButton").click()
    answer = dict(_finish(driver, site, hit))
    assert {k: answer[k] for k in want} == want
    _shot(driver, tmp_path, "done")
    nxt = driver.find_element(By.ID, "next")  # another HIT of the same type is open: "Next HIT" leads to it
    assert nxt.get_attribute("href").endswith(f"/worker/preview?hitId={another}")
    driver.find_element(By.ID, "back").click()
    _wait(driver, lambda d: urllib.parse.urlsplit(d.current_url).path == "/worker")


def test_likert_by_keyboard(driver, site):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    hit = _post(site, "likert", ITEMS, "Rate statements (keyboard)")
    _sign_in(driver, site, "AKEYSLIKERT")
    _open_hit(driver, site, hit)
    first = driver.find_element(By.CSS_SELECTOR, 'input[name="rating-0"]')
    first.send_keys(Keys.SPACE)  # focus the first group and choose its first option (5)
    want = {}
    for i in range(len(ITEMS)):
        steps = i % 3  # 5, 4, 3, 5 ...
        for _ in range(steps):
            driver.switch_to.active_element.send_keys(Keys.ARROW_DOWN)
        want[f"rating-{i}"] = str(5 - steps)
        driver.switch_to.active_element.send_keys(Keys.TAB)
        if i + 1 < len(ITEMS):
            driver.switch_to.active_element.send_keys(Keys.SPACE)
    active = driver.switch_to.active_element
    assert active.get_attribute("id") == "submitButton"
    active.send_keys(Keys.ENTER)
    answer = dict(_finish(driver, site, hit))
    assert {k: answer[k] for k in want} == want


# -- ranking --------------------------------------------------------------------------------------------------
def _order(driver) -> list[str]:
    from selenium.webdriver.common.by import By

    return [li.get_attribute("data-slot") for li in driver.find_elements(By.CSS_SELECTOR, "ol#ranking li")]


def test_ranking_by_mouse_shows_positions(driver, site, tmp_path):
    from selenium.webdriver.common.by import By

    hit = _post(site, "ranking", ITEMS, "Order statements (mouse)")
    _sign_in(driver, site, "AMOUSERANK")
    _open_hit(driver, site, hit)
    positions = driver.execute_script(
        "return Array.from(document.querySelectorAll('ol#ranking li')).map(function (li) {"
        " return getComputedStyle(li, '::before').content; });")
    assert all(p not in ("none", "normal", "") for p in positions), positions  # numbered positions are drawn
    last = driver.find_elements(By.CSS_SELECTOR, "ol#ranking li")[-1]
    for _ in range(len(ITEMS) - 1):  # the last statement to the top, by its "up" button
        last.find_element(By.CSS_SELECTOR, "button.up").click()
    assert _order(driver) == ["3", "0", "1", "2"]
    driver.switch_to.default_content()
    _shot(driver, tmp_path, "ranking")
    driver.switch_to.frame(driver.find_element(By.ID, "hit-frame"))
    driver.find_element(By.ID, "submitButton").click()
    assert dict(_finish(driver, site, hit))["order"] == "3,0,1,2"


def test_ranking_by_keyboard(driver, site):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    hit = _post(site, "ranking", ITEMS, "Order statements (keyboard)")
    _sign_in(driver, site, "AKEYSRANK")
    _open_hit(driver, site, hit)
    first = driver.find_elements(By.CSS_SELECTOR, "ol#ranking li")[0]
    first.send_keys(Keys.ARROW_DOWN)  # focus the first statement, move it down twice
    driver.switch_to.active_element.send_keys(Keys.ARROW_DOWN)
    assert _order(driver) == ["1", "2", "0", "3"]
    driver.find_element(By.ID, "submitButton").send_keys(Keys.ENTER)
    assert dict(_finish(driver, site, hit))["order"] == "1,2,0,3"


# -- nuggets --------------------------------------------------------------------------------------------------
def test_nuggets_by_mouse(driver, site, tmp_path):
    from selenium.webdriver.common.by import By

    hit = _post(site, "nuggets", ITEMS[:2], "Mark nuggets (mouse)")
    _sign_in(driver, site, "AMOUSENUG")
    _open_hit(driver, site, hit)
    driver.find_element(By.CSS_SELECTOR, '.tok[data-s="0"][data-t="0"]').click()
    driver.find_element(By.CSS_SELECTOR, '.tok[data-s="0"][data-t="3"]').click()
    assert len(driver.find_elements(By.CSS_SELECTOR, "#picked li")) == 1
    driver.switch_to.default_content()
    _shot(driver, tmp_path, "nuggets")
    driver.switch_to.frame(driver.find_element(By.ID, "hit-frame"))
    driver.find_element(By.ID, "submitButton").click()
    assert json.loads(dict(_finish(driver, site, hit))["nuggets"]) == [[0, 0, 3]]


def test_nuggets_by_keyboard(driver, site):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    hit = _post(site, "nuggets", ITEMS[:2], "Mark nuggets (keyboard)")
    _sign_in(driver, site, "AKEYSNUG")
    _open_hit(driver, site, hit)
    driver.find_element(By.CSS_SELECTOR, '.tok[data-s="1"][data-t="1"]').send_keys(Keys.ENTER)
    for _ in range(3):
        driver.switch_to.active_element.send_keys(Keys.TAB)
    driver.switch_to.active_element.send_keys(Keys.ENTER)
    assert len(driver.find_elements(By.CSS_SELECTOR, "#picked li")) == 1
    driver.find_element(By.ID, "submitButton").send_keys(Keys.ENTER)
    assert json.loads(dict(_finish(driver, site, hit))["nuggets"]) == [[1, 1, 4]]


# -- hostile content ------------------------------------------------------------------------------------------
HOSTILE = ['<script>window.__pwned = "script"</script>',
           '<img src="x" onerror="window.__pwned = \'img\'">',
           '<a href="javascript:window.__pwned = \'link\'">click me</a>',
           "safe start \u202edesrever\u202c end"]


@pytest.mark.parametrize("kind", ["likert", "ranking", "nuggets"])
def test_hostile_item_texts_stay_text(driver, site, kind):
    from selenium.webdriver.common.by import By

    hit = _post(site, kind, HOSTILE, f"Hostile \u202e{kind}\u202c texts")
    _sign_in(driver, site, f"AHOSTILE{kind.upper()}")
    driver.get(f"{site.server.endpoint_url}/worker")
    assert f"Hostile {kind} texts" in driver.find_element(By.ID, "hits").text  # bidi control removed in the list
    _open_hit(driver, site, hit)
    body = driver.find_element(By.TAG_NAME, "body")
    text = body.text
    assert "window.__pwned" in text or "onerror" in driver.page_source  # shown as text
    for a in driver.find_elements(By.TAG_NAME, "a"):
        a.click() if a.is_displayed() else None
    assert driver.execute_script("return typeof window.__pwned") == "undefined"
    assert driver.find_elements(By.CSS_SELECTOR, "img") == []
    assert [a for a in driver.find_elements(By.TAG_NAME, "a") if "javascript:" in (a.get_attribute("href") or "")] == []
    # the U+202E text is confined to its own statement: the block that holds it ends the override
    holders = driver.execute_script(
        "var all = Array.from(document.body.querySelectorAll('*')).filter(function (e) {"
        " return e.children.length === 0 && e.textContent.indexOf('\\u202e') >= 0; });"
        "return all.map(function (e) { while (e && getComputedStyle(e).display === 'inline'"
        " && getComputedStyle(e).unicodeBidi !== 'isolate') { e = e.parentElement; }"
        " return e.tagName + '|' + getComputedStyle(e).display + '|' + getComputedStyle(e).unicodeBidi; });")
    assert holders, "the U+202E statement is shown"
    for h in holders:
        _, display, bidi = h.split("|")
        assert display in ("block", "flex", "list-item", "inline-block") or bidi == "isolate", holders


@pytest.mark.parametrize("kind", ["likert", "nuggets"])
def test_hostile_stage_instructions_stay_text_in_the_frame(driver, site, kind):
    """A stage's own Markdown instructions with HTML and javascript: links, served like any HIT page."""
    from selenium.webdriver.common.by import By

    from campaign.tasks.base import html_question

    m = importlib.import_module(f"campaign.tasks.{kind}")
    markdown = "**Read this.**\n\n" + "\n\n".join(HOSTILE[:2]) + "\n\n[click me](javascript:window.__pwned='md')"
    page = m.page([ShownItem(f"i{n}", f"Statement number {n} here.") for n in range(3)], "Water", "Own instructions",
                  instructions=markdown)
    t = site.client.call("create_hit_type", Title=f"Own {kind}", Description="d", Reward="0.25", AssignmentDurationInSeconds=1200)
    hit = site.client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], LifetimeInSeconds=3600, MaxAssignments=3,
                           Question=html_question(page))["HIT"]["HITId"]
    _sign_in(driver, site, f"AOWNINSTR{kind.upper()}")
    _open_hit(driver, site, hit)
    box = driver.find_element(By.CSS_SELECTOR, "div.instructions")
    assert box.find_element(By.TAG_NAME, "strong").text == "Read this."
    assert "<script>" in box.text and "onerror" in box.text  # shown as text
    assert box.find_elements(By.TAG_NAME, "a") == [] and driver.find_elements(By.CSS_SELECTOR, "img") == []
    assert driver.execute_script("return typeof window.__pwned") == "undefined"


# -- a HIT's script against the worker site -------------------------------------------------------------------
PROBE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>probe</title></head><body>
<form id="mturk_form" method="post" action="https://www.mturk.com/mturk/externalSubmit">
<input type="hidden" id="assignmentId" name="assignmentId" value=""><input name="x" value="1">
<button type="submit" id="submitButton">Submit</button></form>
<pre id="probe">running</pre>
<script>
(function () {
  var out = {};
  var worker = "WORKER_ORIGIN";
  try { out.parent = String(window.parent.document.body.innerHTML.length); } catch (e) { out.parent = "blocked"; }
  try { out.top_url = String(window.top.location.href); } catch (e) { out.top_url = "blocked"; }
  try { out.cookie = document.cookie === "" ? "empty" : "read:" + document.cookie; } catch (e) { out.cookie = "blocked"; }
  try { out.storage = String(window.localStorage.length); } catch (e) { out.storage = "blocked"; }
  function done() {
    if (out.api !== undefined && out.accept !== undefined && out.relative !== undefined) {
      document.getElementById("probe").textContent = JSON.stringify(out);
    }
  }
  fetch(worker + "/worker/api/hits", {credentials: "include"}).then(function (r) { return r.text(); })
    .then(function (t) { out.api = "read:" + t.slice(0, 80); done(); }, function () { out.api = "blocked"; done(); });
  fetch(worker + "/worker/api/accept", {method: "POST", credentials: "include", headers: {"Content-Type": "application/json"},
        body: JSON.stringify({HITId: "HIT_ID"})}).then(function (r) { out.accept = "status:" + r.status; done(); },
        function () { out.accept = "blocked"; done(); });
  fetch("/worker/api/hits", {credentials: "include"}).then(function (r) { out.relative = "status:" + r.status; done(); },
        function () { out.relative = "blocked"; done(); });
})();
</script></body></html>"""


def test_a_hits_script_cannot_read_the_worker_site_or_call_its_api(driver, site):
    from selenium.webdriver.common.by import By

    # a second HIT the probe tries to accept for the signed-in worker
    target = _post(site, "likert", ITEMS[:1], "Target")
    page = PROBE.replace("WORKER_ORIGIN", site.server.endpoint_url).replace("HIT_ID", target)
    t = site.client.call("create_hit_type", Title="Probe", Description="probe", Reward="0.25", AssignmentDurationInSeconds=1200)
    hit = site.client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], LifetimeInSeconds=3600,
                           Question=html_question(page))["HIT"]["HITId"]
    _sign_in(driver, site, "APROBED")
    _open_hit(driver, site, hit)
    _wait(driver, lambda d: d.find_element(By.ID, "probe").text != "running")
    out = json.loads(driver.find_element(By.ID, "probe").text)
    assert out["parent"] == "blocked" and out["top_url"] == "blocked"
    assert out["cookie"] in ("blocked", "empty") and out["storage"] == "blocked"
    assert out["api"] == "blocked"  # no CORS: the worker API's answer cannot be read
    assert out["accept"] == "blocked" or out["accept"].startswith("status:4")
    assert out["relative"] in ("blocked", "status:404")  # the content origin has no worker API
    assert site.client.call("list_assignments_for_hit", HITId=target)["NumResults"] == 0
    driver.switch_to.default_content()
    # opening the frame's address directly does not give it the worker site's origin either
    src = driver.find_element(By.ID, "hit-frame").get_attribute("src")
    assert urllib.parse.urlsplit(src).netloc != urllib.parse.urlsplit(site.server.endpoint_url).netloc
    driver.get(src)
    _wait(driver, lambda d: d.find_element(By.ID, "probe").text != "running")
    direct = json.loads(driver.find_element(By.ID, "probe").text)
    assert direct["api"] == "blocked" and direct["storage"] == "blocked"  # sandboxed by its CSP even top-level
    assert site.client.call("list_assignments_for_hit", HITId=target)["NumResults"] == 0
