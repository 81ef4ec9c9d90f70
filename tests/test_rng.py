"""Seeds stable across processes; the batch form gives exactly what one call a seed gives."""

from __future__ import annotations

import pytest

from campaign.rng import stable_seed, stable_seeds


@pytest.mark.parametrize("parts", [(7, "slot-order", "ab" * 32), ("x",), (0,), ("é\x1f", 3.5, None), ()])
def test_the_batch_form_equals_one_call_a_seed(parts):
    lasts = ["AWORKER0000001", "", "ünï", 12, "a\x1fb"]
    assert stable_seeds(parts, lasts) == [stable_seed(*parts, last) for last in lasts]
    assert stable_seeds(parts, iter(lasts)) == stable_seeds(parts, lasts)  # any iterable, read once
    assert stable_seeds(parts, []) == []


def test_a_seed_is_64_bits_and_fixed():
    assert stable_seed(1, "slot-order", "c", "w") == stable_seed(1, "slot-order", "c", "w") < 2**64
    assert stable_seed(1, "a") != stable_seed(1, "b")


@pytest.mark.parametrize("command", [("run", "--config", "x.yaml"), ("simulate", "--config", "x.yaml"),
                                     ("preview", "--config", "x.yaml", "--out", "o"), ("aggregate", "labels.tsv"),
                                     ("crowd", "run", "--config", "x.yaml"), ("market", "serve"),
                                     ("bench", "hostile", "--seeds"), ("bench", "prolific", "--seeds")])
@pytest.mark.parametrize("seed", ["-1", "9223372036854775808", "seven"])
def test_every_seed_option_refuses_what_a_generator_cannot_take(tmp_path, command, seed):
    """`campaign run --seed -1` stored the seed with its campaigns; numpy refuses a negative seed, so the
    finish step (the nugget export's MACE) failed on every pass and the campaign never finished
    (`campaign simulate --seed -1` never returned). A seed is a whole number from 0 to 2**63 - 1."""
    from tests.support.cli import cli_output

    args = [*command, seed] if command[-1] == "--seeds" else [*command, "--seed", seed]
    p = cli_output(*args, cwd=tmp_path)
    assert p.returncode == 2, (args, p.stdout[-500:], p.stderr[-500:])
    assert "a seed is" in p.stderr and "Traceback" not in p.stderr
    assert list(tmp_path.iterdir()) == []  # nothing made


def test_seed_arg_takes_the_whole_range():
    from campaign.rng import MAX_SEED, seed_arg, seed_list

    assert seed_arg("0") == 0 and seed_arg(str(MAX_SEED)) == MAX_SEED
    assert seed_list("1, 2,3") == [1, 2, 3]
