"""A Prolific participant in a real browser: lands on the study URL, does a bundle of two Likert HITs in
the sandboxed frame (answers checked on the requester side), is sent back to Prolific with the study's
completion code; the same link with another participant's id shows nothing to do."""

from __future__ import annotations

import urllib.parse
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.marketplaces.base import HitRequest
from campaign.prolific.emulator.participant import add_participant
from campaign.prolific.study import ProlificConfig
from campaign.tasks import likert
from campaign.tasks.base import ShownItem
from tests.browser.test_worker_site import ITEMS, _shot, _wait
from tests.prolific.support import adapter_stack, rating_type

pytestmark = [pytest.mark.browser, pytest.mark.prolific]

COMPLETE = "http://127.0.0.1:9/submissions/complete"  # nothing listens there: the URL is what counts


def test_a_participant_does_a_bundle_and_goes_back_with_the_code(driver, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    def configure(url: str, _api: object) -> ProlificConfig:
        return ProlificConfig(public_url=url, bundle=2, estimated_minutes=10, reward=Decimal("1.50"), completion_url=COMPLETE)

    with adapter_stack(tmp_path, configure) as st:
        t = rating_type(st.market)
        hostile = "<script>alert(1)</script> & <b>bold</b>"
        for i in range(2):
            items = [ShownItem(f"s{i}-{j}", text) for j, text in enumerate([hostile, *ITEMS[i:i + 2]])]
            page = likert.page(items, "Should bottled water be banned?", "Rate how important each statement is")
            st.market.create_hit(t, HitRequest(html=page, max_assignments=1, lifetime=86400, annotation=f"b{i}", token=f"b{i}"))
        st.market.refill(t, st.market.places_wanted()[t])
        study_id = st.studies.study(t).study_id  # type: ignore[union-attr]
        alice, mallory = add_participant(st.em.root_url, st.em.token), add_participant(st.em.root_url, st.em.token)
        sub, url = alice.start(study_id)

        # someone else's id in Alice's link: no task, and nothing changes
        driver.get(url.replace(alice.id, mallory.id))
        assert driver.find_element(By.TAG_NAME, "h1").text == "Not available"
        assert not driver.find_elements(By.TAG_NAME, "iframe")
        _shot(driver, tmp_path, "prolific-refused")

        driver.get(url)
        answered = []
        for n in (1, 2):
            _wait(driver, lambda d, n=n: f"Task {n} of 2" in d.find_element(By.TAG_NAME, "body").text)
            frame = driver.find_element(By.TAG_NAME, "iframe")
            assert frame.get_attribute("sandbox") == "allow-scripts allow-forms"
            driver.switch_to.frame(frame)
            _wait(driver, lambda d: d.find_elements(By.ID, "submitButton"))
            assert hostile in driver.find_element(By.TAG_NAME, "body").text  # shown as text, not run
            for i, fs in enumerate(driver.find_elements(By.CSS_SELECTOR, "fieldset[data-slot]")):
                fs.find_element(By.CSS_SELECTOR, f'input[value="{5 - i}"]').find_element(By.XPATH, "..").click()
            if n == 1:
                driver.switch_to.default_content()
                _shot(driver, tmp_path, "prolific-task")
                driver.switch_to.frame(driver.find_element(By.TAG_NAME, "iframe"))
            driver.find_element(By.ID, "submitButton").click()
            driver.switch_to.default_content()
            # the frame's form posts on its own: wait until the task site has recorded it, then move on
            _wait(driver, lambda d, n=n: len(st.door._db.execute(
                "SELECT assignment_id FROM served WHERE state='submitted'").fetchall()) == n)
            answered += [a for a, in st.door._db.execute("SELECT assignment_id FROM served WHERE state='submitted'")
                         if a not in answered]
            driver.find_element(By.LINK_TEXT, "continue").click()

        # the bundle is done: back to Prolific with the study's code
        _wait(driver, lambda d: d.current_url.startswith(COMPLETE))
        code = urllib.parse.parse_qs(urllib.parse.urlsplit(driver.current_url).query)["cc"][0]
        assert code == st.studies.study(t).completion_code  # type: ignore[union-attr]
        assert alice.complete(sub, code) == "AWAITING REVIEW"
        for aid in answered:
            got = st.market.get_assignment(aid)
            assert got.worker_id == "AP" + alice.id.upper() and got.status == "submitted"
            assert dict(st.market.answer_fields(got.answer))["rating-0"] == "5"
