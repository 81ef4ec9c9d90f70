"""`campaign bench dashboard` runs end to end on a small store and reports the numbers it promises."""

from tests.support.cli import run_campaign
from tests.test_jsonout import strict


def test_bench_dashboard_small():
    out = run_campaign("bench", "dashboard", "--hits", "300", "--redraws", "2", "--json", timeout=None, check=True).stdout
    r = strict(out)  # no NaN either: tests/test_jsonout.py leaves this benchmark's --json to this test
    assert isinstance(r, dict)
    assert r["hits"] == 300 and r["assignments"] == 300 * 0.8 * 5 + 300 * 0.2 * 2
    for key in ("dashboard_80x24", "dashboard_200x50", "status"):
        assert r[key]["redraw_ms_median"] > 0
    assert r["meets_target"] == (r["redraw_ms_max"] < 200)
