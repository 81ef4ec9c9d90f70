"""The pty helper lives in tests.support.terminal; this name stays for the dashboard tests that import it."""

from tests.support.paths import ROOT
from tests.support.terminal import Term

__all__ = ["ROOT", "Term"]
