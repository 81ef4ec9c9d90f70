"""What every `campaign` command pays at start: the daemon and the command line import neither SciPy nor
boto3 (0.1 s and 0.13 s on these machines). The review's normal quantile is the standard library's, and
boto3 is imported only when a boto3 client is made (MTurk, its sandbox, or `wire="boto3"`): the demo
`campaign run` went from 2.30 s to 2.10 s (median of 7, side by side)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.paths import ROOT


def test_the_daemon_and_the_command_line_start_without_scipy_or_boto3():
    probe = ("import json, sys; import campaign.cli, campaign.commands, campaign.daemon, campaign.steps.pipeline; "
             "print(json.dumps(sorted(m for m in ('scipy', 'boto3', 'botocore.config') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(out.stdout) == []


def test_the_review_threshold_is_scipys_normal_quantile():
    from scipy.special import ndtri

    from campaign.quality.review import PolicyConfig, needed_se

    config = PolicyConfig()
    for tested in (2, 3, 38, 1000):
        want = max(config.significance_se, float(ndtri(1.0 - (config.familywise_alpha or 0.0) / tested)))
        assert abs(needed_se(config, tested) - want) < 1e-12


def test_validate_and_preview_start_without_botocores_session():
    """`campaign.page_size` needs only the marketplace's size limit: botocore's session (the MTurk service
    model, 0.12 s) is loaded by the marketplace when it first checks a request."""
    probe = ("import json, sys; import campaign.cli, campaign.commands, campaign.page_size, campaign.preview; "
             "print(json.dumps(sorted(m for m in ('botocore.session', 'botocore.client') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(out.stdout) == []
