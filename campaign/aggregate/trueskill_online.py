"""Online TrueSkill over pairwise comparisons and 5-item rankings, for choosing the next comparison batch.

TrueSkill (Herbrich et al., 2007) is what Falke & Gurevych (2017) used to pick each batch of pairs: it is
cheap to update after every HIT and keeps a per-item sigma, which is exactly the "confidence" the
planner (`campaign.plan.pairs`) needs. It is order dependent, though, so exported scores come from the
batch refit in `campaign.aggregate.bradley_terry`, not from here.

Settings: `draw_probability=0` because workers must order every pair (forced choice, no ties) and
`tau=0` because an item's true importance does not drift while a campaign runs, so sigma must never grow
between updates. The environment is private to each ranker (never the module-global one), so two
campaigns in one process cannot disturb each other.

Every update is logged as an event; `to_dict()` keeps both the ratings and the log, and `replay()`
rebuilds a ranker from the log alone. Replay is deterministic: TrueSkill's arithmetic is pure and
events are applied in their recorded order.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import trueskill

DEFAULT_MU = 25.0
DEFAULT_SIGMA = DEFAULT_MU / 3.0

# How a 5-item ranking enters the model. "match": one multi-player free-for-all match (TrueSkill links
# only neighbouring ranks, so a ranking counts as the ordered evidence it is). "pairs": its 10 derived
# pairs, one 1-vs-1 update each; this treats correlated pairs as independent and over-shrinks sigma.
# Chosen by measurement (issue 16; `campaign bench ranking`, window planner, 50-pair batches, 10 seeds):
# "pairs" reaches random rankings' final top-50 at 800 of 1,500 pairs at 100 items / 10% spam, "match"
# at 1,100; at the final checkpoint "pairs" is ahead or level at 100 items and 120 / 10%, and at 300
# items (0.682 vs 0.640), "match" ahead at 120 / 20% (0.894 vs 0.862). See docs/benchmarks.md. Its
# sigmas are over-confident: a `target_confidence` stop rule trusts them less than with "match".
RANKING_MODES = ("match", "pairs")
DEFAULT_RANKING_MODE = "pairs"


class OnlineRanker:
    """TrueSkill ratings for a fixed set of items, updated one comparison or ranking at a time."""

    def __init__(
        self,
        items: Iterable[Hashable],
        mu: float = DEFAULT_MU,
        sigma: float = DEFAULT_SIGMA,
        beta: float | None = None,
        ranking_mode: str = DEFAULT_RANKING_MODE,
    ) -> None:
        if ranking_mode not in RANKING_MODES:
            raise ValueError(f"ranking_mode must be one of {RANKING_MODES}, not {ranking_mode!r}")
        self.items: list[Hashable] = list(dict.fromkeys(items))
        if not self.items:
            raise ValueError("an OnlineRanker needs at least one item")
        self.mu0 = float(mu)
        self.sigma0 = float(sigma)
        self.beta = float(beta) if beta is not None else self.sigma0 / 2.0
        self.ranking_mode = ranking_mode
        self.env = trueskill.TrueSkill(
            mu=self.mu0, sigma=self.sigma0, beta=self.beta, tau=0.0, draw_probability=0.0, backend=None
        )
        self._ratings: dict[Hashable, trueskill.Rating] = {i: self.env.create_rating() for i in self.items}
        self._two_beta2 = 2.0 * self.beta * self.beta
        self._draw_margin = trueskill.calc_draw_margin(self.env.draw_probability, 2, self.env)
        self.events: list[dict[str, Any]] = []

    # ---- updates -------------------------------------------------------------------------------------
    def _check(self, items: Sequence[Hashable]) -> None:
        for i in items:
            if i not in self._ratings:
                raise KeyError(f"unknown item {i!r}")
        if len(set(items)) != len(items):
            raise ValueError(f"an item cannot be compared with itself: {list(items)!r}")

    def update_pairs(self, pairs: Iterable[tuple[Hashable, Hashable]]) -> None:
        """Apply forced-choice outcomes (winner, loser), in the given order."""
        for winner, loser in pairs:
            self._check((winner, loser))
            self._rate_pair(winner, loser)
            self.events.append({"kind": "pair", "items": [winner, loser]})

    def update_ranking(self, ranking: Sequence[Hashable]) -> None:
        """Apply one worker's ranking, best first (one multi-way match, or its derived pairs)."""
        ranking = list(ranking)
        self._check(ranking)
        if len(ranking) < 2:
            return
        if self.ranking_mode == "match":
            groups = [(self._ratings[i],) for i in ranking]
            rated = self.env.rate(groups, ranks=list(range(len(ranking))))
            for item, (r,) in zip(ranking, rated):
                self._ratings[item] = r
        else:
            for a in range(len(ranking)):
                for b in range(a + 1, len(ranking)):
                    self._rate_pair(ranking[a], ranking[b])
        self.events.append({"kind": "ranking", "items": ranking})

    def _rate_pair(self, winner: Hashable, loser: Hashable) -> None:
        """One forced-choice outcome in closed form: for two one-item teams, tau = 0 and no draws, the
        library's factor-graph schedule reduces to the two-player update of Herbrich et al. (2007),
        c^2 = 2 beta^2 + s_w^2 + s_l^2, t = (mu_w - mu_l) / c, mu_w += s_w^2 / c * v(t),
        s_w^2 *= 1 - s_w^2 / c^2 * w(t) (mirrored for the loser), with the environment's own v, w and
        draw margin. It agrees with `env.rate` to rounding (3.5e-13 worst of 20,000 random pairs,
        tested) at 1/60 of the cost: the library's 0.34 ms per pair was most of a ranking batch's planning."""
        rw, rl = self._ratings[winner], self._ratings[loser]
        sw2, sl2 = rw.sigma * rw.sigma, rl.sigma * rl.sigma
        c2 = sw2 + sl2 + self._two_beta2
        c = math.sqrt(c2)
        t = (rw.mu - rl.mu) / c
        margin = self._draw_margin / c
        v = self.env.v_win(t, margin)
        w = self.env.w_win(t, margin)
        self._ratings[winner] = self.env.create_rating(mu=rw.mu + sw2 / c * v, sigma=math.sqrt(sw2 * (1.0 - sw2 / c2 * w)))
        self._ratings[loser] = self.env.create_rating(mu=rl.mu - sl2 / c * v, sigma=math.sqrt(sl2 * (1.0 - sl2 / c2 * w)))

    # ---- reading -------------------------------------------------------------------------------------
    def mean(self, item: Hashable) -> float:
        return float(self._ratings[item].mu)

    def sigma(self, item: Hashable) -> float:
        return float(self._ratings[item].sigma)

    def conservative(self, item: Hashable, k: float = 3.0) -> float:
        """mu - k*sigma: TrueSkill's usual "surely at least this good" score."""
        r = self._ratings[item]
        return float(r.mu - k * r.sigma)

    def means(self) -> list[float]:
        return [float(self._ratings[i].mu) for i in self.items]

    def sigmas(self) -> list[float]:
        return [float(self._ratings[i].sigma) for i in self.items]

    def win_probability(self, a: Hashable, b: Hashable) -> float:
        """P(a is judged above b) under the model, including the per-judgment performance noise beta."""
        ra, rb = self._ratings[a], self._ratings[b]
        denom = math.sqrt(2 * self.beta**2 + ra.sigma**2 + rb.sigma**2)
        return 0.5 * (1.0 + math.erf((ra.mu - rb.mu) / (denom * math.sqrt(2.0))))

    def ordered(self) -> list[Hashable]:
        """Items best first by mean; ties keep the item order so the result is deterministic."""
        pos = {i: n for n, i in enumerate(self.items)}
        return sorted(self.items, key=lambda i: (-self._ratings[i].mu, pos[i]))

    # ---- persistence ---------------------------------------------------------------------------------
    def to_dict(self, events: bool = True) -> dict[str, Any]:
        """JSON-ready state: settings, current ratings and the event log (items must be JSON scalars).

        Without `events` it is the state a planner persists between batches: `from_dict` restores the
        ratings exactly (JSON keeps every float bit), so applying only the new rankings to it gives what
        a replay of all of them gives, at a cost that follows the new rankings, not the total.
        """
        out = {
            "mu": self.mu0,
            "sigma": self.sigma0,
            "beta": self.beta,
            "ranking_mode": self.ranking_mode,
            "items": list(self.items),
            "ratings": {str(i): [float(r.mu), float(r.sigma)] for i, r in self._ratings.items()},
        }
        if events:
            out["events"] = [{"kind": e["kind"], "items": list(e["items"])} for e in self.events]
        return out

    @classmethod
    def from_dict(cls, state: Mapping[str, Any]) -> OnlineRanker:
        """Restore exactly (ratings as stored), without re-running the log."""
        r = cls(state["items"], mu=state["mu"], sigma=state["sigma"], beta=state["beta"],
                ranking_mode=state.get("ranking_mode", "match"))
        by_str = {str(i): i for i in r.items}
        for key, (mu, sigma) in state["ratings"].items():
            r._ratings[by_str[key]] = r.env.create_rating(mu=float(mu), sigma=float(sigma))
        r.events = [{"kind": e["kind"], "items": list(e["items"])} for e in state.get("events", [])]
        return r

    @classmethod
    def replay(cls, state: Mapping[str, Any]) -> OnlineRanker:
        """Rebuild from settings and the event log only (e.g. after the stored ratings were lost)."""
        r = cls(state["items"], mu=state["mu"], sigma=state["sigma"], beta=state["beta"],
                ranking_mode=state.get("ranking_mode", "match"))
        for e in state.get("events", []):
            if e["kind"] == "pair":
                r.update_pairs([(e["items"][0], e["items"][1])])
            elif e["kind"] == "ranking":
                r.update_ranking(e["items"])
            else:
                raise ValueError(f"unknown event kind {e['kind']!r}")
        return r
