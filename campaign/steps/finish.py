"""Finishing: when every stage is done, the last stage's task kind writes the export and the campaign
turns `finished`.

The export comes from `TaskKind.export` over the store (`campaign.readmodel.scores`), is written
atomically, and is byte-stable for a given spec and seed.
"""

from __future__ import annotations

import json
import logging
import threading

from sqlmodel import select

from campaign.outfile import atomic_write
from campaign.readmodel.scores import write_scores
from campaign.state import CampaignStatus
from campaign.steps.context import Context
from campaign.steps.stages import all_done
from campaign.steps.study_state import studies_over
from campaign.store import CampaignRow, WorkerRow
from campaign.tasks import get as get_kind

log = logging.getLogger(__name__)

# One campaign's export at a time in a daemon: an export reads and aggregates its whole last stage, and
# campaigns started together finish together (at 470,000 propositions, 20 campaigns a daemon, each
# daemon's size rose by ~40 MiB in the last 3 minutes, while they finished on four pass threads at
# once). Most of an export is Python under the GIL, so they gained little from running side by side.
_EXPORTING = threading.Lock()


def finish_if_done(ctx: Context) -> bool:
    """When every stage is done, write the last stage's export and mark the campaign finished."""
    with ctx.store.session() as s:
        camp = s.get(CampaignRow, ctx.name)
        if camp is not None and camp.status == CampaignStatus.FINISHED:
            return True
    if not all_done(ctx) or not studies_over(ctx):  # nothing may still be paid for a place
        return False
    last = ctx.campaign.stages[-1]
    with _EXPORTING:
        export = get_kind(last.kind).export(last, ctx.data)
        out = ctx.out_dir()
        csv_path, _ = write_scores(out, export.rows, export.columns)
        for name, text in sorted(export.files.items()):
            atomic_write(out / name, text)
    if export.competence:
        _record_competence(ctx, export.competence)
    extra = f"; {export.summary}" if export.summary else ""
    with ctx.store.session() as s:
        camp = s.get(CampaignRow, ctx.name)
        assert camp is not None
        camp.status = CampaignStatus.FINISHED
        camp.finished_at = ctx.clock.now()
        s.add(camp)
        ctx.store.event(ctx.name, "finished", f"{len(export.rows)} items scored{extra}; written to {csv_path}", session=s)
    return True


def _record_competence(ctx: Context, competence: dict[str, float]) -> None:
    """MACE competence (or any per-worker figure a kind's export yields) joins the other evidence."""
    with ctx.store.session() as s:
        for w in s.exec(select(WorkerRow).where(WorkerRow.campaign == ctx.name)).all():
            if w.worker_id in competence:
                ev = json.loads(w.evidence) if w.evidence else {}
                ev["competence"] = round(competence[w.worker_id], 4)
                w.evidence = json.dumps(ev, sort_keys=True)
                s.add(w)
