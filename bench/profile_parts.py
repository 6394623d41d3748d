"""Py-spy profiles of the worker by part (docs/performance.md, "Where a step's time goes").

``python -m bench.profile_parts PROFILE [PROFILE...] --steps S [--cpu US]`` reads py-spy's
raw output (``py-spy record --threads --format raw``; :mod:`bench.step_profile` says how
to take it): the samples of the worker's threads (its loop's and its workflow threads'),
not waiting, grouped by the file of the sampled frame. Per part, the median over the
profiles of its share of the samples, and what that is per step: the samples divided by
the sampling rate and by ``S`` (the steps each profiled run made in all) -- or, with
``--cpu``, that share of ``US``, the worker's CPU per step measured by its threads' clocks
in runs without the profiler. Py-spy counts a thread that waits for a core as working: on
a busy machine its samples add up to more than the CPU the threads used.
"""

from __future__ import annotations

import argparse
import collections
import re
import statistics
from collections.abc import Iterable

#: The parts, by the file of the innermost frame: the first that matches.
PARTS = (
    ("socket send and receive (kernel)", r"selector_events\.py|socket"),
    ("the asyncio loop (its streams and futures too)", r"asyncio/"),
    (
        "the HTTP client's driver (transports/rqlite/wire.py, client.py)",
        r"rqlite/(wire|client)\.py",
    ),
    ("HTTP framing and the rqlite protocol (transports/rqlite/)", r"transports/rqlite/"),
    ("JSON encoding and decoding", r"json/"),
    ("dataclass constructors", r"<string>"),
    ("building the commit (stores/)", r"stores/"),
    (
        "hand-offs to and from a sync run's thread",
        r"threading\.py|concurrent/|workflow/handoff\.py",
    ),
    ("the workflow core (engine/workflow/)", r"engine/workflow/"),
    ("the worker runtime (engine/runtime/)", r"engine/runtime/"),
    ("flows and catalogues (transports/db/)", r"transports/db/"),
    ("pydantic", r"pydantic"),
    ("uuid4", r"uuid\.py"),
)
_RULES = tuple((name, re.compile(pattern)) for name, pattern in PARTS)
#: A sample whose innermost frames are one of these is a thread waiting, not working.
_WAITING = ("EpollSelector.select", "Condition.wait", "Event.wait", "_wait_released")
_WORKER_THREADS = ("raftflow-worker", "raftflow-workflow")


def parts(lines: Iterable[str]) -> collections.Counter[str]:
    """Samples of the worker's threads at work, by part."""
    counts: collections.Counter[str] = collections.Counter()
    for line in lines:
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        if not any(name in frame for frame in frames[:2] for name in _WORKER_THREADS):
            continue
        if _waits(frames):
            continue
        leaf = frames[-1]
        part = next((name for name, rule in _RULES if rule.search(leaf)), "other")
        counts[part] += int(count)
    return counts


def _waits(frames: list[str]) -> bool:
    if any(marker in frame for frame in frames[-3:] for marker in _WAITING):
        return True
    # An idle workflow thread: the pool's loop waiting in its queue's get (a C call, so
    # the loop's own frame is the innermost one).
    return frames[-1].startswith("_worker (concurrent/futures/thread.py")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_parts", description=__doc__)
    parser.add_argument("profiles", nargs="+")
    parser.add_argument("--steps", type=int, required=True, help="steps of each profiled run")
    parser.add_argument("--rate", type=int, default=500, help="py-spy's samples per second")
    parser.add_argument("--cpu", type=float, help="the worker's measured CPU per step, in us")
    args = parser.parse_args()
    shares: list[dict[str, float]] = []
    totals: list[float] = []
    for path in args.profiles:
        with open(path) as lines:
            counts = parts(lines)
        total = sum(counts.values())
        shares.append({name: count / total for name, count in counts.items()})
        totals.append(total * 1e6 / args.rate / args.steps)
    per_step = args.cpu if args.cpu is not None else statistics.median(totals)
    source = "measured" if args.cpu is not None else "sampled"
    print(
        f"{len(shares)} profile(s): {per_step:.0f} us of the worker's CPU per step ({source}; "
        f"sampled: {', '.join(f'{t:.0f}' for t in totals)})"
    )
    names = [name for name, _ in PARTS] + ["other"]
    medians = {name: statistics.median(s.get(name, 0.0) for s in shares) for name in names}
    for name in sorted(names, key=medians.__getitem__, reverse=True):
        print(f"  {name:64s} {medians[name] * per_step:5.0f} us  {100 * medians[name]:5.1f}%")


if __name__ == "__main__":
    main()
