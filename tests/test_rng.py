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

