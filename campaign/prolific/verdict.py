"""From the quality policy's decisions on single HITs to one decision on a Prolific submission.

A Prolific submission is a bundle of HITs done by one participant, and Prolific approves or rejects it
whole, by its own rules (`campaign.prolific.checks`): a rejection only for failed fair attention checks
(`FAILED_CHECK`: as many failed as the study's length requires), for exceptionally fast completion
(`TOO_QUICKLY`) or for no work at all (`NO_CODE`), never for disagreeing with other participants. The
rules: wait until every HIT of the bundle has been decided on the task site; then reject for failed
checks, else for speed, else approve. What the quality policy decided on single HITs (exclusions on
agreement, rejections of spam) stays on the task site: those judgments are left out of the scores and
the submission is paid. Each rejection carries one message of its own (at least Prolific's 100
characters), written from the facts, never from other messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from campaign.prolific.checks import FAILED_CHECK, TOO_QUICKLY, CheckCount, duration_text

NO_WORK_CATEGORY = "NO_CODE"
MESSAGE_MIN = 100


@dataclass(frozen=True)
class Verdict:
    action: str  # "wait" | "approve" | "reject"
    category: str | None = None
    message: str | None = None


def _long_enough(text: str) -> str:
    """Prolific refuses a rejection message under 100 characters."""
    return text if len(text) >= MESSAGE_MIN else text + " Please contact us through Prolific if you think this is wrong."


def rejection_message(reasons: Sequence[str]) -> str:
    """A message of at least 100 characters naming plain `reasons` (short phrases, not other messages):
    for a researcher's own decision sent through `ProlificStudies.decide`."""
    why = "; ".join(dict.fromkeys(r for r in reasons if r)) or "it did not follow the study's instructions"
    return _long_enough(f"Thank you for taking part. We could not accept this submission because {why}.")


def failed_check_message(checks: CheckCount) -> str:
    """One message for a submission rejected for failed attention checks."""
    return _long_enough(
        f"Thank you for taking part. This submission is rejected because {checks.failed} of its {checks.seen} "
        "attention checks were not answered as they asked: each was a statement that said itself which answer to "
        "give (for example 'rate it 1'). Prolific's policy allows a rejection for failed attention checks.")


def too_quick_message(seconds: float, expected: float, share: Decimal) -> str:
    """One message for a submission rejected as exceptionally fast."""
    return _long_enough(
        f"Thank you for taking part. This submission is rejected because it was completed in {duration_text(seconds)}, "
        f"less than {float(share):.0%} of the {duration_text(expected)} the study takes, too quickly for the "
        "statements to have been read. Prolific's policy allows a rejection for exceptionally fast completion.")


NO_CHECKS = CheckCount()


def bundle_verdict(decisions: Sequence[str | None], checks: CheckCount = NO_CHECKS, needed: int = 2,
                   quick: tuple[float, float, Decimal] | None = None) -> Verdict:
    """`decisions`: per HIT of the bundle, "approve", "reject" or None (not decided yet); `checks`: the
    bundle's attention checks; `needed`: failed checks that allow a rejection (`checks.checks_needed`);
    `quick`: (seconds taken, expected seconds, share) when the submission was exceptionally fast."""
    if not decisions or any(d is None for d in decisions):
        return Verdict("wait")
    if checks.failed >= max(1, needed):
        return Verdict("reject", FAILED_CHECK, failed_check_message(checks))
    if quick is not None:
        return Verdict("reject", TOO_QUICKLY, too_quick_message(*quick))
    return Verdict("approve")


def no_work_verdict() -> Verdict:
    """A submission completed on Prolific (AWAITING REVIEW, so it can record nothing more) with no answer
    recorded on the task site: the place was completed without doing the task (a leaked or guessed
    completion code). Prolific's rules reject such a submission as NO_CODE; left undecided, Prolific
    would approve and charge it on its own after its auto-approval delay."""
    message = ("Thank you for taking part. We could not accept this submission because no answer to any of the "
               "study's tasks was recorded for it: the study was completed without doing the task.")
    return Verdict("reject", NO_WORK_CATEGORY, _long_enough(message))


def places_needed(assignments_needed: int, bundle: int) -> int:
    """Places for a study whose submissions each do `bundle` HIT assignments."""
    if bundle < 1:
        raise ValueError("a bundle holds at least one HIT")
    return -(-assignments_needed // bundle)
