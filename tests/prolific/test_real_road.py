"""The real road with hands-on tools only: `examples/prolific.yaml`'s campaign with `marketplace: prolific`,
its `PROLIFIC_BASE_URL` pointing at an emulator started by `campaign prolific serve` (a subprocess, as a
researcher starts it from a shell), the daemon (`campaign run`) and the participants (`campaign crowd run
--prolific-url`) each their own process. The campaign finishes with scores, every request the daemon
sent and every answer follow Prolific's API description (the emulator records them:
`--record-exchanges`), and `campaign.prolific.audit` finds nothing: no submission decided twice, no
bonus paid twice, nobody served a HIT twice, the ledger equal to the emulator's charges to the cent."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from campaign.child_process import end
from campaign.prolific.audit import check, gather
from campaign.spec import load_spec
from campaign.store import Store
from tests.prolific.standalone import checked_exchanges, standalone_emulator
from tests.support.cli import clean_env, run_args, start_campaign
from tests.support.paths import ROOT, WATER

pytestmark = [pytest.mark.prolific, pytest.mark.slow]

EXAMPLE = ROOT / "examples" / "prolific.yaml"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def real_road_example(path: Path, port: int) -> Path:
    """examples/prolific.yaml on the real road: `marketplace: prolific`, the task site at a fixed loopback
    port (participants are sent there), its simulated crowd kept (allowed: the base URL is loopback)."""
    text = EXAMPLE.read_text(encoding="utf-8")
    for old, new in (("marketplace: prolific-local", "marketplace: prolific"),
                     ("public_url: http://127.0.0.1:0", f"public_url: http://127.0.0.1:{port}"),
                     ("propositions: ukpconvarg1-water/", f"propositions: {WATER}/"),
                     ("truth: ukpconvarg1-water/", f"truth: {WATER}/")):
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    return path


def test_example_on_the_real_road_with_a_standalone_emulator_and_crowd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = _free_port()
    spec = real_road_example(tmp_path / "prolific.yaml", port)
    em_state, state = tmp_path / "prolific.com", tmp_path / "state"
    with (tmp_path / "emulator.log").open("w") as em_log, (tmp_path / "crowd.log").open("w") as crowd_log, \
            standalone_emulator(em_state, "--speed", "3600", "--fee-rate", "0.333", "--vat-rate", "0.2", log=em_log) as em:
        env = clean_env(["PROLIFIC_*"], **em)
        daemon = start_campaign(*run_args(spec, state, "--market-port", str(port), "--max-seconds", "400", quiet=False),
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # the participants: the token from the emulator's own file, the URL from the environment
        crowd = start_campaign("crowd", "run", "--config", str(spec), "--prolific-token-file", str(em_state / "token"),
                               env=clean_env(["PROLIFIC_*"], PROLIFIC_BASE_URL=em["PROLIFIC_BASE_URL"]),
                               stdout=crowd_log, stderr=subprocess.STDOUT, text=True)
        try:
            stdout, stderr = daemon.communicate(timeout=480)
        finally:
            for p in (daemon, crowd):
                end(p, grace=60)
        token = em["PROLIFIC_TOKEN"]
    crowd_said = (tmp_path / "crowd.log").read_text()
    assert daemon.returncode == 0, stderr[-3000:]
    assert "water-prolific: scores written to" in stdout, stdout[-3000:]
    assert "Prolific participants at work" in crowd_said and "participants stopped:" in crowd_said, crowd_said[-2000:]
    assert token not in stdout and token not in stderr and token not in crowd_said
    assert token not in (em_state / "exchanges.jsonl").read_text(encoding="utf-8")
    for f in state.rglob("*"):
        if f.is_file():
            assert token.encode() not in f.read_bytes(), f"the Prolific token was written to {f}"

    described = checked_exchanges(em_state)
    if described is not None:  # the description is at hand: every exchange as it says
        assert ("POST", "/api/v1/studies/") in described.seen and ("POST", "/api/v1/submissions/{id}/transition/") in described.seen, \
            sorted(described.seen)
        assert not described.violations, described.report()

    monkeypatch.setenv("PROLIFIC_BASE_URL", em["PROLIFIC_BASE_URL"])  # the spec's simulated crowd is accepted on an emulator here
    name = load_spec(spec).campaigns[0].name
    store = Store.open(state)
    try:
        facts = gather(emulator_db=em_state / "prolific.db", door_db=state / "prolific-site" / "prolific-site.sqlite",
                       market_db=state / "market" / "market.db", store=store, campaign=name)
    finally:
        store.close()
    assert facts.studies and facts.reward_charges, "no submission was approved: the audit checked nothing"
    assert check(facts) == [], check(facts)
    print(f"real road: {len(facts.studies)} studies, {len(facts.reward_charges)} approved submissions, "
          f"charged {facts.charged_minor / 100:.2f} = ledger {facts.ledger_spent}; "
          f"{len(described.seen) if described else 0} operations checked against the description")
