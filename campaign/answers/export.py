"""The answers export: one row per answer per item, read from the store (`campaign export NAME --answers`).

A row is one label a worker gave an item in one assignment, with where it came from (campaign, stage,
kind, HIT, assignment, worker), when and how long (`submitted_at` in UTC, `seconds` from accepting to
submitting) and what became of it (`status` of the assignment, `excluded` by quality control, `trap`,
and `kept`: whether the label counts for the scores). The label columns come from the stage's task kind
(`TaskKind.answer_labels`): a Likert rating, a ranking position, a nugget span as word offsets within
its sentence. So the kept rows of a stage give its scores back, and the file is `campaign aggregate`'s
input as it is (it reads columns by name and only the kept rows).

Worker ids (Prolific participants included: their task-site id carries the participant id) are replaced
by the campaign's pseudonyms (`campaign.answers.pseudonyms`) unless the caller asks for raw ids.
Answers that could not be read (invalid) hold no label and are not rows.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from sqlmodel import col, select

from campaign import tasks
from campaign.answers.pseudonyms import campaign_secret, pseudonym
from campaign.metrics.reliability import REPEAT_PREFIX
from campaign.state import AssignmentStatus
from campaign.store import AssignmentRow, CampaignRow, JudgmentRow, Store
from campaign.tasks.base import TRAP_PREFIX
from campaign.tasks.kind import ANSWER_LABEL_COLUMNS

HEAD = ("campaign", "stage", "kind", "hit", "assignment", "worker", "item")
TAIL = ("submitted_at", "seconds", "status", "excluded", "trap", "kept")
COLUMNS = HEAD + ANSWER_LABEL_COLUMNS + TAIL
FORMATS = ("tsv", "csv", "jsonl")
KEPT_STATUS = AssignmentStatus.APPROVED  # as campaign.readmodel.scores.counted_judgments: only approved work counts


def _iso(ts: float | None) -> str | None:
    if ts is None or not math.isfinite(ts):
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds(accept: float | None, submit: float | None) -> float | None:
    if accept is None or submit is None or not (math.isfinite(accept) and math.isfinite(submit)) or submit < accept:
        return None
    return round(submit - accept, 1)


def answer_rows(store: Store, campaign: str, *, raw_ids: bool = False) -> Iterator[dict[str, Any]]:
    """Every label of the campaign's readable answers, by stage (spec order), HIT, assignment and the
    order the HIT showed its items. Values are plain JSON types (no NaN): None where nothing is known."""
    with store.session() as s:
        row = s.get(CampaignRow, campaign)
        if row is None:
            raise KeyError(campaign)
        stages = [(st["name"], st["kind"]) for st in json.loads(row.spec_json).get("stages", [])]
    secret = None if raw_ids else campaign_secret(store, campaign)
    names: dict[str, str] = {}

    def who(worker_id: str) -> str:
        if secret is None:
            return worker_id
        if worker_id not in names:
            names[worker_id] = pseudonym(secret, worker_id)
        return names[worker_id]

    for stage, kind_name in stages:
        kind = tasks.get(kind_name)
        with store.session() as s:
            rows = s.exec(
                select(col(AssignmentRow.hit_key), col(JudgmentRow.assignment_id), col(JudgmentRow.worker_id),  # type: ignore[call-overload]
                       col(JudgmentRow.item_key), col(JudgmentRow.value), col(JudgmentRow.extra), col(JudgmentRow.excluded),
                       col(AssignmentRow.status), col(AssignmentRow.accept_time), col(AssignmentRow.submit_time))
                .join(AssignmentRow, col(AssignmentRow.assignment_id) == col(JudgmentRow.assignment_id))
                .where(JudgmentRow.campaign == campaign, JudgmentRow.stage == stage)
                .order_by(col(AssignmentRow.hit_key), col(JudgmentRow.assignment_id), col(JudgmentRow.id))
            ).all()
        for hit_key, aid, worker, item, value, extra, excluded, status, accept, submit in rows:
            trap = item.startswith(TRAP_PREFIX)
            kept = status == KEPT_STATUS and not excluded and not trap and not hit_key.startswith(REPEAT_PREFIX)
            base = {"campaign": campaign, "stage": stage, "kind": kind_name, "hit": hit_key, "assignment": aid,
                    "worker": who(worker), "item": item}
            tail = {"submitted_at": _iso(submit), "seconds": _seconds(accept, submit), "status": status,
                    "excluded": bool(excluded), "trap": trap, "kept": kept}
            for labels in kind.answer_labels(value, json.loads(extra) if extra else {}):
                yield {**base, **{c: labels.get(c) for c in ANSWER_LABEL_COLUMNS}, **tail}


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _clean(value: Any) -> Any:
    """Text for a tab-separated cell: no tab or line break can split a row (item keys and worker ids
    come from outside); other values as they are."""
    if isinstance(value, str):
        return value.replace("\t", " ").replace("\r", " ").replace("\n", " ")
    return value


def render(rows: Iterator[dict[str, Any]], fmt: str) -> Iterator[str]:
    """The rows as text in `fmt`: a header then one line per row (tsv, csv), or one JSON object per line
    (jsonl, strict JSON: no NaN)."""
    if fmt == "jsonl":
        for r in rows:
            yield json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n"
        return
    if fmt not in ("tsv", "csv"):
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    buf = io.StringIO()
    writer = (csv.writer(buf, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_NONE, escapechar=None, quotechar=None)
              if fmt == "tsv" else csv.writer(buf, lineterminator="\n"))
    writer.writerow(COLUMNS)
    for r in rows:
        writer.writerow([_cell(_clean(r[c]) if fmt == "tsv" else r[c]) for c in COLUMNS])
        if buf.tell() > 1 << 16:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()
