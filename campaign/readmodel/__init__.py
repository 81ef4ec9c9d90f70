"""The read side: what the store says about a campaign, for everyone who shows or exports it.

Scores and their export files (`scores`), the figures of `campaign status` and `--json` (`figures`), the
dashboard's snapshot of a campaign (`snapshot`), the alert rules over it (`alerts`), test-retest figures
(`retest`), the daemon's heartbeat (`heartbeat`), and the definitions and time series they share. The
pipeline, the dashboard, the report and the operator commands all import it; it imports none of them,
and it never calls a marketplace.
"""
