"""`campaign bench dashboard` runs end to end on a small store and reports the numbers it promises."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_dashboard_small():
    out = subprocess.run([sys.executable, "-m", "campaign", "bench", "dashboard", "--hits", "300", "--redraws", "2", "--json"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    r = json.loads(out)
    assert r["hits"] == 300 and r["assignments"] == 300 * 0.8 * 5 + 300 * 0.2 * 2
    for key in ("dashboard_80x24", "dashboard_200x50", "status"):
        assert r[key]["redraw_ms_median"] > 0
    assert r["meets_target"] == (r["redraw_ms_max"] < 200)
