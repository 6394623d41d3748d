"""What the HTTP client costs per request (docs/performance.md, "The HTTP client").

``python -m bench.probe_http [--rounds R] [--n N]`` starts a local 3-node rqlite cluster
and sends single-row INSERTs to its leader, one at a time, through raftflow's connection
with each HTTP client -- ``raftflow`` (its own, the default) and ``httpx`` --
sync and async, in alternating rounds of N requests. It prints each round's p50 and the
process CPU per request (the machine is noisy: compare within a round).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

from raftflow.transports.db.flow import Request, Statement
from raftflow.transports.rqlite.client import (
    AsyncRqliteConnection,
    HttpLibrary,
    RqliteConnection,
)
from raftflow.transports.rqlite.local.cluster import LocalCluster
from raftflow.transports.rqlite.protocol import RqliteConfig

INSERT = Statement("probe.raw", "INSERT INTO probe_http (v) VALUES (:v)", {"v": 1})
KINDS = ("sync raftflow", "sync httpx", "async raftflow", "async httpx")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args()
    with LocalCluster(3) as cluster:
        config = RqliteConfig(nodes=tuple(cluster.urls))
        setup = RqliteConnection(config)
        create = Statement("probe.create", "CREATE TABLE probe_http (v INTEGER)")
        setup.send(Request((create,))).raise_for_errors()
        setup.close()
        probes = {kind: _probe(kind, config, args.n) for kind in KINDS}
        for round_ in range(args.rounds):
            order = KINDS if round_ % 2 == 0 else tuple(reversed(KINDS))
            results = {kind: probes[kind]() for kind in order}
            print(
                f"round {round_}: "
                + ", ".join(
                    f"{k} {p50:.2f} ms ({cpu:.0f} us CPU)" for k, (p50, cpu) in results.items()
                ),
                flush=True,
            )


def _probe(kind: str, config: RqliteConfig, n: int) -> Callable[[], tuple[float, float]]:
    """A function timing ``n`` requests: (p50 ms, process CPU us per request)."""
    mode, library = kind.split()
    http: HttpLibrary = "httpx" if library == "httpx" else "raftflow"
    if mode == "sync":

        def sync_round() -> tuple[float, float]:
            connection = RqliteConnection(config, http=http)
            try:
                connection.send(Request((INSERT,)))  # connect and find the leader first
                return _timed(lambda: connection.send(Request((INSERT,))), n)
            finally:
                connection.close()

        return sync_round

    async def async_round() -> tuple[float, float]:
        connection = AsyncRqliteConnection(config, http=http)
        try:
            await connection.send(Request((INSERT,)))
            seconds: list[float] = []
            cpu = time.process_time()
            for _ in range(n):
                started = time.perf_counter()
                await connection.send(Request((INSERT,)))
                seconds.append(time.perf_counter() - started)
            return _summary(seconds, time.process_time() - cpu, n)
        finally:
            await connection.close()

    return lambda: asyncio.run(async_round())


def _timed(send: Callable[[], object], n: int) -> tuple[float, float]:
    seconds: list[float] = []
    cpu = time.process_time()
    for _ in range(n):
        started = time.perf_counter()
        send()
        seconds.append(time.perf_counter() - started)
    return _summary(seconds, time.process_time() - cpu, n)


def _summary(seconds: list[float], cpu: float, n: int) -> tuple[float, float]:
    return statistics.median(seconds) * 1000, cpu / n * 1e6


if __name__ == "__main__":
    main()
