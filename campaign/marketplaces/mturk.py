"""The MTurk Requester API as a `Marketplace`: the built-in marketplace (`local`), the MTurk sandbox and
production, all through the boto3 wrapper `campaign.marketplaces.mturk_client.MarketClient`.

This is the only module of the daemon that names MTurk operations or reads botocore errors; it turns
them into the interface's values and `MarketError`s.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

from campaign.answer_xml import parse_answer_xml
from campaign.marketplaces.base import (
    AlreadyDone,
    Capabilities,
    HitRequest,
    HitType,
    InvalidState,
    MarketError,
    RemoteAssignment,
    RemoteHit,
    TransientError,
)
from campaign.marketplaces.mturk_client import RequesterClient, make_client
from campaign.state import SubmissionStatus
from campaign.tasks.base import html_question

log = logging.getLogger(__name__)

HIT_ID_RE = re.compile(r"\b([A-Z0-9]{30})\b")
TOKEN_LIFETIME = 24 * 3600  # MTurk remembers a UniqueRequestToken for 24 hours
TRANSIENT_CODES = {"ServiceFault", "ThrottlingException", "Throttling", "ServiceUnavailable", "InternalFailure"}
CLOSED_STATUSES = ("Reviewable", "Reviewing", "Disposed")
STATUS = {"Submitted": SubmissionStatus.SUBMITTED, "Approved": SubmissionStatus.APPROVED, "Rejected": SubmissionStatus.REJECTED}
PAGE_SIZE = 100  # what `MarketClient.paginate` asks for
MTURK_MAX_RPS = 20.0


def error_parts(exc: ClientError) -> tuple[str, str, str]:
    """(error code, TurkErrorCode, message) of an MTurk error."""
    resp: Any = exc.response or {}
    err = resp.get("Error", {})
    turk = resp.get("TurkErrorCode") or err.get("TurkErrorCode") or ""
    return err.get("Code", ""), turk, err.get("Message", "") or resp.get("Message", "")


def translate(exc: ClientError | BotoCoreError) -> MarketError:
    if isinstance(exc, BotoCoreError):  # connection trouble: the call may or may not have happened
        return TransientError(str(exc), code=type(exc).__name__)
    code, turk, message = error_parts(exc)
    if code in TRANSIENT_CODES:
        return TransientError(message, code, turk, throttled="Throttl" in code)
    if "already been processed" in message:
        return AlreadyDone(message, code, turk)
    if turk.endswith("InvalidAssignmentState"):
        return InvalidState(message, code, turk)
    return MarketError(message, code, turk)


def _ts(value: Any) -> float | None:
    if value is None or value == "":
        return None
    return value.timestamp() if hasattr(value, "timestamp") else float(value)


def _when(epoch: float) -> datetime:
    return datetime.fromtimestamp(int(epoch), UTC)


class MTurkMarketplace:
    """`Marketplace` over MTurk's Requester API (2017-01-17)."""

    def __init__(self, client: RequesterClient) -> None:
        self.client = client
        self.requests = 0  # requests sent (pages counted one by one), for the daemon's run statistics
        self.requests_by_op: dict[str, int] = {}  # the same, per operation
        self.name = client.marketplace
        self.capabilities = Capabilities(token_lifetime=TOKEN_LIFETIME, sandbox_qualifications=client.marketplace != "mturk")
        self._hit_types: dict[str, str] = {}  # CreateHITType's parameters (as JSON) -> the id it answered

    def __repr__(self) -> str:
        return f"MTurkMarketplace({self.client!r})"

    # -- plumbing --------------------------------------------------------------------------------------
    def _count(self, op: str) -> None:
        self.requests += 1
        self.requests_by_op[op] = self.requests_by_op.get(op, 0) + 1

    def _call(self, op: str, **params: Any) -> dict[str, Any]:
        self._count(op)
        try:
            return self.client.call(op, **params)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc

    def _pages(self, op: str, key: str, **params: Any) -> Iterator[dict[str, Any]]:
        self._count(op)  # the first page; each further page is one more request
        try:
            for n, item in enumerate(self.client.paginate(op, key, **params)):
                if n and n % PAGE_SIZE == 0:
                    self._count(op)
                yield item
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc) from exc

    @staticmethod
    def _hit(h: dict[str, Any], reconciled: bool = False) -> RemoteHit:
        return RemoteHit(hit_id=h["HITId"], annotation=h.get("RequesterAnnotation"), type_id=h.get("HITTypeId"),
                         expires_at=_ts(h.get("Expiration")), closed=h.get("HITStatus") in CLOSED_STATUSES,
                         pending=int(h.get("NumberOfAssignmentsPending", 0) or 0), reconciled=reconciled)

    @staticmethod
    def _assignment(a: dict[str, Any]) -> RemoteAssignment:
        return RemoteAssignment(assignment_id=a["AssignmentId"], worker_id=a["WorkerId"], hit_id=a.get("HITId", ""),
                                status=STATUS.get(a.get("AssignmentStatus", "Submitted"), SubmissionStatus.SUBMITTED),
                                answer=a.get("Answer", ""), accept_time=_ts(a.get("AcceptTime")),
                                submit_time=_ts(a.get("SubmitTime")))

    # -- posting ---------------------------------------------------------------------------------------
    def create_hit_type(self, hit_type: HitType, *, sandbox: bool) -> str:
        """CreateHITType is deterministic on MTurk: identical parameters give the same id."""
        from campaign.quality.qualifications import requirements

        params = dict(Title=hit_type.title, Description=hit_type.description,
                      Reward=str(hit_type.reward), AssignmentDurationInSeconds=hit_type.duration,
                      AutoApprovalDelayInSeconds=hit_type.auto_approval_delay, Keywords=hit_type.keywords,
                      QualificationRequirements=requirements(hit_type.qualifications, sandbox=sandbox)
                      + [{"QualificationTypeId": gid, "Comparator": "DoesNotExist", "ActionsGuarded": "DiscoverPreviewAndAccept"}
                         for gid in hit_type.excluded_groups])
        # the same parameters always give the same id: asked once per process, not on every posting pass
        # (1,164 + 1,178 calls of two daemons at 470,000 propositions)
        key = json.dumps(params, sort_keys=True, default=str)
        known = self._hit_types.get(key)
        if known is None:
            known = self._hit_types[key] = str(self._call("create_hit_type", **params)["HITTypeId"])
        return known

    # -- worker groups (a requester qualification type each; see `WorkerGroups`) -----------------------
    def worker_group(self, name: str) -> str:
        """CreateQualificationType; names are unique per requester, so a second call (say after a crash
        that lost the first answer) is refused and the type is found by name instead."""
        try:
            resp = self._call("create_qualification_type", Name=name, QualificationTypeStatus="Active",
                              Description="Workers who already did this task (kept out of its repeat).")
            return str(resp["QualificationType"]["QualificationTypeId"])
        except TransientError:
            raise
        except MarketError as exc:
            if "AlreadyExists" not in f"{exc.code} {exc.detail}" and "already created" not in exc.message:
                raise
        for qt in self._pages("list_qualification_types", "QualificationTypes", Query=name,
                              MustBeRequestable=False, MustBeOwnedByCaller=True):
            if qt.get("Name") == name:
                return str(qt["QualificationTypeId"])
        raise MarketError(f"qualification type {name!r} exists but could not be found")

    def add_to_group(self, group_id: str, worker_id: str) -> None:
        """AssociateQualificationWithWorker (granting it again only sets the same value again)."""
        self._call("associate_qualification_with_worker", QualificationTypeId=group_id, WorkerId=worker_id,
                   IntegerValue=1, SendNotification=False)

    def create_hit(self, type_id: str, request: HitRequest) -> RemoteHit:
        """CreateHITWithHITType with the token; a repeated token answers HitAlreadyExists naming the HIT,
        which is adopted when its annotation is the draft's (else searched for by annotation)."""
        self._count("create_hit_with_hit_type")
        try:
            resp = self.client.call("create_hit_with_hit_type", HITTypeId=type_id, MaxAssignments=request.max_assignments,
                                    LifetimeInSeconds=request.lifetime, Question=html_question(request.html),
                                    RequesterAnnotation=request.annotation, UniqueRequestToken=request.token)
            return self._hit(resp["HIT"])
        except BotoCoreError as exc:
            raise translate(exc) from exc
        except ClientError as exc:
            code, turk, message = error_parts(exc)
            if not (turk.endswith("HitAlreadyExists") or "HitAlreadyExists" in code):
                raise translate(exc) from exc
            m = HIT_ID_RE.search(message)
            if m:
                existing = self._call("get_hit", HITId=m.group(1))["HIT"]
                if existing.get("RequesterAnnotation") == request.annotation:
                    return self._hit(existing, reconciled=True)
            found = self.find_by_annotation(request.annotation)
            if found is None:
                raise translate(exc) from exc
            return found

    def find_by_annotation(self, annotation: str) -> RemoteHit | None:
        for h in self._pages("list_hits", "HITs"):
            if h.get("RequesterAnnotation") == annotation:
                return self._hit(h, reconciled=True)
        return None

    def get_hit(self, hit_id: str) -> RemoteHit:
        return self._hit(self._call("get_hit", HITId=hit_id)["HIT"])

    def expire_hit(self, hit_id: str, at: float) -> None:
        self._call("update_expiration_for_hit", HITId=hit_id, ExpireAt=_when(at))

    def extend_hit(self, hit_id: str, until: float) -> None:
        self._call("update_expiration_for_hit", HITId=hit_id, ExpireAt=_when(until))

    def add_assignments(self, hit_id: str, count: int, token: str) -> None:
        """`AdditionalAssignments`: `count` more slots, once per `token` (`AlreadyDone` when repeated).

        A fully collected HIT was taken off the reviewable list (`mark_reviewing`), and a HIT in
        Reviewing takes no workers: it is put back (Revert) after the slots are added, also when they
        were added by an earlier call (a retry after a crash), and it may already be back."""
        repeated: AlreadyDone | None = None
        try:
            self._call("create_additional_assignments_for_hit", HITId=hit_id, NumberOfAdditionalAssignments=count,
                       UniqueRequestToken=token)
        except AlreadyDone as exc:
            repeated = exc
        try:
            self._call("update_hit_review_status", HITId=hit_id, Revert=True)
        except MarketError as exc:
            if isinstance(exc, TransientError) or not exc.detail.endswith("InvalidHITState"):
                raise
        if repeated is not None:
            raise repeated

    # -- work ------------------------------------------------------------------------------------------
    def submissions(self, hit_id: str) -> list[RemoteAssignment]:
        return [self._assignment(a) for a in self._pages("list_assignments_for_hit", "Assignments", HITId=hit_id,
                                                          AssignmentStatuses=["Submitted", "Approved", "Rejected"])]

    def reviewable_hits(self, type_ids: Sequence[str] = ()) -> list[str]:
        if not type_ids:
            return [h["HITId"] for h in self._pages("list_reviewable_hits", "HITs")]
        out: dict[str, None] = {}
        for type_id in type_ids:
            out.update((h["HITId"], None) for h in self._pages("list_reviewable_hits", "HITs", HITTypeId=type_id))
        return list(out)

    def mark_reviewing(self, hit_id: str) -> None:
        """Take a fully collected HIT off ListReviewableHITs (UpdateHITReviewStatus, Revert=False)."""
        self._call("update_hit_review_status", HITId=hit_id, Revert=False)

    def get_assignment(self, assignment_id: str) -> RemoteAssignment:
        return self._assignment(self._call("get_assignment", AssignmentId=assignment_id)["Assignment"])

    def answer_fields(self, answer: str) -> list[tuple[str, str]]:
        return parse_answer_xml(answer)

    def approve(self, assignment_id: str, feedback: str | None = None) -> None:
        self._call("approve_assignment", AssignmentId=assignment_id, **({"RequesterFeedback": feedback} if feedback else {}))

    def approve_many(self, assignment_ids: Sequence[str]) -> None:
        for aid in assignment_ids:
            self.approve(aid)

    def reject(self, assignment_id: str, feedback: str) -> None:
        self._call("reject_assignment", AssignmentId=assignment_id, RequesterFeedback=feedback or "Rejected.")

    # -- money and workers -----------------------------------------------------------------------------
    def bonus(self, worker_id: str, assignment_id: str, amount: Decimal, reason: str, token: str) -> None:
        from campaign.money import fmt

        self._call("send_bonus", WorkerId=worker_id, AssignmentId=assignment_id, BonusAmount=fmt(amount),
                   UniqueRequestToken=token, Reason=reason)

    def block(self, worker_id: str, reason: str) -> None:
        self._call("create_worker_block", WorkerId=worker_id, Reason=reason[:1000])

    def balance(self) -> Decimal:
        return Decimal(str(self._call("get_account_balance")["AvailableBalance"]))


def default_max_rps(marketplace: str) -> float:
    """Requests per second when the spec sets none (`schedule: max_rps`): MTurk throttles a requester
    at a few requests per second per operation and answers more with ThrottlingException (retried by
    the client), so 20/s in all is polite there; the built-in marketplace runs in this process's
    machine and is limited only by how fast it answers (0: no limit)."""
    return 0.0 if marketplace == "local" else MTURK_MAX_RPS


def open_mturk(marketplace: str, endpoint_url: str | None = None, *, production_ok: bool = False,
               **options: Any) -> MTurkMarketplace:
    """An MTurk-API marketplace by name (`local`, `mturk-sandbox`, `mturk`); see `make_client`.
    `max_rps=None` (or absent) is the marketplace's default rate (`default_max_rps`). The built-in
    marketplace is spoken to by `campaign.marketplaces.signed_json` (`wire="boto3"`: through boto3
    as MTurk is, e.g. to compare the two)."""
    if options.get("max_rps") is None:
        options["max_rps"] = default_max_rps(marketplace)
    wire = options.pop("wire", "json")
    if marketplace == "local" and wire == "json":  # the built-in one: no boto3 in between
        from campaign.marketplaces.signed_json import open_signed_json

        return MTurkMarketplace(open_signed_json(endpoint_url, **options))
    return MTurkMarketplace(make_client(marketplace, endpoint_url, production_ok=production_ok, **options))



def missing_aws_credentials(marketplace: str, endpoint_url: str | None = None) -> str | None:
    """Why MTurk cannot be used (no AWS credentials in boto3's standard chain), or None. Without this
    check every call fails with NoCredentialsError, which the steps treat as passing trouble."""
    import boto3  # type: ignore[import-untyped]

    if boto3.session.Session().get_credentials() is not None:
        return None
    return (f"marketplace {marketplace!r} needs AWS credentials of an MTurk requester account and none were found "
            "(set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with ~/.aws/credentials)")
