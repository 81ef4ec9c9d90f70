"""Scoring systems against what a campaign built: the seeds' summary and clustering measures.

One measure family per module, each pure (no store, no files): `extract` (TSC3 precision, coverage and
weighted coverage, seed 001), `nuggets` (support-weighted nugget recall and precision against a nugget
stage's gold_nuggets.jsonl), `clusters` (seed 003's V-measure family, NMI, VI and Rand indices) and
`hierarchy` (seed 002's hierarchy overlap). `readers` turns files into their inputs, with `file:line`
errors; `cli` is the `campaign evaluate` command.
"""
