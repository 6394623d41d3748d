"""A raftflow worker process for the benchmark: ``engine.worker(...)`` on ``bench.app``,
with every request counted (:mod:`bench.counting`) and its counters written as JSON
when it stops.

    python -m bench.worker --url http://h:4001,h:4003 --concurrency 16 --out w0.json

It speaks :mod:`bench.children`'s protocol: ``READY`` once the worker polls, a snapshot
of its counters (``WorkerStats``, round trips, requests by kind) at each SIGUSR1, drain
on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, fields
from typing import Any

from bench.children import (
    announce,
    ignore_signals,
    install_handlers,
    process_times,
    write_json,
)
from bench.counting import Tally, instrument


def snapshot(worker: Any, tally: Tally) -> dict[str, Any]:
    return {
        "t": time.time(),
        "stats": asdict(worker.stats),
        "round_trips": worker.round_trips,
        "tally": tally.snapshot(),
        "cpu": process_times(),
    }


def parse_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``["steps_per_turn=64", "retry_delay=0.1"]`` -> typed WorkerOptions overrides."""
    from raftflow import WorkerOptions

    defaults = {f.name: getattr(WorkerOptions(), f.name) for f in fields(WorkerOptions)}
    out: dict[str, Any] = {}
    for pair in pairs:
        name, _, text = pair.partition("=")
        if name not in defaults:
            raise SystemExit(f"unknown WorkerOptions field {name!r} (have {sorted(defaults)})")
        kind = type(defaults[name])
        if kind is bool:  # bool("False") is True
            if text.lower() not in ("true", "false"):
                raise SystemExit(f"{name} takes true or false, not {text!r}")
            out[name] = text.lower() == "true"
        else:
            out[name] = text if defaults[name] is None else kind(text)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.worker")
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--worker-id", default=None)
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a WorkerOptions field, e.g. steps_per_turn=64 (repeatable)",
    )
    parser.add_argument(
        "--no-samples",
        action="store_true",
        help="count requests but keep no latency samples (their memory would show in RSS)",
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)

    tally = Tally(keep_samples=not args.no_samples)
    instrument(tally)
    from bench.app import engine

    engine.connect(args.url)
    options: dict[str, Any] = {"concurrency": args.concurrency, "worker_id": args.worker_id}
    options.update(parse_options(args.option))
    worker = engine.worker(**options)
    marks: list[dict[str, Any]] = []

    async def run() -> None:
        loop = asyncio.get_running_loop()
        install_handlers(loop, lambda: marks.append(snapshot(worker, tally)), worker.stop)
        await worker.run(on_ready=lambda: announce("READY"))

    asyncio.run(run())
    ignore_signals()
    engine.close()
    write_json(
        args.out,
        {
            "worker_id": worker.worker_id,
            "options": asdict(worker.options),
            "marks": marks,
            "final": snapshot(worker, tally),
            "samples": {k: [round(x, 6) for x in v] for k, v in tally.samples.items()},
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
