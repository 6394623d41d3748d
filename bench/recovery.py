"""``python -m bench.recovery``: how long the executions of a worker killed with SIGKILL
wait before another worker goes on with them, per lease length (``raftflow worker
--lease``; docs/guides/operate.md, "Recovery time").

For each ``--lease`` (30, 5 and 2 s by default), ``--rounds`` times, on a fresh local
3-node rqlite cluster:

1. Worker A (``raftflow worker bench.app:engine --lease L``, entering through the leader)
   runs alone; ``--executions`` executions of ``bench.app.chain`` start, spread over one
   step, steps of ``--step`` seconds each (asyncio sleeps), more than the round lasts.
   Once A holds every one of them, worker B (the same lease, through a follower, a slot
   for each) starts: idle, as a spare worker is.
2. ``--settle`` seconds later, and a random part of a lease more (so that the kills of
   the rounds fall anywhere in the heartbeat's renewal cycle), A is killed with SIGKILL.
   Over that time the leader's Raft applied index gives the entries per second A's held
   executions cost (their step commits, and A's heartbeat: at most four renewal requests
   per lease length).
3. The executions A held are its leases left in the queue; how long each had left at the
   kill is read with them. The leader is then polled every ``--poll`` seconds until B has
   committed a step of each: per execution, the kill to B's first commit of it
   ("committed", the figure asked for) and to the start of that step in B as B recorded it
   ("taken over": the lease lapsed, B claimed and replayed; the step then runs again, in
   full, from its start).

The nodes and both workers run on this machine, so the step records' times (the leader's
clock, as the workers estimate it) and the kill's (this process's) share one clock.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from raftflow.transports.rqlite.local import LocalCluster

from bench import app
from bench.cluster import BenchCluster
from bench.report import _table
from raftflow import Engine

ROOT = Path(__file__).resolve().parents[1]


class WorkerProcess:
    """``raftflow worker bench.app:engine`` with the round's lease, its log in a file."""

    def __init__(self, worker_id: str, url: str, lease: float, concurrency: int, logs: Path):
        self.worker_id = worker_id
        self.log = logs / f"{worker_id}.log"
        argv = [sys.executable, "-m", "raftflow", "worker", "bench.app:engine", "--url", url]
        argv += ["--lease", str(lease), "--concurrency", str(concurrency)]
        argv += ["--worker-id", worker_id]
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)

    def wait_started(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while "started (concurrency" not in self.log.read_text(errors="replace"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker {self.worker_id} did not start:\n{self.tail()}")
            time.sleep(0.05)

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()


def wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return value


def held_by(bench: BenchCluster, worker_id: str) -> list[list[Any]]:
    """(execution id, lease deadline) of every lease ``worker_id`` holds."""
    return bench.query(
        "SELECT group_id, lock_expiry FROM messages WHERE locked_by LIKE ?",
        f"{worker_id}:%",
        level="strong",
    )


def one_round(args: argparse.Namespace, lease: float, n: int, logs: Path) -> dict[str, Any]:
    with LocalCluster(3) as cluster:
        bench = BenchCluster(cluster)
        Engine.from_url(bench.leader_url, auto_migrate=True).close()
        app.engine.connect(bench.entry_url(2))
        workers: list[WorkerProcess] = []
        try:
            a = WorkerProcess(f"a{n}", bench.entry_url(0), lease, args.executions, logs)
            workers.append(a)
            a.wait_started()
            spec = app.Chain(steps=100_000, sleep=args.step)
            for _ in range(args.executions):  # spread over a step: leases out of phase
                app.engine.start(app.chain, spec)
                time.sleep(args.step / args.executions)
            wait_for(
                lambda: len(held_by(bench, a.worker_id)) == args.executions,
                60,
                "A to hold every execution",
            )
            b = WorkerProcess(f"b{n}", bench.entry_url(1), lease, args.executions, logs)
            workers.append(b)
            b.wait_started()
            before = bench.raft_mark()
            time.sleep(args.settle + args.random.uniform(0, lease))
            after = bench.raft_mark()
            a.kill()
            killed_at = time.time()
            held = {row[0]: row[1] - killed_at for row in held_by(bench, a.worker_id)}
            committed: dict[str, float] = {}
            taken_over: dict[str, float] = {}
            deadline = time.monotonic() + lease + 60
            while len(committed) < len(held) and time.monotonic() < deadline:
                rows = bench.query(
                    "SELECT execution_id, MIN(started_at) FROM steps WHERE worker_id = ?"
                    " GROUP BY execution_id",
                    b.worker_id,
                )
                seen = time.time()
                for execution_id, started_at in rows:
                    if execution_id in held and execution_id not in committed:
                        committed[execution_id] = seen - killed_at
                        taken_over[execution_id] = started_at - killed_at
                time.sleep(args.poll)
        finally:
            for worker in workers:
                worker.kill()
            app.engine.close()
    if len(committed) < len(held):
        raise RuntimeError(f"B went on with {len(committed)} of the {len(held)} executions")
    return {
        "lease": lease,
        "held": len(held),
        "lease_left": sorted(held.values()),
        "taken_over": sorted(taken_over.values()),
        "committed": sorted(committed.values()),
        "raft_entries_per_s": (after.applied_index - before.applied_index) / (after.at - before.at),
    }


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} / {max(values):.2f}"


def render(rounds: list[dict[str, Any]], args: argparse.Namespace) -> str:
    rows = []
    for lease in args.lease:
        mine = [r for r in rounds if r["lease"] == lease]
        pooled = {k: [v for r in mine for v in r[k]] for k in ("lease_left", "taken_over")}
        committed = [v for r in mine for v in r["committed"]]
        entries = statistics.mean(r["raft_entries_per_s"] for r in mine)
        rows.append(
            [
                f"{lease:g} s",
                str(sum(r["held"] for r in mine)),
                f"{min(pooled['lease_left']):.2f} - {max(pooled['lease_left']):.2f}",
                spread(pooled["taken_over"]),
                spread(committed),
                f"{entries:.1f}",
            ]
        )
    headers = [
        "lease",
        "held",
        "lease left at kill (s)",
        "taken over: median / max (s)",
        "next step committed: median / max (s)",
        "Raft entries/s held",
    ]
    return (
        f"{args.executions} executions held by the killed worker per round, {args.rounds} "
        f"round(s) per lease, steps of {args.step:g} s\n" + _table(headers, rows)
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.recovery", description=__doc__)
    parser.add_argument("--lease", type=float, action="append", help="seconds (repeatable)")
    parser.add_argument("--executions", type=int, default=20)
    parser.add_argument("--step", type=float, default=2.0, help="seconds per step")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before the kill")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--poll", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=1, help="of the kills' random moments")
    parser.add_argument("--json", type=Path, help="write every round's figures here")
    args = parser.parse_args(argv)
    args.lease = args.lease or [30.0, 5.0, 2.0]
    args.random = random.Random(args.seed)
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as logs:
        for lease in args.lease:
            for _ in range(args.rounds):
                result = one_round(args, lease, len(rounds), Path(logs))
                print(
                    f"lease {lease:g} s: {result['held']} held, next step committed "
                    f"{spread(result['committed'])} s after the kill (median / max)",
                    flush=True,
                )
                rounds.append(result)
    print(render(rounds, args))
    if args.json:
        args.json.write_text(
            json.dumps({"args": vars(args) | {"json": None, "random": None}, "rounds": rounds})
        )


if __name__ == "__main__":
    main()
