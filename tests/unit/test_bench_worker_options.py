"""The benchmark's ``--worker-option name=value`` pairs become typed WorkerOptions fields."""

from __future__ import annotations

import pytest

from bench.worker import parse_options


def test_values_take_their_field_types() -> None:
    assert parse_options(["steps_per_turn=4", "retry_delay=0.1"]) == {
        "steps_per_turn": 4,
        "retry_delay": 0.1,
    }
    assert parse_options(["yield_idle_turns=True"]) == {"yield_idle_turns": True}
    assert parse_options(["yield_idle_turns=false"]) == {"yield_idle_turns": False}


@pytest.mark.parametrize("pair", ["yield_idle_turns=yes", "no_such_field=1"])
def test_bad_pairs_are_refused(pair: str) -> None:
    with pytest.raises(SystemExit):
        parse_options([pair])
