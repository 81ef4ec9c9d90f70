"""From the quality policy's decisions on single HITs to one decision on a Prolific submission.

A Prolific submission is a bundle of HITs done by one participant, and Prolific approves or rejects it
whole. The rules: wait until every HIT of the bundle has been decided; reject only when every HIT in it
was rejected by the policy (whose own rule already needs two kinds of evidence); otherwise approve, and
the bad HITs' judgments stay excluded from the scores. A bundle mixing good and bad work is paid: the
person did some of the work, and Prolific's reviewers expect rejection only for clear failures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

REJECTION_CATEGORY = "LOW_EFFORT"
NO_WORK_CATEGORY = "NO_CODE"
MESSAGE_MIN = 100


@dataclass(frozen=True)
class Verdict:
    action: str  # "wait" | "approve" | "reject"
    category: str | None = None
    message: str | None = None


def rejection_message(reasons: Sequence[str]) -> str:
    """A message of at least Prolific's 100 characters that tells the participant what was wrong."""
    why = "; ".join(dict.fromkeys(r for r in reasons if r)) or "the answers failed the task's quality checks"
    text = (f"Thank you for taking part. We could not accept this submission because {why}. "
            "Every HIT in it was checked against other participants' answers and the check statements.")
    return text if len(text) >= MESSAGE_MIN else text + " " + "Please contact us through Prolific if you think this is wrong."


def bundle_verdict(decisions: Sequence[str | None], reasons: Sequence[str] = ()) -> Verdict:
    """`decisions`: per HIT of the bundle, "approve", "reject" or None (not decided yet)."""
    if not decisions or any(d is None for d in decisions):
        return Verdict("wait")
    if all(d == "reject" for d in decisions):
        return Verdict("reject", REJECTION_CATEGORY, rejection_message(reasons))
    return Verdict("approve")


def no_work_verdict() -> Verdict:
    """A submission completed on Prolific (AWAITING REVIEW, so it can record nothing more) with no answer
    recorded on the task site: the place was completed without doing the task (a leaked or guessed
    completion code). Prolific's rules reject such a submission as NO_CODE; left undecided, Prolific
    would approve and charge it on its own after its auto-approval delay."""
    message = ("Thank you for taking part. We could not accept this submission because no answer to any of the "
               "study's tasks was recorded for it: the study was completed without doing the task.")
    return Verdict("reject", NO_WORK_CATEGORY, message if len(message) >= MESSAGE_MIN else rejection_message(()))


def places_needed(assignments_needed: int, bundle: int) -> int:
    """Places for a study whose submissions each do `bundle` HIT assignments."""
    if bundle < 1:
        raise ValueError("a bundle holds at least one HIT")
    return -(-assignments_needed // bundle)
