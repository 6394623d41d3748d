"""The async driver's connection protocol (transports/rqlite/wire.py, ``_ReplyReader``) on
a transport of the test's own: what ends its request when the connection ends, before or
after the request was sent. Against real rqlite nodes: tests/integration/test_wire.py."""

from __future__ import annotations

import asyncio

import pytest
from raftflow.transports.rqlite.framing import MalformedReplyError
from raftflow.transports.rqlite.protocol import HttpReply
from raftflow.transports.rqlite.wire import _reader_is_fresh, _ReplyReader


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.sent.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def _reader() -> tuple[_ReplyReader, _Transport]:
    reader, transport = _ReplyReader(), _Transport()
    reader.connection_made(transport)
    return reader, transport


def _exchange(reader: _ReplyReader, after_send: list[bytes]) -> HttpReply:
    """One request; ``after_send`` arrive once it is sent (b"": the server's EOF)."""

    async def run() -> HttpReply:
        loop = asyncio.get_running_loop()
        for data in after_send:  # run once the request is sent, in order
            if data:
                loop.call_soon(reader.data_received, data)
            else:
                loop.call_soon(reader.eof_received)
        return await reader.exchange(b"GET / HTTP/1.1\r\n\r\n", loop.time() + 5)

    return asyncio.run(run())


def test_a_reply_in_pieces_is_the_request_s_and_the_connection_stays_fresh() -> None:
    reader, transport = _reader()
    reply = _exchange(reader, [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\no", b"k"])
    assert reply == HttpReply(200, b"ok") and transport.sent == [b"GET / HTTP/1.1\r\n\r\n"]
    assert reader.framing.next_cycle() and _reader_is_fresh(reader)


def test_bytes_nobody_asked_for_make_the_connection_stale() -> None:
    reader, _ = _reader()
    reader.data_received(b"HTTP/1.1 200 OK\r\n")
    assert not _reader_is_fresh(reader)


def test_a_reply_that_ends_with_the_connection() -> None:
    reader, _ = _reader()
    reply = _exchange(reader, [b"HTTP/1.1 200 OK\r\n\r\nall of it", b""])
    assert reply == HttpReply(200, b"all of it") and not _reader_is_fresh(reader)


def test_a_connection_that_ended_before_the_request_fails_it_at_once() -> None:
    # Not after the request's deadline: its reply can never come.
    reader, _ = _reader()
    reader.eof_received()
    with pytest.raises(MalformedReplyError, match="closed before the reply was complete"):
        _exchange(reader, [])


def test_a_connection_lost_with_an_error_fails_the_request_with_it() -> None:
    reader, _ = _reader()
    error = ConnectionResetError("reset by peer")
    reader.connection_lost(error)
    with pytest.raises(ConnectionResetError) as raised:
        _exchange(reader, [])
    assert raised.value is error
