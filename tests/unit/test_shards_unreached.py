"""A cluster out of reach when a deployment is opened (engine/shards/unreached.py): which
name it is taken to be, and the check it passes before anything else is sent to it once
it answers -- its identity and schema -- run again until it passes."""

from __future__ import annotations

from pathlib import Path

import pytest
from raftflow.engine.shards.deployment import open_shards
from raftflow.engine.shards.unreached import place_unreached, verify
from raftflow.stores import catalog as catalogs
from raftflow.stores.catalog import Identity
from raftflow.transports.db.database import FirstUse, open_database
from raftflow.transports.db.flow import Flow, Request, Statement

from raftflow import ConfigurationError, UnavailableError


def test_a_silent_cluster_is_the_one_missing_name_or_left_out_or_refused() -> None:
    urls = ["http://a:4001", "http://b:4001", "http://c:4001"]
    assert place_unreached([2], ["shard-3"], urls) == {2: "shard-3"}
    assert place_unreached([1, 2], [], urls) == {}  # no partitions there: left out
    with pytest.raises(UnavailableError, match="cannot be told"):
        place_unreached([1, 2], ["shard-2"], urls)
    with pytest.raises(UnavailableError, match="cannot be told"):
        place_unreached([2], ["shard-2", "shard-3"], urls)


def test_the_check_refuses_a_cluster_that_is_not_the_one_expected(tmp_path: Path) -> None:
    files = [f"sqlite:///{tmp_path / f'c{i}.db'}" for i in range(3)]
    open_shards(";".join(files[:2]), 1 << 20, None, {}).close()  # deployment one: c0, c1
    open_shards(f"{files[2]};sqlite:///{tmp_path / 'x.db'}", 1 << 20, None, {}).close()
    second = open_database(files[1])
    other = open_database(files[2])
    try:
        found = second.run(catalogs.identity(second.clock))
        assert found is not None and found.name == "shard-2"
        second.run(verify(second.clock, files[1], found, False))  # the one expected: passes
        with pytest.raises(ConfigurationError, match="list the clusters of one deployment"):
            other.run(verify(other.clock, files[2], found, False))  # another's shard-1
        renamed = Identity("shard-3", found.catalog, found.deployment)
        with pytest.raises(ConfigurationError, match="taken to be 'shard-3'"):
            second.run(verify(second.clock, files[1], renamed, False))
    finally:
        second.close()
        other.close()


def test_the_first_use_check_runs_before_any_request_until_it_passes(tmp_path: Path) -> None:
    database = open_database(f"sqlite:///{tmp_path / 'gate.db'}")
    answers = iter([UnavailableError("down"), None])
    checks: list[str] = []

    def check() -> Flow[None]:
        checks.append("check")
        answer = next(answers)
        if answer is not None:
            raise answer
        yield Request((Statement("probe", "SELECT 1"),))

    database.first_use = FirstUse(check)
    select = Request((Statement("one", "SELECT 1 AS one"),))

    def one() -> Flow[int]:
        response = yield select
        return int(response[0].first()["one"])  # type: ignore[index]

    try:
        with pytest.raises(UnavailableError):
            database.run(one())
        assert database.run(one()) == 1 and checks == ["check", "check"]
        assert database.run(one()) == 1 and checks == ["check", "check"]  # passed: not again
        assert database.to_async().first_use is database.first_use  # one check for both twins
    finally:
        database.close()
