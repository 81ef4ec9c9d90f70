"""The marketplace's operations and life cycle, on top of `db.Database`, split by role.

`Engine` joins the role mixins; everything outside the package imports from here.
"""

from __future__ import annotations

from campaign.market.engine.assignments import AssignmentOps
from campaign.market.engine.base import SANDBOX_BALANCE, EngineBase, WorkerError, cents, dollars, new_id
from campaign.market.engine.hits import HITOps
from campaign.market.engine.qualifications import QualificationOps
from campaign.market.engine.questions import check_question, question_parts
from campaign.market.engine.workers import WorkerSide

__all__ = ["SANDBOX_BALANCE", "Engine", "EngineBase", "WorkerError", "cents", "check_question", "dollars", "new_id",
           "question_parts"]


class Engine(HITOps, AssignmentOps, QualificationOps, WorkerSide):
    """The whole marketplace: requester operations are `op_<Operation>`, worker calls `w_<name>`."""
