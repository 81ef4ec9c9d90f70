"""`campaign init [DIR]`: a commented starter spec and small inputs to copy from.

What it writes is a campaign that `campaign validate` accepts and `campaign run` runs to the end on the
built-in marketplace with a simulated crowd, so a new user's first run works before anything is
changed; the comments say what to change for real people. It never overwrites: if any of its files
exists, it writes nothing and says which ones, so running it in a folder that holds work is harmless.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SPEC = """\
# A starter campaign written by `campaign init`. Check it with `campaign validate`, run it with
# `campaign run` (here: the built-in marketplace and a simulated crowd, so nothing is paid), then see
# `campaign status`, `campaign export my-first-campaign` and `campaign report my-first-campaign`.
# Every key is described in docs/spec.md; an unknown key is an error, with its file:line.
campaigns:
  - name: my-first-campaign        # names the campaign's folder under state/: a-z, 0-9, '-' or '_'
    topic: >-
      Should plastic water bottles be banned?
    input:
      propositions: propositions.tsv   # a TSV with the columns id and text, one statement per row
    task:
      kind: likert                 # rate statements on a 5-point scale; also: ranking, nuggets
      items_per_hit: 5             # statements per HIT
      assignments: 3               # workers per HIT
      reward: "0.06"               # per assignment, in dollars (a string: money is never a float)
      title: Rate how important each statement is
      description: Rate five short statements about bottled water.
      # Instructions of your own, in Markdown (raw HTML is shown as text, links are http(s) only);
      # without them the kind's built-in instructions are shown.
      instructions: |
        Imagine you write a **short summary** about the topic shown.
        Rate how important each statement would be for that summary.
      traps:
        share: 0.5                 # half of the HITs carry a sentence that should be rated low
        texts: ["This sentence is not important."]
    budget: "5.00"                 # the campaign stops posting before spending more than this
    marketplace: local             # local | mturk-sandbox | mturk (mturk needs --production)
    crowd:
      kind: simulated              # simulated workers for a dry run; `none` waits for real people
      workers: 12
      speed: 3600                  # one real second is one simulated hour
      arrival_span: 30m
      truth: truth.tsv             # hidden importance per statement, 0..1: what the simulation answers from
    schedule:
      poll_interval: 0.2

  # Documents in, information nuggets out: remove the '# ' of the lines below (and keep the indent) to
  # run it too. `documents:` takes a folder of .txt files (one document each), a TSV of `doc` and `text`
  # (one document per row) or a TSV of `doc`, `id` and `text` (one sentence per row); raw text is split
  # into sentences and shown in windows of at most 7 sentences of one document.
  # - name: my-first-nuggets
  #   topic: Should plastic water bottles be banned?
  #   input:
  #     documents: documents
  #   task:
  #     kind: nuggets
  #     assignments: 3
  #     min_workers: 2             # a gold nugget is a span that at least this many workers marked
  #   budget: "5.00"
  #   crowd:
  #     kind: simulated
  #     workers: 12
  #     speed: 3600
  #     arrival_span: 30m
  #     truth: documents-truth.tsv # sentence n of documents/d.txt is d.s<n>
  #   schedule:
  #     poll_interval: 0.2
"""

PROPOSITIONS = [
    ("p01", "Plastic bottles take hundreds of years to break down."),
    ("p02", "Bottled water can cost a thousand times more than tap water."),
    ("p03", "Tap water is tested more often than bottled water."),
    ("p04", "Bottled water is convenient when travelling."),
    ("p05", "Many bottles are never recycled and end up in the sea."),
    ("p06", "Some towns have no safe tap water."),
    ("p07", "A ban would cost jobs in the bottling industry."),
    ("p08", "Refill stations make a ban easier to live with."),
    ("p09", "I had a sandwich for lunch today."),
    ("p10", "Producing a bottle uses far more water than it holds."),
]
TRUTH = {"p01": 0.8, "p02": 0.7, "p03": 0.6, "p04": 0.4, "p05": 0.9, "p06": 0.6, "p07": 0.5, "p08": 0.4,
         "p09": 0.0, "p10": 0.7}
DOCUMENTS = {
    "bottles.txt": "Plastic bottles take hundreds of years to break down. Most of them are never recycled. "
                   "Many end up in rivers and in the sea, where animals swallow them. Some cities have banned "
                   "the sale of bottled water in public buildings. They put in drinking fountains instead.\n",
    "costs.txt": "Bottled water can cost a thousand times more than tap water. In many countries, tap water is "
                 "tested more often than bottled water. Yet people buy bottles because they trust them more. "
                 "A ban would hit the bottling industry and its workers. Refill stations could soften the blow.\n",
}

# sentence n of documents/<d>.txt is item d.s<n> (campaign.inputs); five sentences each
DOCUMENT_TRUTH = {"bottles.s0": 0.8, "bottles.s1": 0.7, "bottles.s2": 0.8, "bottles.s3": 0.6, "bottles.s4": 0.3,
                  "costs.s0": 0.8, "costs.s1": 0.6, "costs.s2": 0.4, "costs.s3": 0.6, "costs.s4": 0.5}


def files() -> dict[str, str]:
    """Every file `init` writes, by path relative to DIR, with its content."""
    out = {"campaigns.yaml": SPEC,
           "propositions.tsv": "id\ttext\n" + "".join(f"{k}\t{t}\n" for k, t in PROPOSITIONS),
           "truth.tsv": "id\timportance\n" + "".join(f"{k}\t{v}\n" for k, v in TRUTH.items())}
    out["documents-truth.tsv"] = "id\timportance\n" + "".join(f"{k}\t{v}\n" for k, v in DOCUMENT_TRUTH.items())
    out.update({f"documents/{name}": text for name, text in DOCUMENTS.items()})
    return out


def write_starter(folder: Path) -> list[Path]:
    """Write the starter files under `folder` (made if missing); FileExistsError naming every file
    that already exists, before anything is written."""
    wanted = {folder / rel: text for rel, text in files().items()}
    existing = [p for p in wanted if p.exists()]
    if existing:
        raise FileExistsError(", ".join(str(p) for p in existing))
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8", newline="\n") as f:  # "x": never replaces a file made meanwhile
            f.write(text)
    return list(wanted)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="write a commented starter spec and small inputs into DIR (never overwrites)")
    p.add_argument("dir", nargs="?", default=".", metavar="DIR", help="the folder to write into (default: here; made if missing)")


def cmd_init(args: argparse.Namespace) -> int:
    folder = Path(args.dir)
    if folder.exists() and not folder.is_dir():
        print(f"campaign init: {folder} is a file, not a folder; nothing was written (choose another DIR)", file=sys.stderr)
        return 2
    try:
        written = write_starter(folder)
    except FileExistsError as exc:
        print(f"campaign init: not overwriting {exc}; nothing was written (choose another DIR)", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"campaign init: cannot write into {folder}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} files into {folder}:")
    for path in written:
        print(f"  {path}")
    spec = folder / "campaigns.yaml"
    print(f"next: campaign validate {spec}   then: cd {folder} && campaign run")
    return 0
