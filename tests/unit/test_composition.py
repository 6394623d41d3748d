"""The engine is a transport and a store: ``Engine(transport=..., store=...)`` is the
composition, ``Engine.from_url`` builds the same pair, and what cannot work is refused at
once (on a SQLite file here; tests/integration/test_composition_cluster.py on rqlite). A
pair on two databases: tests/unit/test_split_pair.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from raftflow.stores.store import SqlStore
from raftflow.transports.transport import SqlTransport

from raftflow import Engine
from raftflow.errors import ConfigurationError


def test_an_engine_built_on_a_transport_and_a_store_runs_workflows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    transport, store = SqlTransport.from_url(url), SqlStore.from_url(url)
    engine = Engine(transport=transport, store=store)
    try:
        assert engine.transport is transport and engine.store is store
        # One database, one connection: the store now uses the transport's.
        assert store.database is transport.database

        @engine.step
        def double(n: int) -> int:
            return 2 * n

        @engine.workflow
        def twice(n: int) -> int:
            return double(double(n))

        handle = engine.start(twice, 5)
        with engine.running_worker(concurrency=2):
            assert handle.result(timeout=20) == 20
        assert [s.name for s in handle.steps()] == ["double", "double"]
        assert transport.stats().messages == 0  # the final commit acked the last event
    finally:
        engine.close()


def test_from_url_builds_the_pair_on_one_connection(tmp_path: Path) -> None:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'app.db'}")
    try:
        assert type(engine.transport) is SqlTransport and type(engine.store) is SqlStore
        assert engine.store.database is engine.transport.database
    finally:
        engine.close()


@pytest.mark.parametrize(
    "make",
    [
        lambda: Engine(verifyy=False),
        lambda: Engine(url="sqlite://", retry_timout=3),
        lambda: Engine.from_url("sqlite://", transport_options={}),
        lambda: SqlStore.from_url("sqlite://", timeot=1),
    ],
    ids=["Engine", "Engine-url", "from_url", "SqlStore"],
)
def test_an_unknown_option_is_refused_at_once_naming_it(make: object) -> None:
    with pytest.raises(ConfigurationError, match="unknown option") as caught:
        make()  # type: ignore[operator]
    assert "the connection options are" in str(caught.value)


def test_a_transport_without_a_store_or_options_beside_a_pair_are_refused(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    transport, store = SqlTransport.from_url(url), SqlStore.from_url(url)
    try:
        with pytest.raises(ConfigurationError, match="both a transport and a store"):
            Engine(transport=transport)
        with pytest.raises(ConfigurationError, match="give them to their from_url"):
            Engine(transport=transport, store=store, url=url)
    finally:
        transport.close()
        store.close()
