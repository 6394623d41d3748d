"""What raftflow's HTTP/1.1 framing and rqlite protocol cost per request, without a network.

``python -m bench.probe_protocol [--n N] [--rounds R]`` drives the I/O-free layers of
``transports/rqlite/`` exactly as the drivers of :mod:`raftflow.transports.rqlite.wire`
do for one request -- the exchange flow (the endpoint, the JSON body), the request's
bytes, the reply fed to the framing in one read, the reply decoded into a
:class:`~raftflow.transports.db.flow.Response` -- for the two requests of a 5-step
workflow's steps at one client: a step recorded within the turn (``lean_step``) and the
outcome with the last step (``lean_final*``, three statements). The replies are canned
rqlite 8 replies. It prints the process CPU time per request (``time.process_time``),
each round's and the median; compare two commits' figures on the same machine.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

from raftflow.stores.commit import Commit
from raftflow.stores.commit_sql import final_statements, lean_statements
from raftflow.stores.records import Status
from raftflow.transports.db.flow import Request, Response
from raftflow.transports.rqlite.framing import Framing, origin_of
from raftflow.transports.rqlite.protocol import HttpCall, NodeRing, RqliteConfig, exchange

NODE = "http://127.0.0.1:4001"
_HEAD = (
    "HTTP/1.1 200 OK\r\n"
    "Access-Control-Allow-Credentials: true\r\n"
    "Access-Control-Allow-Headers: Content-Type, Authorization\r\n"
    "Access-Control-Allow-Methods: OPTIONS, GET, POST\r\n"
    "Content-Type: application/json; charset=utf-8\r\n"
    "X-Rqlite-Version: 8\r\n"
    "Date: Sat, 05 Dec 2026 00:22:00 GMT\r\n"
    "Content-Length: {length}\r\n\r\n"
)
_ONE_ROW = '{"last_insert_id":1,"rows_affected":1}'


def _reply(body: str) -> bytes:
    return _HEAD.format(length=len(body)).encode() + body.encode()


def _commit(idx: int) -> Commit:
    return Commit(
        execution_id="d1e89b6f0d3348dfb207c9d2604bb756",
        lease_seq=1,
        lease_token="vm:7739:f20488:0beb163ffc4740b48e238fbc1ecd05aa",
        worker_id="vm:7739:f20488",
        step_idx=idx,
        step_name="tick",
        step_status="succeeded",
        step_output=str(idx + 1),
        step_started_at=1796430120.2229218,
    )


def cases() -> dict[str, tuple[Request, bytes]]:
    """The requests measured, each with its reply."""
    now = 1796430120.2239413
    step = replace(_commit(0), status=Status.RUNNING, next_token="t")
    final = replace(_commit(4), status=Status.SUCCEEDED, output="5", unlinked=True)
    return {
        "lean_step": (
            Request(lean_statements([step], now), transaction=False),
            _reply('{"results":[' + _ONE_ROW + "]}"),
        ),
        "lean_final": (
            Request(final_statements([final], now), transaction=True),
            _reply('{"results":[' + ",".join([_ONE_ROW] * 3) + "]}"),
        ),
    }


def one_request(
    config: RqliteConfig, ring: NodeRing, request: Request, reply: bytes
) -> Callable[[], Response]:
    """One request's whole path through the protocol and the framing, as a driver runs it."""
    origin = origin_of(NODE)
    framing = Framing()

    def run() -> Response:
        flow = exchange(config, ring, request, time.monotonic)
        call = next(flow)
        assert isinstance(call, HttpCall)
        framing.request(call, origin, None)
        answer = framing.feed(reply)
        assert answer is not None and framing.next_cycle()
        try:
            flow.send(answer)
        except StopIteration as stop:
            response: Response = stop.value
            return response
        raise AssertionError("the exchange asked for another attempt")

    return run


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.probe_protocol", description=__doc__)
    parser.add_argument("--n", type=int, default=100_000, help="requests per case and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    config = RqliteConfig(nodes=(NODE,))
    runs = {
        name: one_request(config, NodeRing(config.nodes), request, reply)
        for name, (request, reply) in cases().items()
    }
    figures: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(args.rounds):
        for name, run in runs.items():
            started = time.process_time()
            for _ in range(args.n):
                run()
            figures[name].append((time.process_time() - started) / args.n * 1e6)
        print(
            f"round {round_}: "
            + ", ".join(f"{name} {values[-1]:.2f} us" for name, values in figures.items()),
            flush=True,
        )
    for name, values in figures.items():
        print(f"{name}: median {statistics.median(values):.2f} us CPU per request")


if __name__ == "__main__":
    main()
