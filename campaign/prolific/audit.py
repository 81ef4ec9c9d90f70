"""After a Prolific campaign (or a crash and restart of one): did anything happen twice, or go unbooked?

Prolific gives no request tokens and pays a bonus batch again on every call, so "exactly once" rests on
the adapter's journal (in the store); this audit checks it from the other side, against what the service
and the task site actually hold:

- `decided_twice`: a submission that received more than one decision (the emulator's transition log,
  which keeps repeats Prolific would silently ignore), or whose reward was charged more than once;
- `bonus_paid_twice`: a submission holding more bonus payments than the journal ever meant to pay it
  (its `bonus_payments` against the journal's bonus intents, amount by amount), or a bonus batch paid
  more than once;
- `served_twice`: a participant given the same HIT twice to work on (the door's table, and the task
  site's own assignments of Prolific workers, which survive a crash between the two); a slot that
  expired or was returned unanswered does not count, the door may give that HIT back to them;
- `ledger_mismatch`: the ledger's spending (charges and bonus charges) differs, to the cent, from what
  the service charged for the campaign's studies;
- `unknown_hit`: a HIT in the campaign's store that the task site's marketplace does not have;
- `cost_mismatch`: a finished study whose reconciliation (`campaign.steps.studies.reconcile_costs`, kept
  in the store) found the ledger's figure different from what the service said it charged, or whose
  service figure is not what the emulator's own charges for the study add up to.

`gather` only reads (the servers' SQLite files opened read-only, one store session); `check` is a pure
function of what was gathered, so each finding is tested on a crafted state.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from sqlmodel import col, select

from campaign.state import Keys, LedgerKind
from campaign.store import HitRow, KVRow, LedgerRow, ProlificBonusRow, ProlificStudyRow, Store

WORKER_PREFIX = "AP"  # task-site worker ids of Prolific participants (`Admission.worker_id`)


@dataclass(frozen=True)
class Finding:
    check: str  # decided_twice | bonus_paid_twice | served_twice | ledger_mismatch | unknown_hit | cost_mismatch
    subject: str
    detail: str


@dataclass
class AuditState:
    """What the audit reads, reduced to plain data. Money in minor units (pence/cents)."""

    studies: set[str] = field(default_factory=set)  # the campaign's study ids (the journal)
    decisions: list[tuple[str, str, str]] = field(default_factory=list)  # (submission, action, actor) as received
    reward_charges: list[str] = field(default_factory=list)  # submission id of each reward charge
    charged_minor: int = 0  # everything charged on the campaign's studies: rewards, bonuses, fees, VAT
    bonus_payments: dict[str, list[int]] = field(default_factory=dict)  # submission -> amounts paid to it
    batches_paid: dict[str, int] = field(default_factory=dict)  # bonus batch id -> times paid
    bonus_intents: list[tuple[str, int]] = field(default_factory=list)  # journal: (submission, cents) per bonus key
    served: list[tuple[str, str]] = field(default_factory=list)  # door: (participant, HIT), slots not lost
    market_assignments: list[tuple[str, str]] = field(default_factory=list)  # task site: (worker, HIT), not abandoned/returned
    market_hits: set[str] = field(default_factory=set)
    store_hits: dict[str, str] = field(default_factory=dict)  # HIT key -> HIT id
    ledger_spent: Decimal | None = None  # None: no store was read, the ledger is not compared
    charged_by_study: dict[str, int] = field(default_factory=dict)  # study id -> what the emulator charged for it
    reconciled: dict[str, tuple[Decimal, Decimal]] = field(default_factory=dict)  # study id -> (booked, service said)


def check(state: AuditState) -> list[Finding]:
    out: list[Finding] = []
    sent = Counter((sub for sub, _, actor in state.decisions if actor == "researcher"))
    for sub, n in sorted(sent.items()):
        if n > 1:
            actions = [a for s, a, actor in state.decisions if s == sub and actor == "researcher"]
            out.append(Finding("decided_twice", sub, f"{n} decisions sent: {', '.join(actions)}"))
    for sub, n in sorted(Counter(state.reward_charges).items()):
        if n > 1:
            out.append(Finding("decided_twice", sub, f"its reward was charged {n} times"))

    meant: dict[str, Counter[int]] = {}
    for sub, cents in state.bonus_intents:
        meant.setdefault(sub, Counter())[cents] += 1
    for sub, paid in sorted(state.bonus_payments.items()):
        extra = Counter(paid) - meant.get(sub, Counter())
        if extra:
            out.append(Finding("bonus_paid_twice", sub, f"paid {sorted(paid)} (minor units); the journal meant "
                                                        f"{sorted(meant.get(sub, Counter()).elements())}"))
    for batch, times in sorted(state.batches_paid.items()):
        if times > 1:
            out.append(Finding("bonus_paid_twice", batch, f"bonus batch paid {times} times"))

    for (pid, hit), n in sorted(Counter(state.served).items()):
        if n > 1:
            out.append(Finding("served_twice", f"{pid}:{hit}", f"the door served HIT {hit} to participant {pid} {n} times"))
    for (wid, hit), n in sorted(Counter(a for a in state.market_assignments if a[0].startswith(WORKER_PREFIX)).items()):
        if n > 1:
            out.append(Finding("served_twice", f"{wid}:{hit}", f"the task site has {n} assignments of HIT {hit} for {wid}"))

    spent = None if state.ledger_spent is None else state.ledger_spent * 100
    if spent is not None and (spent != spent.to_integral_value() or int(spent) != state.charged_minor):
        out.append(Finding("ledger_mismatch", "ledger", f"the ledger spent {state.ledger_spent}; the service charged "
                                                         f"{Decimal(state.charged_minor) / 100} for the campaign's studies"))

    for study, (booked, said) in sorted(state.reconciled.items()):
        if booked != said:
            out.append(Finding("cost_mismatch", study, f"the ledger booked {booked} for the study; the service said it "
                                                       f"charged {said}"))
        own = Decimal(state.charged_by_study.get(study, 0)) / 100
        if study in state.studies and said != own:
            out.append(Finding("cost_mismatch", study, f"the service said it charged {said} for the study; its own "
                                                       f"charges add up to {own}"))

    for key, hit_id in sorted(state.store_hits.items()):
        if hit_id not in state.market_hits:
            out.append(Finding("unknown_hit", key, f"HIT {hit_id} is in the store but not on the task site"))
    return out


@contextmanager
def _ro(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection: the audit never changes, nor creates, the files it reads."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        yield conn


def gather(*, emulator_db: Path, door_db: Path, market_db: Path, store: Store, campaign: str) -> AuditState:
    """Read the campaign's state. Its journal in `store` names the campaign's studies and the bonuses it
    meant to pay; the emulator's file (`prolific.db`) is read for those studies only; the store also gives
    the ledger and the HITs."""
    st = AuditState()
    with store.session() as s:
        st.studies = {str(sid) for sid in s.exec(select(ProlificStudyRow.study_id).where(
            ProlificStudyRow.campaign == campaign, col(ProlificStudyRow.study_id).is_not(None))).all()}
        st.bonus_intents = [(str(sub), int(cents)) for sub, cents in s.exec(
            select(ProlificBonusRow.submission_id, ProlificBonusRow.cents).where(ProlificBonusRow.campaign == campaign)
            .order_by(col(ProlificBonusRow.id))).all()]
    with _ro(emulator_db) as e:
        subs = [json.loads(r[0]) for r in e.execute("SELECT body FROM docs WHERE kind='submission' ORDER BY seq")]
        mine = {s["id"] for s in subs if s.get("study_id") in st.studies}
        st.bonus_payments = {s["id"]: [int(x) for x in s.get("bonus_payments") or []] for s in subs if s["id"] in mine}
        for r in e.execute("SELECT body FROM docs WHERE kind='transition' ORDER BY seq"):
            t = json.loads(r[0])
            if t.get("submission_id") in mine:
                st.decisions.append((str(t["submission_id"]), str(t["action"]), str(t["actor"])))
        for r in e.execute("SELECT body FROM docs WHERE kind='bonus'"):
            b = json.loads(r[0])
            if b.get("study") in st.studies:
                st.batches_paid[str(b["id"])] = int(b.get("times_paid") or 0)
        for study, ref, what, rewards, fees, vat in e.execute("SELECT study, ref, what, rewards, fees, vat FROM charges"):
            if study in st.studies:
                st.charged_minor += int(rewards) + int(fees) + int(vat)
                st.charged_by_study[study] = st.charged_by_study.get(study, 0) + int(rewards) + int(fees) + int(vat)
                if what == "reward":
                    st.reward_charges.append(str(ref))
    with _ro(door_db) as d:
        st.served = [(str(r[0]), str(r[1])) for r in d.execute(
            f"SELECT participant_id, hit_id FROM served WHERE state<>'lost' AND study_id IN ({','.join('?' * len(st.studies))})",
            sorted(st.studies))]
    with _ro(market_db) as m:
        st.market_hits = {str(r[0]) for r in m.execute("SELECT id FROM hits")}
        st.market_assignments = [(str(r[0]), str(r[1])) for r in m.execute(
            "SELECT worker_id, hit_id FROM assignments WHERE status NOT IN ('Abandoned', 'Returned')")]
    with store.session() as s:
        st.store_hits = {h.hit_key: h.hit_id for h in s.exec(select(HitRow).where(HitRow.campaign == campaign)).all()
                         if h.hit_id}
        spent = s.exec(select(LedgerRow.amount).where(LedgerRow.campaign == campaign,
                                                      col(LedgerRow.kind).in_((LedgerKind.CHARGE, LedgerKind.BONUS_CHARGE)))).all()
        st.ledger_spent = sum((Decimal(a) for a in spent), Decimal("0.00"))
        for value in s.exec(select(KVRow.value).where(KVRow.campaign == campaign,
                                                      col(KVRow.key).startswith(Keys.STUDY_COST))).all():
            figures = json.loads(value)
            st.reconciled[str(figures["study"])] = (Decimal(figures["booked"]), Decimal(figures["charged"]))
    return st


def audit_run(state_dir: Path, campaign: str, store: Store) -> list[Finding]:
    """The audit of a `campaign run` state directory laid out as `campaign.providers.prolific` lays it out
    (emulator in `prolific/`, the door in `prolific-site/`, the built-in marketplace in `market/`; the
    journal in the store)."""
    return check(gather(emulator_db=state_dir / "prolific" / "prolific.db",
                        door_db=state_dir / "prolific-site" / "prolific-site.sqlite",
                        market_db=state_dir / "market" / "market.db", store=store, campaign=campaign))
