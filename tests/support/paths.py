"""Where the repository and its demo data are, for tests that read examples or start `campaign` in it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WATER = ROOT / "examples" / "ukpconvarg1-water"  # the demo data: propositions, documents and their truths
