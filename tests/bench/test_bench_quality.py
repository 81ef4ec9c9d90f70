import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_quality_quick_json_shape_and_sense():
    out = subprocess.run([sys.executable, "-m", "campaign", "bench", "quality", "--quick", "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, check=True).stdout
    data = json.loads(out)
    for level in ("0.0", "0.1", "0.25"):
        for mode in ("with_policy", "without_policy"):
            d = data[level][mode]
            assert set(d) >= {"pearson", "spammer_labels_excluded", "good_workers_wrongly_blocked", "paid_to_spammers"}
            assert -1 <= d["pearson"] <= 1 and 0 <= d["spammer_labels_excluded"] <= 1
            assert isinstance(d["paid_to_spammers"], str) and "." in d["paid_to_spammers"]
        assert data[level]["without_policy"]["spammer_labels_excluded"] == 0.0
    assert data["0.25"]["with_policy"]["spammer_labels_excluded"] > 0.3
    assert data["0.25"]["with_policy"]["good_workers_wrongly_blocked"] == 0.0
    assert data["0.0"]["with_policy"]["paid_to_spammers"] == "0.00"
