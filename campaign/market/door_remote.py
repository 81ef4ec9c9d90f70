"""The Prolific door of a marketplace served by `campaign market serve --prolific-door`, as daemons on
other processes (or machines) use it.

Several daemons sharing one store must share one task site: the HITs, the door's table of which
submission holds which assignment, and the seats (study -> HIT type) outlive any one daemon. So the door
runs in the marketplace's own process, mounted on its worker site exactly as a daemon mounts it on its
in-process marketplace, with its table in the marketplace's state folder (`prolific-site/`), and every
daemon reaches it through `RemoteDoor`: the methods `ProlificMarketplace` calls, sent to the requester
endpoint (`POST /`) as operations `ProlificDoor.<Name>` signed with the requester's key (the same SigV4
the MTurk API uses; nobody without the requester's secret can write a seat or read who did what).
A daemon that dies leaves the door serving; the one that takes its campaigns over finds the same door.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import TYPE_CHECKING, Any

from campaign.market.protocol import ApiError
from campaign.prolific.gate import StudySeat

if TYPE_CHECKING:
    pass

TARGET_PREFIX = "ProlificDoor."
OPERATIONS = ("AddSeat", "GetSeat", "GetServedCounts", "GetCouldServe", "ListAssignmentsOf", "GetSubmissionOf", "Release",
              "ListSubmissions")


class DoorOperations:
    """The marketplace side: one operation of a signed request, on the door mounted here."""

    def __init__(self, door: Any) -> None:
        self.door = door

    def handle(self, target: str, params: dict[str, Any]) -> dict[str, Any]:
        op = target[len(TARGET_PREFIX):]
        d = self.door
        try:
            if op == "AddSeat":
                s = params["Seat"]
                d.add_seat(StudySeat(str(s["study_id"]), str(s["hit_type_id"]), int(s["bundle"]), str(s["completion_code"]),
                                     str(s["completion_url"])), stage=str(params["Stage"]))
                return {}
            if op == "GetSeat":
                seat = d.seat(str(params["StudyId"]))
                return {"Seat": None if seat is None else {"study_id": seat.study_id, "hit_type_id": seat.hit_type_id,
                                                           "bundle": seat.bundle, "completion_code": seat.completion_code,
                                                           "completion_url": seat.completion_url}}
            if op == "GetServedCounts":
                return {"Counts": {k: list(v) for k, v in d.served_counts(str(params["StudyId"])).items()}}
            if op == "GetCouldServe":
                return {"CouldServe": bool(d.could_serve(str(params["StudyId"]), [str(p) for p in params["Participants"]]))}
            if op == "ListAssignmentsOf":
                return {"Assignments": d.assignments_of(str(params["SubmissionId"]))}
            if op == "GetSubmissionOf":
                found = d.submission_of(str(params["AssignmentId"]))
                return {"Submission": list(found) if found else None}
            if op == "Release":
                return {"Released": d.release(str(params["SubmissionId"]))}
            if op == "ListSubmissions":
                return {"Submissions": [list(x) for x in d.submissions()]}
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(400, {"__type": "com.amazonaws.mturk#ParameterValidationError",
                                 "Message": f"{op}: malformed parameters ({type(exc).__name__}: {exc})"}) from None
        raise ApiError(400, {"__type": "UnknownOperationException", "Message": f"no door operation {op!r}"})


class RemoteDoorError(Exception):
    """The door answered with an error (or not at all): the caller's step fails and runs again."""


class RemoteDoor:
    """What `ProlificMarketplace` asks of a door, asked of the one a `campaign market serve` runs."""

    def __init__(self, endpoint: str, access_key_id: str, secret_access_key: str, timeout: float = 30.0) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._key = access_key_id
        self._secret = secret_access_key
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"RemoteDoor({self.endpoint})"  # never the key

    def close(self) -> None:
        """Nothing held: the door is the marketplace's."""

    def _call(self, op: str, params: dict[str, Any]) -> dict[str, Any]:
        from campaign.market.auth import sign_headers
        from campaign.web.loopback import open_url

        url = self.endpoint + "/"
        body = json.dumps(params).encode("utf-8")
        host = urllib.parse.urlsplit(url).netloc
        headers = sign_headers(url, body, {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": TARGET_PREFIX + op,
                                           "Host": host}, self._key, self._secret)
        try:
            status, _, raw = open_url("POST", url, headers, body, self.timeout)
        except OSError as exc:
            raise RemoteDoorError(f"the task site's door at {self.endpoint} did not answer {op}: {exc}") from None
        try:
            answer = json.loads(raw or b"{}")
        except ValueError:
            answer = {}
        if status != 200 or not isinstance(answer, dict):
            message = answer.get("Message") if isinstance(answer, dict) else None
            raise RemoteDoorError(f"the task site's door at {self.endpoint} refused {op} ({status}): {message or raw[:200]!r}")
        return answer

    def add_seat(self, seat: StudySeat, stage: str) -> None:
        self._call("AddSeat", {"Seat": {"study_id": seat.study_id, "hit_type_id": seat.hit_type_id, "bundle": seat.bundle,
                                        "completion_code": seat.completion_code, "completion_url": seat.completion_url},
                               "Stage": stage})

    def seat(self, study_id: str) -> StudySeat | None:
        s = self._call("GetSeat", {"StudyId": study_id})["Seat"]
        if s is None:
            return None
        return StudySeat(str(s["study_id"]), str(s["hit_type_id"]), int(s["bundle"]), str(s["completion_code"]),
                         str(s["completion_url"]))

    def served_counts(self, study_id: str) -> dict[str, tuple[int, int]]:
        counts = self._call("GetServedCounts", {"StudyId": study_id})["Counts"]
        return {str(k): (int(v[0]), int(v[1])) for k, v in counts.items()}

    def could_serve(self, study_id: str, participant_ids: Any) -> bool:
        return bool(self._call("GetCouldServe", {"StudyId": study_id, "Participants": sorted(participant_ids)})["CouldServe"])

    def assignments_of(self, submission_id: str) -> list[str]:
        return [str(a) for a in self._call("ListAssignmentsOf", {"SubmissionId": submission_id})["Assignments"]]

    def submission_of(self, assignment_id: str) -> tuple[str, str] | None:
        found = self._call("GetSubmissionOf", {"AssignmentId": assignment_id})["Submission"]
        return (str(found[0]), str(found[1])) if found else None

    def release(self, submission_id: str) -> list[str]:
        return [str(a) for a in self._call("Release", {"SubmissionId": submission_id})["Released"]]

    def submissions(self) -> list[tuple[str, str]]:
        return [(str(a), str(b)) for a, b in self._call("ListSubmissions", {})["Submissions"]]
