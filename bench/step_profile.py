"""One client's steps, for a profiler (docs/performance.md, "Where a step's time goes").

``python -m bench.step_profile [--executions N] [--sync]`` starts a local 3-node rqlite
cluster and an in-process worker of concurrency 1, runs 20 untimed 5-step workflows, then
N timed ones one after another (``start()`` then ``result()``), and prints steps/s and the
CPU time per timed step of the worker's threads (its loop's and its workflow threads').
Run it under a sampling profiler to see where the worker's time goes between two writes,
then group the samples by part (:mod:`bench.profile_parts`)::

    py-spy record --rate 500 --threads --format raw -o step.txt -- \
        .venv/bin/python -m bench.step_profile
    .venv/bin/python -m bench.profile_parts step.txt --steps 2100 [--cpu US]  # (N + 20) x 5 steps
"""

from __future__ import annotations

import argparse
import threading
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
                started, cpu = time.perf_counter(), worker_cpu()
                for _ in range(args.executions):
                    engine.start(workflow, 5).result(timeout=30)
                elapsed = time.perf_counter() - started
                cpu = {name: seconds - cpu.get(name, 0.0) for name, seconds in worker_cpu().items()}
        finally:
            engine.close()
    steps = args.executions * 5
    rate = steps / elapsed
    print(f"{args.executions} executions x 5 steps in {elapsed:.2f} s: {rate:.0f} steps/s")
    print(f"the worker's threads: {sum(cpu.values()) / steps * 1e6:.0f} us CPU per step")


def worker_cpu() -> dict[str, float]:
    """The CPU seconds each of the worker's threads (``raftflow-*``) has used so far."""
    seconds = {}
    for thread in threading.enumerate():
        if thread.name.startswith("raftflow-") and thread.ident is not None:
            try:
                clock = time.pthread_getcpuclockid(thread.ident)
                seconds[f"{thread.name}/{thread.ident}"] = time.clock_gettime(clock)
            except OSError:  # it has just ended
                continue
    return seconds


if __name__ == "__main__":
    main()
