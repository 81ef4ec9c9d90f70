"""Simulated workers: their hidden reliability types and the pool a simulated crowd draws them from.

How a worker of each type answers is its task kind's model (`likert_answer`, `ranking_answer`,
`nugget_answer` in `campaign.tasks`), given the worker, an item's hidden truth and a seeded rng. The
marketplace-facing crowd (`campaign.crowd.runner`) and the benchmarks both use these, so a benchmark
measures the same crowd the demo runs.

Truth is an importance in [0, 1] per item. Likert answers map it to the 5..1 scale with Gaussian noise;
rankings use Thurstone noise (each shown item perceived as truth + N(0, sigma), then sorted).
"""

from __future__ import annotations

from dataclasses import dataclass

# re-exported: the crowd and the benchmarks seed from here as well
from campaign.rng import rng_for as rng_for
from campaign.rng import stable_seed as stable_seed
from campaign.simulation import SPAMMER_KINDS as SPAMMER_KINDS
from campaign.simulation import allot

KINDS = ("diligent", "noisy", "biased", "constant_spammer", "random_spammer")
DEFAULT_MIX = {"diligent": 0.6, "noisy": 0.2, "biased": 0.1, "random_spammer": 0.05, "constant_spammer": 0.05}

# Noise (in units of the 0..1 truth scale) of each kind when judging importance.
DEFAULT_NOISE = {"diligent": 0.12, "noisy": 0.30, "biased": 0.15}


@dataclass(frozen=True)
class SimWorker:
    """One simulated worker. `kind` is hidden from the campaign; only its answers are seen."""

    worker_id: str
    kind: str
    noise: float = 0.12
    bias: float = 0.0  # added to the perceived truth (biased workers)
    constant: int = 3  # the Likert value a constant spammer always gives
    arrival: float = 0.0  # seconds of simulated time after the crowd starts
    locale: str = "US"
    approval_rate: int = 99  # prior approval percentage on the marketplace
    approved_hits: int = 5000

    @property
    def is_spammer(self) -> bool:
        return self.kind in SPAMMER_KINDS


def make_worker_id(seed: int, index: int) -> str:
    """A worker id in MTurk's shape (`^A[A-Z0-9]+$`), 14 characters like real ones."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    n = stable_seed("worker", seed, index)
    chars = []
    for _ in range(13):
        n, r = divmod(n, len(alphabet))
        chars.append(alphabet[r])
    return "A" + "".join(chars)


def make_pool(
    n: int,
    seed: int,
    mix: dict[str, float] | None = None,
    arrival_span: float = 0.0,
    noise: dict[str, float] | None = None,
) -> list[SimWorker]:
    """A seeded pool of `n` workers drawn from `mix` (kind -> share; shares are normalised).

    Kinds are allotted by largest remainder so the shares are met exactly where possible (a benchmark
    with 25% spammers really has 25%; `campaign.simulation.allot`), then shuffled with the seed.
    """
    mix = mix or DEFAULT_MIX
    for k in mix:
        if k not in KINDS:
            raise ValueError(f"unknown worker kind {k!r}; expected one of {', '.join(KINDS)}")
    noise = {**DEFAULT_NOISE, **(noise or {})}
    counts = allot(n, mix)
    kinds = [k for k in sorted(counts) for _ in range(counts[k])]
    rng = rng_for("pool", seed)
    rng.shuffle(kinds)
    workers = []
    for i, kind in enumerate(kinds):
        wr = rng_for("pool-worker", seed, i)
        bias = float(wr.choice([-1, 1]) * wr.uniform(0.15, 0.3)) if kind == "biased" else 0.0
        workers.append(
            SimWorker(
                worker_id=make_worker_id(seed, i),
                kind=kind,
                noise=float(noise.get(kind, 0.0)),
                bias=bias,
                constant=int(wr.integers(1, 6)),
                arrival=float(wr.uniform(0, arrival_span)) if arrival_span > 0 else 0.0,
            )
        )
    return workers
