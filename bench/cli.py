"""``python -m bench``: start a local 3-node rqlite cluster, run the phases, print the
table and write the JSON.

    python -m bench                    # default run, about a minute
    python -m bench --smoke            # seconds: checks that the benchmark still works
    python -m bench --mode scale       # claim latency at 10 vs 100k queued, RSS over 100k steps
    python -m bench --mode cost        # rqlite CPU per request: raw writes, commits, claims
    python -m bench --mode long        # one execution of N steps: per-step cost as N grows
    python -m bench --shards 1,2,3     # the same workload on 1, 2, 3 single-node clusters
    python -m bench --workers 3 --concurrency 32 --executions 96 --steps 100 --duration 10
    python -m bench --phases raftflow --worker-option max_inflight=1

Progress goes to stderr, the table to stdout, the JSON to ``--json``
(``bench/results/latest.json`` by default, ``shards.json`` for ``--shards``;
``bench/results/`` is git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import report
from bench.cluster import BenchCluster
from bench.counting import Tally, instrument
from bench.latency import ratio
from bench.naive_phase import run_naive
from bench.phases import Context, run_raftflow, run_raw
from bench.progress import Progress
from bench.settings import PHASES, RESULTS, Settings

_TUNABLES = {
    # flag name: (type, help)
    "workers": (int, "worker processes, W"),
    "concurrency": (int, "concurrent executions (or clients) per process, C"),
    "executions": (int, "executions, E"),
    "steps": (int, "steps per execution, K"),
    "step_sleep": (float, "seconds each step sleeps"),
    "duration": (float, "seconds of each raw-ceiling measurement"),
    "e2e_samples": (int, "sequential 1-step workflows for the end-to-end latency"),
    "queued": (int, "scale: messages queued for the 'many' claim-latency case"),
    "claim_samples": (int, "scale: claims timed per case"),
    "rss_executions": (int, "scale: executions of the RSS run"),
    "rss_steps": (int, "scale: steps per execution of the RSS run"),
    "primitive_repeats": (int, "timers: executions per primitive counted"),
    "waiting": (int, "timers: executions parked during the waiting window"),
    "wait_window": (float, "timers: seconds of the idle and the waiting windows"),
    "sleepers_light": (int, "timers: executions sleeping a random 1-5 s, a light load"),
    "sleepers": (int, "timers: executions sleeping a random 1-5 s, a heavy load"),
    "sleep_loop": (int, "long: wakes of the sleeping loop"),
    "sleep_loop_seconds": (float, "long: seconds each wake of the sleeping loop sleeps"),
    "inflight": (int, "long: executions asleep at once, for the worker's memory"),
    "shard_idle": (float, "shards: seconds of the idle window"),
}


def build_parser() -> argparse.ArgumentParser:
    d = Settings()
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="raftflow's benchmark: starts a local 3-node rqlite cluster, prints a "
        "table, writes JSON. See docs/performance.md.",
    )
    p.add_argument("--mode", choices=("default", "scale", "cost", "long"), default="default")
    p.add_argument("--smoke", action="store_true", help="tiny sizes: finishes in seconds")
    for name, (kind, text) in _TUNABLES.items():
        flag = "--" + name.replace("_", "-")
        p.add_argument(flag, type=kind, default=None, help=f"{text} (default {getattr(d, name)})")
    p.add_argument(
        "--sizes",
        default=None,
        help="long: comma-separated N for embedded SQLite (default 500,1000,2000,4000,8000)",
    )
    p.add_argument(
        "--rqlite-sizes",
        default=None,
        help="long: comma-separated N for rqlite (default 250,500,1000,2000; empty: none)",
    )
    p.add_argument(
        "--shards",
        default=None,
        metavar="N[,N...]",
        help="on N single-node clusters (a sharded deployment), each N in turn: per cluster "
        "Raft entries, leader CPU, requests; the idle cost (docs/guides/shards.md)",
    )
    p.add_argument("--sync", action="store_true", help="sync workflow and steps (thread pool)")
    p.add_argument(
        "--worker-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a WorkerOptions field for the raftflow workers, e.g. max_inflight=1 (repeatable)",
    )
    p.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"comma-separated subset of {','.join(PHASES)} (default: all)",
    )
    p.add_argument(
        "--json", type=Path, default=None, help=f"where to write the JSON (default {d.json_path})"
    )
    p.add_argument("--keep", action="store_true", help="keep the children's logs and JSON")
    return p


def settings_from(args: argparse.Namespace) -> Settings:
    phases = tuple(p.strip() for p in args.phases.split(",") if p.strip())
    unknown = set(phases) - set(PHASES)
    if unknown:
        raise SystemExit(f"unknown phases: {sorted(unknown)} (choose from {PHASES})")
    settings = Settings(mode=args.mode)
    if args.shards is not None:
        if args.mode != "default":
            raise SystemExit("--shards is a mode of its own: leave --mode out")
        settings = settings.sharded(_sizes(args.shards, "--shards"))
    if args.smoke:
        settings = settings.smoked()
    # Flags given on the command line win over the --smoke preset.
    overrides: dict[str, Any] = {
        name: getattr(args, name) for name in _TUNABLES if getattr(args, name) is not None
    }
    if args.sizes is not None:
        overrides["long_sizes"] = _sizes(args.sizes, "--sizes")
    if args.rqlite_sizes is not None:
        overrides["long_rqlite_sizes"] = _sizes(args.rqlite_sizes, "--rqlite-sizes")
    return replace(
        settings,
        **overrides,
        sync=args.sync,
        phases=phases,
        worker_options=tuple(args.worker_option),
        json_path=(args.json or _default_json(settings.mode)).resolve(),
    )


def _default_json(mode: str) -> Path:
    return RESULTS / ("shards.json" if mode == "shards" else "latest.json")


def _sizes(text: str, flag: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise SystemExit(f"{flag}: comma-separated integers, not {text!r}") from None
    if any(n < 1 for n in sizes):
        raise SystemExit(f"{flag}: every size must be >= 1, not {text!r}")
    return sizes


def machine() -> dict[str, Any]:
    import psutil  # type: ignore[import-untyped]

    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
            check=False,
        ).stdout.rstrip("\n")
    except OSError:
        return ""


def code_version() -> dict[str, Any]:
    """The commit measured, and which measured files differ from it (others edit them)."""
    changed = _git("status", "--porcelain", "--", "engine", "stores", "transports")
    return {
        "commit": _git("rev-parse", "--short", "HEAD").strip(),
        "uncommitted": [line[3:] for line in changed.splitlines()],
    }


def run_default(ctx: Context) -> dict[str, Any]:
    s = ctx.settings
    out: dict[str, Any] = {}
    if "raw" in s.phases:
        out["raw"] = {
            "single_client": run_raw(ctx, 1, 1, "1 client"),
            "concurrent": run_raw(ctx, s.workers, s.concurrency, f"{s.workers}x{s.concurrency}"),
        }
    from bench import app

    engine = app.engine
    engine.connect(ctx.cluster.entry_url(0))
    try:
        if "latency" in s.phases:
            # Right after the raw phase, its reference: on the cluster as that write saw
            # it, before the throughput phases leave it thousands of rows and a log to
            # snapshot (docs/performance.md, "Latency": the order moved the C=1 ratio).
            from bench.turnaround import run_latency

            out["latency"] = run_latency(ctx, engine, out.get("raw"))
        if "raftflow" in s.phases or "e2e" in s.phases:
            out["raftflow"] = run_raftflow(ctx, engine)
        if "transactions" in s.phases:
            out["transactions"] = run_raftflow(ctx, engine, transactions=True)
        if "timers" in s.phases:
            from bench.timers import run_timers

            out["timers"] = run_timers(ctx, engine)
    finally:
        engine.close()
    if "naive" in s.phases:
        out["naive"] = run_naive(ctx)
    raw_rate = out.get("raw", {}).get("concurrent", {}).get("writes_per_s")
    raw_single = out.get("raw", {}).get("single_client", {}).get("writes_per_s")
    rf = out.get("raftflow", {}).get("steady_steps_per_s")
    nv = out.get("naive", {}).get("steady_steps_per_s")
    tx = out.get("transactions", {}).get("steady_steps_per_s")
    out["ratios"] = {
        "raftflow_steps_per_raw_write": ratio(rf, raw_rate),
        "naive_steps_per_raw_write": ratio(nv, raw_rate),
        "raftflow_steps_per_raw_single_client_write": ratio(rf, raw_single),
        "raftflow_over_naive": ratio(rf, nv),
        "transaction_steps_per_plain_step": ratio(tx, rf),
    }
    return out


def phase_count(settings: Settings) -> int:
    if settings.mode == "scale":
        from bench.scale import sizes_of

        return 3 + len(sizes_of(settings.queued))
    if settings.mode == "cost":
        return 14
    if settings.mode == "long":
        from bench.long import phases

        return 1 + phases(settings)
    if settings.mode == "shards":
        return 3 * len(settings.shards)
    count = 1 + (2 if "raw" in settings.phases else 0)
    count += 1 if {"raftflow", "e2e"} & set(settings.phases) else 0
    count += 1 if "e2e" in settings.phases else 0
    count += 1 if "transactions" in settings.phases else 0
    if "latency" in settings.phases:
        from bench.turnaround import phase_count as latency_count

        count += latency_count(settings, paired="raw" in settings.phases)
    if "timers" in settings.phases:
        count += 3 + sum(1 for n in (settings.sleepers_light, settings.sleepers) if n > 0)
    return count + (1 if "naive" in settings.phases else 0)


def run_on_cluster(
    settings: Settings, work_dir: Path, progress: Progress, tally: Tally
) -> dict[str, Any]:
    """Every mode but ``--shards``: on one local 3-node cluster."""
    from raftflow.transports.rqlite.local import RQLITE_VERSION, LocalCluster

    progress.start("start a local 3-node rqlite cluster")
    with LocalCluster(3, base_dir=work_dir / "cluster") as local:
        cluster = BenchCluster(local)
        try:
            progress.done(f"rqlite {RQLITE_VERSION}, leader {cluster.nodes[0].node_id}")
            ctx = Context(settings, cluster, work_dir, progress, tally)
            if settings.mode == "scale":
                from bench.scale import run_scale

                return run_scale(ctx)
            if settings.mode == "cost":
                from bench.cost import run_cost

                return run_cost(ctx)
            if settings.mode == "long":
                from bench.long import run_long

                return run_long(ctx)
            return run_default(ctx)
        finally:
            cluster.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = settings_from(args)
    from raftflow.transports.rqlite.local import RQLITE_VERSION

    progress = Progress(phase_count(settings))
    tally = Tally()
    instrument(tally)
    work_dir = Path(tempfile.mkdtemp(prefix="raftflow-bench-"))
    began = time.time()
    load_before = os.getloadavg()
    code = code_version()
    failed = True
    try:
        if settings.mode == "shards":
            from bench.shards import run_shards

            results = run_shards(settings, work_dir, progress, tally)
        else:
            results = run_on_cluster(settings, work_dir, progress, tally)
        failed = False
    finally:
        if failed or args.keep:
            print(f"bench: logs and child outputs kept in {work_dir}", file=sys.stderr)
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
    results = {
        "meta": {
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(began)),
            "seconds": round(time.time() - began, 1),
            "rqlite": RQLITE_VERSION,
            "nodes": 1 if settings.mode == "shards" else 3,
            "machine": machine(),
            "code": code,
            # Other processes on the machine skew the numbers: the 1-minute load average
            # before and after the run shows whether the machine was shared.
            "load_average": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
            "settings": settings.as_json(),
        },
        **results,
    }
    settings.json_path.parent.mkdir(parents=True, exist_ok=True)
    settings.json_path.write_text(json.dumps(results, indent=1) + "\n")
    print(report.render(results))
    print(f"\nJSON: {settings.json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
