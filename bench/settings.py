"""The parameters of a benchmark run, their defaults and the ``--smoke`` preset."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
PHASES = ("raw", "raftflow", "e2e", "transactions", "latency", "naive", "timers")


@dataclass(frozen=True)
class Settings:
    mode: str = "default"  # "default", "scale", "cost", "long" or "shards"
    smoke: bool = False
    # The E x K workload, run by W worker processes of concurrency C (raftflow and naive).
    workers: int = 2
    concurrency: int = 16
    # E = W x C by default: every execution runs at once, so step-to-step gaps measure
    # raftflow rather than time spent waiting for a free slot.
    executions: int = 32
    steps: int = 100
    step_sleep: float = 0.0  # seconds each step sleeps (0: measure raftflow's own cost)
    sync: bool = False  # sync workflow and steps (thread pool) instead of async
    worker_options: tuple[str, ...] = ()  # WorkerOptions overrides, "name=value"
    # Raw ceiling: measured for `duration` seconds at 1 client and at W x C clients.
    duration: float = 5.0
    # End-to-end latency of a 1-step workflow: sequential start() -> result() samples.
    e2e_samples: int = 50
    phases: tuple[str, ...] = PHASES
    # --mode scale
    queued: int = 100_000  # messages queued for the "many" claim-latency case
    claim_samples: int = 200
    naive_claim_samples: int = 20
    rss_executions: int = 1_000
    rss_steps: int = 100  # rss_executions x rss_steps steps for the RSS run
    # timers phase: entries per primitive (repeats each), a waiting window, sleepers' wake-up
    primitive_repeats: int = 10
    waiting: int = 1_000  # executions parked during the waiting window
    wait_window: float = 5.0
    sleepers_light: int = 100  # executions sleeping a random 1-5 s, a light load
    sleepers: int = 1_000  # ... and a heavy one
    # --mode long: one execution of N steps per run, on embedded SQLite and on rqlite
    long_sizes: tuple[int, ...] = (500, 1_000, 2_000, 4_000, 10_000)
    long_rqlite_sizes: tuple[int, ...] = (250, 500, 1_000, 2_000)
    sleep_loop: int = 300  # --mode long: wakes of the sleeping loop
    # ... each after a sleep this long: over SHORT_WAIT (1 s, a wait in place), so that
    # every wake is the claim of a parked event (the case whose cost could grow)
    sleep_loop_seconds: float = 1.5
    inflight: int = 10_000  # --mode long: executions asleep at once (worker memory)
    # --shards: the numbers of single-node clusters measured in turn, each with the E x K
    # workload; then the same workers idle for shard_idle seconds (two presence beats)
    shards: tuple[int, ...] = ()
    shard_idle: float = 20.0
    # Where the JSON goes; how long any phase may take.
    json_path: Path = field(default=RESULTS / "latest.json")
    phase_timeout: float = 900.0

    @property
    def total_steps(self) -> int:
        return self.executions * self.steps

    def sharded(self, shards: tuple[int, ...]) -> Settings:
        """The ``--shards`` mode: E = 3 x W x C executions, so that up to N = 3 every
        cluster has work for all its slots (a leader's batches stay full, as under the
        load that makes one shard), and K long enough for a window of seconds."""
        return replace(
            self,
            mode="shards",
            shards=shards,
            executions=3 * self.workers * self.concurrency,
            steps=200,
        )

    def smoked(self) -> Settings:
        """Tiny sizes that finish in seconds (CI checks the benchmark still works)."""
        return replace(
            self,
            smoke=True,
            workers=1,
            concurrency=4,
            executions=8,
            steps=3,
            duration=0.5,
            e2e_samples=3,
            queued=2_000,
            claim_samples=20,
            naive_claim_samples=5,
            rss_executions=40,
            rss_steps=25,
            primitive_repeats=1,
            waiting=10,
            wait_window=1.0,
            sleepers_light=0,  # skipped
            sleepers=10,
            long_sizes=(20, 60),
            long_rqlite_sizes=(20, 40),
            sleep_loop=6,
            sleep_loop_seconds=0.05,
            inflight=100,
            shard_idle=1.0,
            phase_timeout=120.0,
        )

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["json_path"] = str(self.json_path)
        data["phases"] = list(self.phases)
        data["worker_options"] = list(self.worker_options)
        data["long_sizes"] = list(self.long_sizes)
        data["long_rqlite_sizes"] = list(self.long_rqlite_sizes)
        data["shards"] = list(self.shards)
        return data
