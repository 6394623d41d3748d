"""Unit tests of rqlite response parsing and retry decisions (no server, no HTTP).

:func:`raftflow.transports.rqlite.protocol.exchange` is I/O-free: it yields the HTTP calls to make
and receives what came back. Feeding it replies rqlite sends in bad moments (503 without
a leader, a top-level error after a leader change, truncated JSON, a dropped connection)
pins down what is retried, what is ambiguous and what is raised. The same replies from a
real cluster are exercised by the integration and chaos suites.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from raftflow.transports.db.flow import Request, Statement
from raftflow.transports.rqlite.client import AsyncRqliteConnection, RqliteConnection
from raftflow.transports.rqlite.protocol import (
    HttpCall,
    HttpReply,
    NetworkFailure,
    NodeRing,
    RqliteConfig,
    Sleep,
    encode,
    exchange,
)

from raftflow.errors import (
    AuthenticationError,
    ConfigurationError,
    ProtocolError,
    StatementError,
    UnavailableError,
)

WRITE = Request((Statement("t.write", "INSERT INTO t VALUES (?)", (1,)),))
READ = Request((Statement("t.read", "SELECT * FROM t"),), level="weak")
MIXED = Request(
    (Statement("t.write", "UPDATE t SET a = :a", {"a": 1}), Statement("t.read", "SELECT a FROM t"))
)


def ok(*results: dict[str, Any]) -> HttpReply:
    return HttpReply(200, json.dumps({"results": list(results)}).encode())


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def drive(
    request: Request,
    replies: Iterator[HttpReply | NetworkFailure],
    *,
    nodes: int = 3,
    retry_timeout: float = 5.0,
) -> tuple[Any, list[HttpCall], list[float]]:
    config = RqliteConfig(
        nodes=tuple(f"http://127.0.0.1:{4001 + 2 * i}" for i in range(nodes)),
        retry_timeout=retry_timeout,
    )
    clock = FakeClock()
    calls: list[HttpCall] = []
    sleeps: list[float] = []
    flow = exchange(config, NodeRing(config.nodes), request, clock)
    try:
        step = next(flow)
        while True:
            if isinstance(step, Sleep):
                sleeps.append(step.seconds)
                clock.now += step.seconds
                step = flow.send(None)
            else:
                calls.append(step)
                clock.now += 0.01
                step = flow.send(next(replies))
    except StopIteration as stop:
        return stop.value, calls, sleeps


# -- configuration ------------------------------------------------------------------------


def test_url_with_several_hosts_and_credentials() -> None:
    config = RqliteConfig.from_url("https://al%40ice:p%3Ass@h1:4001,h2:4003")
    assert config.nodes == ("https://h1:4001", "https://h2:4003")
    assert config.auth == ("al@ice", "p:ss")
    assert "p:ss" not in repr(config) and "p%3Ass" not in repr(config)


def test_list_of_urls_and_identity_ignores_order() -> None:
    a = RqliteConfig.from_url(["http://h1:1", "http://h2:2"])
    b = RqliteConfig.from_url("http://h2:2,h1:1")
    assert a.identity == b.identity


@pytest.mark.parametrize("url", ["ftp://h:1", "http://", "http://h:1,,h:2", ""])
def test_bad_urls_are_configuration_errors(url: str) -> None:
    with pytest.raises(ConfigurationError):
        RqliteConfig.from_url(url)


@pytest.mark.parametrize("field", ["timeout", "retry_timeout", "connect_timeout"])
@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf")])
def test_timeouts_must_be_positive(field: str, value: float) -> None:
    with pytest.raises(ConfigurationError):
        RqliteConfig(nodes=("http://h:1",), **{field: value})


# -- encoding -----------------------------------------------------------------------------


def test_endpoints_follow_the_permissions_they_need() -> None:
    assert encode(READ)[:2] == ("/db/query", {"level": "weak"})
    assert encode(WRITE)[:2] == ("/db/execute", {"noparse": ""})
    path, params, body = encode(MIXED)
    assert (path, params) == ("/db/request", {"noparse": "", "transaction": ""})
    assert json.loads(body) == [["UPDATE t SET a = ?1", 1], ["SELECT a FROM t"]]


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO t VALUES (random())",
        "INSERT INTO t VALUES (RANDOMBLOB(4))",
        "INSERT INTO t VALUES (julianday('now'))",
        "INSERT INTO t VALUES (strftime('%s', 'NOW'))",
        "INSERT INTO t VALUES (unixepoch(:now))",  # the name in its named form
        "UPDATE t SET a = 1 RETURNING a",
        'INSERT INTO t ("time") VALUES (1)',  # a column: parsed anyway (errs that way)
        "INSERT INTO t VALUES ('\u00e9t\u00e9')",  # not ASCII
    ],
)
def test_a_write_rqlites_parse_might_change_is_parsed(sql: str) -> None:
    plain = Statement("plain", "INSERT INTO t (created_at, randomness) VALUES (?, ?)", (1, 2))
    assert "noparse" in encode(Request((plain,)))[1]  # words within words do not count
    # One such statement in the request, and the whole request is parsed, as before.
    assert "noparse" not in encode(Request((plain, Statement("s", sql))))[1]


# -- replies ------------------------------------------------------------------------------


def test_results_are_decoded_per_statement() -> None:
    response, calls, _ = drive(
        MIXED,
        iter(
            [
                ok(
                    {"rows_affected": 1, "last_insert_id": 3},
                    {"columns": ["a"], "types": ["integer"], "values": [[1]]},
                )
            ]
        ),
    )
    assert len(calls) == 1 and not response.ambiguous
    assert response[0].rows_affected == 1
    assert response[1].dicts() == [{"a": 1}]


def test_empty_query_result_has_no_values_key() -> None:
    response, _, _ = drive(READ, iter([ok({"columns": ["a"], "types": ["integer"]})]))
    assert response[0].rows == ()


def test_per_statement_error_names_the_statement() -> None:
    response, _, _ = drive(WRITE, iter([ok({"error": "UNIQUE constraint failed: t.a"})]))
    with pytest.raises(StatementError, match=r"t\.write failed: UNIQUE constraint"):
        response.raise_for_errors()


def test_transaction_stopped_early_counts_the_rest_as_failed() -> None:
    response, _, _ = drive(MIXED, iter([ok({"error": "no such table: t"})]))
    assert response.rolled_back
    assert response[1].error is not None and response[1].error.startswith("not executed")


def test_no_leader_503_moves_on_and_is_not_ambiguous() -> None:
    replies = iter([HttpReply(503, b"leader not found"), ok({"rows_affected": 1})])
    response, calls, _ = drive(WRITE, replies)
    assert [c.node for c in calls] == ["http://127.0.0.1:4001", "http://127.0.0.1:4003"]
    assert not response.ambiguous


def test_refused_connection_is_not_ambiguous() -> None:
    replies = iter([NetworkFailure(sent=False, detail="refused"), ok({"rows_affected": 1})])
    response, _, _ = drive(WRITE, replies)
    assert not response.ambiguous


def test_lost_connection_after_sending_a_write_is_ambiguous() -> None:
    replies = iter([NetworkFailure(sent=True, detail="reset"), ok({"rows_affected": 0})])
    response, _, _ = drive(WRITE, replies)
    assert response.ambiguous  # the write may have been applied: flows read 0 rows as done


def test_top_level_error_after_a_leader_change_is_retried_and_ambiguous() -> None:
    lost = HttpReply(200, b'{"error": "leadership lost while committing log"}')
    response, calls, _ = drive(WRITE, iter([lost, ok({"rows_affected": 1})]))
    assert len(calls) == 2 and response.ambiguous


def test_reads_are_never_ambiguous() -> None:
    replies = iter([NetworkFailure(sent=True, detail="reset"), ok({"columns": [], "types": []})])
    response, _, _ = drive(READ, replies)
    assert not response.ambiguous


def test_truncated_json_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="unexpected answer"):
        drive(WRITE, iter([HttpReply(200, b'{"results": [{"rows_aff')]))


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32"])
def test_an_answer_is_read_in_any_encoding_json_reads(encoding: str) -> None:
    text = '{"results": [{"columns": ["a"], "values": [["\u00e9t\u00e9 \u2713"]]}]}'
    response, _, _ = drive(READ, iter([HttpReply(200, text.encode(encoding))]))
    assert response[0].rows == (("\u00e9t\u00e9 \u2713",),)


@pytest.mark.parametrize("body", [b'{"results": [{"values": [[1]]}]} x', b"{", b'{"\xff": 1}'])
def test_an_answer_that_is_not_json_is_a_protocol_error(body: bytes) -> None:
    with pytest.raises(ProtocolError, match="unexpected answer"):
        drive(WRITE, iter([HttpReply(200, body)]))


def test_results_that_are_not_a_list_are_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        drive(WRITE, iter([HttpReply(200, b'{"results": 7}')]))


def test_401_is_an_authentication_error_at_once() -> None:
    replies = iter([HttpReply(401, b"unauthorized")])
    with pytest.raises(AuthenticationError, match="401"):
        drive(WRITE, replies)


def test_400_is_a_protocol_error_not_retried() -> None:
    with pytest.raises(ProtocolError, match="HTTP 400"):
        drive(WRITE, iter([HttpReply(400, b"bad json")]))


def test_500_is_retried_as_ambiguous() -> None:
    replies = iter([HttpReply(500, b"raft apply timeout"), ok({"rows_affected": 1})])
    response, _, _ = drive(WRITE, replies)
    assert response.ambiguous


def test_budget_spent_raises_unavailable_with_backoff_between_rounds() -> None:
    def forever() -> Iterator[HttpReply]:
        while True:
            yield HttpReply(503, b"leader not found")

    with pytest.raises(UnavailableError, match=r"within 2s") as caught:
        drive(WRITE, forever(), retry_timeout=2.0)
    assert not caught.value.ambiguous


def test_backoff_doubles_up_to_a_second() -> None:
    attempts = 0

    def failing_then_ok() -> Iterator[HttpReply | NetworkFailure]:
        nonlocal attempts
        while attempts < 30:
            attempts += 1
            yield NetworkFailure(sent=False, detail="refused")
        yield ok({"rows_affected": 1})

    _, _, sleeps = drive(WRITE, failing_then_ok(), retry_timeout=60)
    assert sleeps[:4] == [0.05, 0.1, 0.2, 0.4]
    assert max(sleeps) == 1.0


# -- following the leader -----------------------------------------------------------------


def forwarded(*results: dict[str, Any]) -> HttpReply:
    """An answer a follower gave after forwarding the request to the leader."""
    return HttpReply(200, json.dumps({"results": list(results)}).encode(), "127.0.0.1:4002")


def test_a_forwarded_answer_moves_the_ring_to_the_next_node_once() -> None:
    config = RqliteConfig(nodes=("http://a:1", "http://b:1", "http://c:1"))
    ring = NodeRing(config.nodes)
    clock = FakeClock()

    def send(reply: HttpReply) -> HttpCall:
        flow = exchange(config, ring, WRITE, clock)
        call = next(flow)
        with pytest.raises(StopIteration):
            flow.send(reply)
        assert isinstance(call, HttpCall)
        return call

    assert send(forwarded({"rows_affected": 1})).node == "http://a:1"
    assert ring.node() == "http://b:1"  # a follower: the next request tries b
    assert send(ok({"rows_affected": 1})).node == "http://b:1"
    assert ring.node() == "http://b:1"  # b served it itself: the leader, kept
    # Concurrent answers of one follower move the ring once, not once each.
    ring.forwarded("http://b:1")
    ring.forwarded("http://b:1")
    assert ring.node() == "http://c:1"


def test_a_lone_node_is_kept_even_when_it_forwards() -> None:
    ring = NodeRing(("http://lb:4001",))  # e.g. a load balancer in front of the cluster
    ring.forwarded("http://lb:4001")
    assert ring.node() == "http://lb:4001"


@pytest.mark.parametrize(
    "make",
    [
        lambda config: RqliteConnection(config, http="curl"),
        lambda config: AsyncRqliteConnection(config, http="requests"),  # no async twin
    ],
)
def test_an_unknown_http_client_is_refused(make: Any) -> None:
    with pytest.raises(ConfigurationError, match="http must be one of"):
        make(RqliteConfig(nodes=("http://127.0.0.1:4001",)))


def test_the_async_twin_keeps_the_chosen_client_where_it_has_one() -> None:
    config = RqliteConfig(nodes=("http://127.0.0.1:4001",))
    for sync, twin in [("raftflow", "raftflow"), ("httpx", "httpx"), ("requests", "raftflow")]:
        connection = RqliteConnection(config, http=sync)  # type: ignore[arg-type]
        twin_connection = connection.to_async()
        try:
            assert twin_connection.http_library == twin
        finally:
            connection.close()
            asyncio.run(twin_connection.close())
