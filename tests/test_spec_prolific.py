"""The spec's Prolific part: `marketplace: prolific | prolific-local`, the `prolific:` block and
`task_site.public_url`, read into `ProlificConfig`, every problem as file:line: field: message."""

from decimal import Decimal

from campaign.prolific.study import ProlificConfig
from campaign.spec import load_spec
from tests.support.cli import cli, cli_output, run_args
from tests.support.paths import ROOT
from tests.support.specs import VALID_HEAD
from tests.support.specs import spec_problems as problems
from tests.support.specs import write_spec_text as write

GOOD = VALID_HEAD + """\
    marketplace: prolific-local
    prolific:
      workspace: null
      reward: "1.50"
      currency: GBP
      bundle: 5
      estimated_minutes: 10
      maximum_minutes: 40
      devices: [desktop]
      filters: {approval_rate: 95, countries: [GB, US], languages: [English], block_list: null}
      fee_rate: "0.333"
      vat_rate: "0.2"
    task_site:
      public_url: http://127.0.0.1:0
    budget: "10.00"
    crowd:
      kind: simulated
      workers: 40
      truth: none
"""


def test_the_contract_block_reads_into_prolific_config(tmp_path):
    c = load_spec(write(tmp_path, GOOD)).campaigns[0]
    assert c.marketplace == "prolific-local" and c.public_url == "http://127.0.0.1:0"
    assert c.prolific == ProlificConfig(public_url="", bundle=5, estimated_minutes=10, maximum_minutes=40,
                                        reward=Decimal("1.50"), currency="GBP", fee_rate=Decimal("0.333"),
                                        vat_rate=Decimal("0.2"), devices=("desktop",), approval_rate=95,
                                        countries=("GB", "US"), languages=("English",), block_list=None)
    per_hour = load_spec(write(tmp_path, GOOD.replace('reward: "1.50"', 'reward_per_hour: "9.00"'))).campaigns[0]
    assert per_hour.prolific is not None and per_hour.prolific.reward_per_hour == Decimal("9.00")


def test_the_shipped_example_is_valid():
    c = load_spec(ROOT / "examples" / "prolific.yaml").campaigns[0]
    assert c.marketplace == "prolific-local" and c.crowd.kind == "simulated" and c.prolific is not None


def test_errors_in_the_block_are_reported_at_their_lines(tmp_path):
    bad = (GOOD.replace("bundle: 5", "bundle: 0").replace("devices: [desktop]", "devices: [phone]")
           .replace("countries: [GB, US]", "countries: [gb]").replace('vat_rate: "0.2"', 'vat_rate: "1.5"')
           .replace("maximum_minutes: 40", "maximum_minutes: 5").replace("workspace: null", "workspace: null\n      colour: red"))
    ps = problems(tmp_path, bad)
    lines = {p.split(":")[1]: p for p in ps}
    text = bad.splitlines()
    for field, needle in (("bundle", "bundle: 0"), ("devices", "devices: [phone]"), ("vat_rate", 'vat_rate: "1.5"'),
                          ("maximum_minutes", "maximum_minutes: 5"), ("colour", "colour: red")):
        line = str(next(i for i, t in enumerate(text, 1) if needle in t))
        assert line in lines and f"prolific.{field}" in lines[line], (field, ps)
    assert any("prolific.filters.countries" in p for p in ps)


def test_reward_below_minimum_pay_and_both_rewards_are_refused(tmp_path):
    ps = problems(tmp_path, GOOD.replace('reward: "1.50"', 'reward: "0.50"'))
    assert len(ps) == 1 and ":11: campaigns[0].prolific.reward:" in ps[0] and "below Prolific's minimum" in ps[0], ps
    ps = problems(tmp_path, GOOD.replace('reward: "1.50"', 'reward: "1.50"\n      reward_per_hour: "9.00"'))
    assert any("exactly one of 'reward'" in p for p in ps)


def test_budget_below_one_place_is_refused(tmp_path):
    ps = problems(tmp_path, GOOD.replace('budget: "10.00"', 'budget: "2.00"'))
    # 1.50 + fee 0.50 + VAT 0.10
    assert any("below the cost of one Prolific place (2.10 GBP" in p for p in ps), ps


def test_which_marketplaces_take_which_blocks(tmp_path):
    ps = problems(tmp_path, GOOD.replace("marketplace: prolific-local", "marketplace: local"))
    assert any("campaigns[0].prolific: only Prolific campaigns take 'prolific'" in p for p in ps)
    assert any("campaigns[0].task_site: only Prolific campaigns take 'task_site'" in p for p in ps)
    no_block = GOOD.split("    prolific:")[0] + '    budget: "10.00"\n'
    assert any("needs a 'prolific:' block" in p for p in problems(tmp_path, no_block))
    # real Prolific: no simulated crowd, and a public address participants can reach
    real = GOOD.replace("marketplace: prolific-local", "marketplace: prolific")
    ps = problems(tmp_path, real)
    assert any("campaigns[0].crowd.kind: a simulated crowd can only work" in p for p in ps)
    assert any("port 0 stands for" in p for p in ps)
    real = real.replace("      kind: simulated\n      workers: 40\n", "      kind: none\n")
    assert any("needs task_site.public_url" in p
               for p in problems(tmp_path, real.replace("    task_site:\n      public_url: http://127.0.0.1:0\n", "")))
    ok = load_spec(write(tmp_path, real.replace("http://127.0.0.1:0", "https://tasks.example.org"))).campaigns[0]
    assert ok.marketplace == "prolific" and ok.public_url == "https://tasks.example.org"


def test_older_campaigns_keep_their_fingerprints(tmp_path):
    """Campaigns stored before Prolific existed compare their fingerprint on resume: the new fields are
    left out when unused."""
    from test_spec import GOOD as LOCAL  # noqa: PLC0415 - the plain spec of the other spec tests

    c = load_spec(write(tmp_path, LOCAL)).campaigns[0]
    assert c.prolific is None and c.public_url is None
    prolific = load_spec(write(tmp_path, GOOD)).campaigns[0]
    assert prolific.fingerprint() != load_spec(write(tmp_path, GOOD.replace("bundle: 5", "bundle: 4"))).campaigns[0].fingerprint()


def test_validate_exits_2_and_run_refuses_prolific_without_a_token(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PROLIFIC_TOKEN", raising=False)
    bad = write(tmp_path, GOOD.replace('reward: "1.50"', 'reward: "0.50"'))
    assert cli("validate", str(bad)) == 2
    assert ".prolific.reward" in capsys.readouterr().err
    real = (GOOD.replace("marketplace: prolific-local", "marketplace: prolific")
            .replace("      kind: simulated\n      workers: 40\n", "      kind: none\n")
            .replace("http://127.0.0.1:0", "https://tasks.example.org"))
    spec = write(tmp_path, real)
    assert cli("validate", str(spec)) == 0  # validate does not need the token
    out = capsys.readouterr().out
    assert "\u00a31.50 per submission of 5 HITs, \u00a32.10 a place with fee and VAT" in out and "$" not in out
    assert "assumed: fee 33.3%, VAT 20% on it; a run reads and uses the account's" in out  # an assumption, said so
    state = tmp_path / "state"
    out = cli_output(*run_args(spec, state, quiet=False))  # PROLIFIC_TOKEN is unset (above)
    assert out.returncode == 2, out.stderr
    assert "PROLIFIC_TOKEN" in out.stderr and "never stored or printed" in out.stderr
    assert not (state / "campaign.db").exists()  # refused before anything was created


def test_a_simulated_crowd_on_prolific_only_with_an_emulator_on_this_machine(tmp_path, monkeypatch):
    """`marketplace: prolific` with a simulated crowd is the real road played against `campaign prolific
    serve`: accepted when PROLIFIC_BASE_URL is a loopback address, refused for any other (real people)."""
    real = GOOD.replace("marketplace: prolific-local", "marketplace: prolific").replace(
        "http://127.0.0.1:0", "http://127.0.0.1:8443")
    for url in ("https://api.prolific.com/api/v1/", "http://10.0.0.5:8766/api/v1/", ""):
        monkeypatch.setenv("PROLIFIC_BASE_URL", url)
        assert any("campaigns[0].crowd.kind: a simulated crowd can only work" in p for p in problems(tmp_path, real)), url
    for url in ("http://127.0.0.1:8766/api/v1/", "http://localhost:8766/api/v1/", "http://[::1]:8766/api/v1/"):
        monkeypatch.setenv("PROLIFIC_BASE_URL", url)
        c = load_spec(write(tmp_path, real)).campaigns[0]
        assert c.marketplace == "prolific" and c.crowd.kind == "simulated", url


def test_crowd_run_plays_participants_only_on_an_emulator_here(tmp_path, monkeypatch, capsys):
    """`campaign crowd run` refuses to play participants on a Prolific that is not on this machine, and
    without a token from the environment or a file (never a flag's value)."""
    real = GOOD.replace("marketplace: prolific-local", "marketplace: prolific").replace(
        "http://127.0.0.1:0", "http://127.0.0.1:8443")
    monkeypatch.setenv("PROLIFIC_BASE_URL", "http://127.0.0.1:9/api/v1/")
    spec = write(tmp_path, real)
    monkeypatch.delenv("PROLIFIC_TOKEN", raising=False)
    assert cli("crowd", "run", "--config", spec) == 2
    assert "set PROLIFIC_TOKEN" in capsys.readouterr().err
    assert cli("crowd", "run", "--config", spec, "--prolific-token-file", tmp_path / "nothing") == 2
    assert "cannot read the token file" in capsys.readouterr().err
    monkeypatch.setenv("PROLIFIC_TOKEN", "t")
    assert cli("crowd", "run", "--config", spec, "--prolific-url", "https://api.prolific.com/api/v1/") == 2
    assert "is not on this machine" in capsys.readouterr().err


def test_pilot_and_too_quick_are_read_and_checked(tmp_path):
    """`prolific.pilot: N` (a whole number of places, at least 1, no more than the budget pays for) and
    `prolific.too_quick` (a share of the expected time, 0 to 1; 0.2 when absent, 0: never)."""
    plain = load_spec(write(tmp_path, GOOD)).campaigns[0].prolific
    assert plain is not None and plain.pilot is None and plain.too_quick == Decimal("0.2")
    given = load_spec(write(tmp_path, GOOD.replace('vat_rate: "0.2"', 'vat_rate: "0.2"\n      pilot: 3\n      too_quick: "0"')))
    cfg = given.campaigns[0].prolific
    assert cfg is not None and cfg.pilot == 3 and cfg.too_quick == Decimal("0")
    for value, needle in (("0", "at least 1"), ("two", "whole number"), ("8", "more than the budget pays for (4 at")):
        ps = problems(tmp_path, GOOD.replace('vat_rate: "0.2"', f'vat_rate: "0.2"\n      pilot: {value}'))
        assert any("prolific.pilot" in p and needle in p for p in ps), ps
    ps = problems(tmp_path, GOOD.replace('vat_rate: "0.2"', 'vat_rate: "0.2"\n      too_quick: "1.5"'))
    assert any("prolific.too_quick" in p and "between 0 and 1" in p for p in ps), ps
