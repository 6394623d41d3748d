"""One client's steps, for a profiler (docs/performance.md, "Where a step's time goes").

``python -m bench.step_profile [--executions N] [--sync]`` starts a local 3-node rqlite
cluster and an in-process worker of concurrency 1, runs 20 untimed 5-step workflows, then
N timed ones one after another (``start()`` then ``result()``), and prints steps/s. Run it
under a sampling profiler to see where the worker's time goes between two writes::

    py-spy record --format raw -o step.txt -- .venv/bin/python -m bench.step_profile
"""

from __future__ import annotations

import argparse
import time

from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.step_profile", description=__doc__)
    parser.add_argument("--executions", type=int, default=400)
    parser.add_argument("--sync", action="store_true", help="a sync workflow and sync steps")
    args = parser.parse_args()
    with LocalCluster(3) as cluster:
        engine = Engine.from_url(cluster.urls)

        @engine.step
        async def tick(i: int) -> int:
            return i + 1

        @engine.workflow
        async def chain(n: int) -> int:
            x = 0
            for _ in range(n):
                x = await tick(x)
            return x

        @engine.step
        def tick_sync(i: int) -> int:
            return i + 1

        @engine.workflow
        def chain_sync(n: int) -> int:
            x = 0
            for _ in range(n):
                x = tick_sync(x)
            return x

        workflow = chain_sync if args.sync else chain
        try:
            with engine.running_worker(concurrency=1):
                for _ in range(20):
                    engine.start(workflow, 5).result(timeout=30)
                started = time.perf_counter()
                for _ in range(args.executions):
                    engine.start(workflow, 5).result(timeout=30)
                elapsed = time.perf_counter() - started
        finally:
            engine.close()
    steps = args.executions * 5
    rate = steps / elapsed
    print(f"{args.executions} executions x 5 steps in {elapsed:.2f} s: {rate:.0f} steps/s")


if __name__ == "__main__":
    main()
