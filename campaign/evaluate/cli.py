"""`campaign evaluate extract|nuggets|clusters|hierarchy`: score a system against a gold standard.

Kept out of campaign/commands.py so the evaluation commands can grow without touching the daemon's
CLI: `register` adds the subcommand, `run` executes it. Malformed input exits 2 with `file:line:
message` on stderr, like `campaign validate`; a usage error exits 2 through argparse.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Container, Mapping

from campaign.jsonout import dumps

KINDS = ("extract", "nuggets", "clusters", "hierarchy")


class InputError(Exception):
    """Inputs that are each well-formed but do not fit together (e.g. different item sets)."""


def _unit_interval(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], not {v}")
    return v


def _non_negative(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, not {text}")
    return v


def _abc(text: str) -> tuple[float, float, float]:
    parts = text.split(",")
    try:
        vals = tuple(float(p) for p in parts)
    except ValueError:
        vals = ()
    if len(vals) != 3 or any(not 0 <= v < float("inf") for v in vals):
        raise argparse.ArgumentTypeError(f"expected three weights a,b,c >= 0 like 0.8,0.1,0.1, not {text!r}")
    return vals[0], vals[1], vals[2]


def register(sub: argparse._SubParsersAction) -> None:
    """Add `evaluate` to the top-level subparsers of `campaign`."""
    ev = sub.add_parser("evaluate", help="score a system against a gold standard (TSC3 extract measures, gold nuggets, "
                                          "clustering measures, hierarchy overlap)",
                        description="Score a system against a gold standard; see docs/evaluation.md.")
    kinds = ev.add_subparsers(dest="evaluate_kind", required=True, metavar="{" + ",".join(KINDS) + "}")

    ex = kinds.add_parser("extract", help="TSC3 precision, coverage and weighted coverage of an extract (seed 001)")
    ex.add_argument("--gold", required=True, help="per abstract sentence: rank A/B/C and its sets of equivalent source "
                                                  "sentences (TSV sentence, rank, sets; or .jsonl)")
    ex.add_argument("--system", required=True, help="the system's extract: one source sentence id per line")
    ex.add_argument("--weights", default=None, help="rank weights for weighted coverage (default A=1,B=0.5,C=0.333: 1/rank)")
    ex.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    nu = kinds.add_parser("nuggets", help="support-weighted recall and precision of a summary over a campaign's gold nuggets")
    nu.add_argument("--gold", required=True, help="state/NAME/gold_nuggets.jsonl written by a nugget stage")
    nu.add_argument("--system", required=True, help="the summary or extract: plain text, one sentence per line")
    nu.add_argument("--threshold", type=_unit_interval, default=0.5,
                    help="share of a nugget's content words one summary sentence must hold to match it (default 0.5)")
    nu.add_argument("--weight", choices=("workers", "mace"), default="workers",
                    help="a nugget's support: its worker count (default) or their summed MACE competence")
    nu.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    cl = kinds.add_parser("clusters", help="V-measure, V_beta, homogeneity, completeness, NMI, VI, Rand and adjusted Rand (seed 003)")
    cl.add_argument("--gold", required=True, help="TSV with columns item, cluster")
    cl.add_argument("--pred", required=True, help="TSV with columns item, cluster")
    cl.add_argument("--beta", type=_non_negative, default=None, help="the β of V_beta (default |L|/|C|, Vlachos et al. 2009)")
    cl.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    hi = kinds.add_parser("hierarchy", help="hierarchy overlap HO = a·TO + b·SupO + c·SubO of two nugget hierarchies (seed 002)")
    hi.add_argument("--gold", required=True, help="TSV with columns node, parent, nuggets")
    hi.add_argument("--pred", required=True, help="TSV with columns node, parent, nuggets")
    hi.add_argument("--weights", type=_abc, default=(0.8, 0.1, 0.1), help="a,b,c (default 0.8,0.1,0.1 as in the seed)")
    hi.add_argument("--per-nugget", action="store_true", help="with --json: every nugget's TO, SupO and SubO")
    hi.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def run(args: argparse.Namespace) -> int:
    """Execute `campaign evaluate ...`; 0 when scored, 2 when an input is malformed or inputs disagree."""
    from campaign.evaluate.readers import FormatError

    handlers: dict[str, Callable[[argparse.Namespace], dict[str, object]]] = {
        "extract": _extract, "nuggets": _nuggets, "clusters": _clusters, "hierarchy": _hierarchy}
    try:
        result = handlers[args.evaluate_kind](args)
    except (FormatError, InputError) as exc:
        print(f"{exc}", file=sys.stderr)
        return 2
    if args.json:
        print(dumps(result, indent=2, ensure_ascii=False))
    else:
        _print_table(args.evaluate_kind, result)
    return 0


def _print_table(kind: str, result: dict[str, object]) -> None:
    keys = {"extract": ("precision", "coverage", "weighted_coverage", "correct", "output_length", "required_length"),
            "nuggets": ("recall", "recall_unweighted", "coverage", "precision", "f1", "n_nuggets", "n_matched", "n_units",
                        "n_units_matching", "threshold", "weight"),
            "clusters": ("v_measure", "v_beta", "beta", "homogeneity", "completeness", "nmi", "vi", "nvi", "rand",
                         "adjusted_rand", "n_items", "n_classes", "n_clusters"),
            "hierarchy": ("ho", "to", "supo", "subo", "n_nuggets")}[kind]
    width = max(map(len, keys))
    for k in keys:
        v = result[k]
        print(f"{k:<{width}}  {v:.4f}" if isinstance(v, float) else f"{k:<{width}}  {v}")
    for note in result.get("notes", []):  # type: ignore[attr-defined]
        print(f"note: {note}")


def _extract(args: argparse.Namespace) -> dict[str, object]:
    from campaign.evaluate.extract import score_extract
    from campaign.evaluate.readers import FormatError, parse_weights, read_extract_gold, read_extract_system

    weights = None
    if args.weights is not None:
        try:
            weights = parse_weights(args.weights)
        except ValueError as exc:
            raise InputError(f"--weights: {exc}") from None
    gold = read_extract_gold(args.gold)
    system = read_extract_system(args.system)
    if not system:
        raise FormatError(args.system, None, "no sentence id (an extract lists one source sentence id per line)")
    try:
        scores = score_extract(gold, system, weights)
    except ValueError as exc:
        raise InputError(f"{args.gold}: {exc}") from None
    out = scores.as_dict()
    if scores.output_length != scores.required_length:
        out["notes"] = [f"TSC3 evaluates outputs of exactly {scores.required_length} sentences (the smallest extract "
                        f"that produces the abstract); this one has {scores.output_length}"]
    return out


def _nuggets(args: argparse.Namespace) -> dict[str, object]:
    from campaign.evaluate.nuggets import score_nuggets, units
    from campaign.evaluate.readers import FormatError, read_gold_nuggets, read_summary

    gold = read_gold_nuggets(args.gold)
    parts = units(read_summary(args.system))
    if not parts:
        raise FormatError(args.system, None, "empty summary")
    try:
        scores = score_nuggets(gold, parts, threshold=args.threshold, weight=args.weight)
    except ValueError as exc:
        raise InputError(f"{args.gold}: {exc}") from None
    return scores.as_dict()


def _all_in(lines: Mapping[str, int], other: Container[str], why: Callable[[str, int], str]) -> None:
    """Refuse the first key of one file (in file order) that the other file lacks, naming its line."""
    for key, no in lines.items():
        if key not in other:
            raise InputError(why(key, no))


def _clusters(args: argparse.Namespace) -> dict[str, object]:
    from campaign.evaluate.clusters import compare
    from campaign.evaluate.readers import read_clustering

    gold, gold_lines = read_clustering(args.gold)
    pred, pred_lines = read_clustering(args.pred)
    same = "(both files must list the same items)"
    _all_in(gold_lines, pred, lambda key, no: f"{args.gold}:{no}: item {key!r} has no cluster in {args.pred} {same}")
    _all_in(pred_lines, gold, lambda key, no: f"{args.pred}:{no}: item {key!r} is not in the gold {args.gold} {same}")
    return dict(compare(gold, pred, beta=args.beta).as_dict())


def _hierarchy(args: argparse.Namespace) -> dict[str, object]:
    from campaign.evaluate.hierarchy import hierarchy_overlap
    from campaign.evaluate.readers import read_hierarchy

    gold, gold_lines = read_hierarchy(args.gold)
    pred, pred_lines = read_hierarchy(args.pred)
    same = "(both hierarchies must hold the same nuggets)"
    _all_in(gold_lines, pred_lines, lambda key, no: f"{args.gold}:{no}: nugget {key!r} is not in {args.pred} {same}")
    _all_in(pred_lines, gold_lines, lambda key, no: f"{args.pred}:{no}: nugget {key!r} is not in the gold {args.gold} {same}")
    a, b, c = args.weights
    return hierarchy_overlap(gold, pred, a, b, c).as_dict(per_nugget=args.per_nugget)
