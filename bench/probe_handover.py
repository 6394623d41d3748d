"""A/B of ``result()``'s outcome hand-over (docs/performance.md, "Latency").

``python -m bench.probe_handover [--rounds R] [--n N]`` starts a local 3-node rqlite
cluster and a worker in this process (``bench.app``), then times, in alternating rounds of
N each (the machine is noisy: compare medians of the same round):

- ``raw``: a single-row INSERT (the raw phase's write);
- ``handed``: ``start(one, i).result()`` of a 1-step workflow, the outcome handed over by
  the worker that committed it (engine/runtime/local.py);
- ``read``: the same with the hand-over switched off: ``result()`` reads the execution
  once after the worker's news, as before.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from raftflow.transports.db.flow import Request, Statement
from raftflow.transports.rqlite.local.cluster import LocalCluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--n", type=int, default=60)
    args = parser.parse_args()
    from bench import app
    from bench.probe_latency import alternate

    engine = app.engine
    with LocalCluster(3) as cluster:
        engine.connect("http://" + ",".join(u.split("://", 1)[1] for u in cluster.urls))
        backend = engine.store
        create = Statement("probe.create", "CREATE TABLE IF NOT EXISTS probe_raw (v INTEGER)")
        backend.run(_single(create))
        local = engine.local
        handing = local.outcome

        def raw() -> float:
            t = time.perf_counter()
            backend.run(_single(Statement("probe.raw", "INSERT INTO probe_raw VALUES (1)")))
            return time.perf_counter() - t

        def one(handed: bool) -> Callable[[], float]:
            def once() -> float:
                local.outcome = handing if handed else _none  # type: ignore[method-assign]
                t = time.perf_counter()
                engine.start(app.one, 1).result(timeout=60)
                return time.perf_counter() - t

            return once

        with engine.running_worker(concurrency=1):
            alternate({"raw": raw, "handed": one(True), "read": one(False)}, args.rounds, args.n)
        engine.close()


def _none(*_: Any) -> None:
    return None


def _single(statement: Statement):  # type: ignore[no-untyped-def]
    response = yield Request((statement,))
    response.raise_for_errors()


if __name__ == "__main__":
    main()
