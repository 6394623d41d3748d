"""The HTTP/1.1 framing of raftflow's own client (transports/rqlite/wire.py), sans I/O: every
way RFC 9112 lets a reply end, fed whole and a byte at a time, and what makes it refuse a
reply or a connection. Against real rqlite nodes: tests/integration/test_wire.py."""

from __future__ import annotations

import pytest
from raftflow.transports.rqlite.framing import Framing, MalformedReplyError, origin_of
from raftflow.transports.rqlite.protocol import HttpCall, HttpReply

from raftflow.errors import ConfigurationError

LENGTH = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b"X-Rqlite-Served-By: 127.0.0.1:4002\r\nContent-Length: 13\r\n\r\n"
    b'{"results":1}'
)
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5\r\nhello\r\n"
    b"1;name=value\r\n \r\n"  # a chunk extension
    b"6\r\nworld!\r\n"
    b"0\r\nX-Trailer: yes\r\n\r\n"
)


def feed_all(framing: Framing, data: bytes, step: int) -> list[HttpReply]:
    replies = []
    for i in range(0, len(data), step):
        reply = framing.feed(data[i : i + step])
        if reply is not None:
            replies.append(reply)
    return replies


@pytest.mark.parametrize("step", [1, 2, 7, 4096])
def test_a_content_length_reply_in_any_pieces(step: int) -> None:
    framing = Framing()
    assert feed_all(framing, LENGTH, step) == [HttpReply(200, b'{"results":1}', "127.0.0.1:4002")]
    assert framing.next_cycle()  # reusable, and clean for the next reply
    assert feed_all(framing, LENGTH, step)[0].body == b'{"results":1}'


@pytest.mark.parametrize("step", [1, 3, 4096])
def test_a_chunked_reply_with_extensions_and_trailers(step: int) -> None:
    framing = Framing()
    assert feed_all(framing, CHUNKED, step) == [HttpReply(200, b"hello world!", None)]
    assert framing.next_cycle()


def test_an_informational_reply_is_skipped_and_a_bodyless_one_ends_at_its_head() -> None:
    framing = Framing()
    reply = framing.feed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n")
    assert reply == HttpReply(204, b"", None)
    assert framing.next_cycle()
    assert framing.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") == HttpReply(200, b"")


def test_a_reply_without_length_ends_with_the_connection_and_is_not_reused() -> None:
    framing = Framing()
    assert framing.feed(b"HTTP/1.1 200 OK\r\n\r\npart one, ") is None
    assert framing.feed(b"part two") is None
    assert framing.feed(b"") == HttpReply(200, b"part one, part two")
    assert not framing.next_cycle()


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n",
    ],
)
def test_a_connection_the_server_closes_is_not_reused(head: bytes) -> None:
    framing = Framing()
    assert framing.feed(head + b"ok") == HttpReply(200, b"ok")
    assert not framing.next_cycle()


def test_http_1_0_keep_alive_is_reused() -> None:
    framing = Framing()
    reply = framing.feed(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
    assert reply == HttpReply(200, b"")
    assert framing.next_cycle()


def test_bytes_after_the_reply_make_the_connection_unusable() -> None:
    framing = Framing()
    assert framing.feed(LENGTH + b"HTTP/1.1 200") is not None
    assert not framing.next_cycle()  # they would be read as the next request's reply


def test_a_head_read_whole_with_its_body_in_pieces() -> None:
    framing = Framing()
    head = LENGTH.index(b"\r\n\r\n") + 4
    assert framing.feed(LENGTH[: head + 3]) is None
    assert framing.feed(LENGTH[head + 3 :]) == HttpReply(200, b'{"results":1}', "127.0.0.1:4002")
    assert framing.next_cycle()


def test_bytes_after_a_bodyless_reply_make_the_connection_unusable() -> None:
    framing = Framing()
    assert framing.feed(b"HTTP/1.1 204 No Content\r\n\r\nX") == HttpReply(204, b"", None)
    assert not framing.next_cycle()


def test_a_reply_is_not_complete_before_its_last_byte() -> None:
    framing = Framing()
    assert framing.feed(LENGTH[:-1]) is None
    with pytest.raises(MalformedReplyError, match="closed before the reply was complete"):
        framing.feed(b"")
    assert not framing.next_cycle()


@pytest.mark.parametrize(
    "reply, error",
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "status line"),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", "status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed header"),
        (b"HTTP/1.1 200 OK\r\n Folded: value\r\n\r\n", "malformed header"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad content-length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "transfer-encoding"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "transfer-encoding"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY", "CRLF"),
    ],
)
def test_a_malformed_reply_is_refused(reply: bytes, error: str) -> None:
    with pytest.raises(MalformedReplyError, match=error):
        Framing().feed(reply)


def test_an_endless_head_is_refused() -> None:
    framing = Framing()
    framing.feed(b"HTTP/1.1 200 OK\r\n")
    with pytest.raises(MalformedReplyError, match="too large"):
        for _ in range(100):
            framing.feed(b"X-Filler: " + b"a" * 1000 + b"\r\n")


def test_the_request_carries_exactly_what_raftflow_builds() -> None:
    origin = origin_of("http://127.0.0.1:4001")
    call = HttpCall("http://127.0.0.1:4001", "/db/execute", {"transaction": ""}, b"[[1]]", 5.0)
    assert Framing().request(call, origin, b"Basic dTpw") == (
        b"POST /db/execute?transaction= HTTP/1.1\r\nHost: 127.0.0.1:4001\r\n"
        b"Authorization: Basic dTpw\r\nContent-Type: application/json\r\n"
        b"Content-Length: 5\r\n\r\n[[1]]"
    )
    get = HttpCall("http://127.0.0.1:4001", "/status", {}, None, 5.0)
    assert Framing().request(get, origin, None) == (
        b"GET /status HTTP/1.1\r\nHost: 127.0.0.1:4001\r\n\r\n"
    )


@pytest.mark.parametrize(
    "node", ["http://127.0.0.1:4001\r\nX-Evil: 1", "http://bad host:4001", "http://:4001"]
)
def test_a_node_url_that_could_smuggle_a_header_is_refused(node: str) -> None:
    with pytest.raises(ConfigurationError, match="not a node URL"):
        origin_of(node)
