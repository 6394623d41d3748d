"""A py-spy profile of the worker by part (docs/performance.md, "Where a step's time goes").

``python -m bench.profile_parts PROFILE [PROFILE...] --steps S`` reads py-spy's raw output
(``py-spy record --threads --format raw``; :mod:`bench.step_profile` says how to take it)
and prints the worker's CPU per step by part: the samples of the worker's threads (its
loop's and its workflow threads'), not waiting, grouped by the file of the sampled frame,
divided by the sampling rate and by ``S``, the steps the profiled run made in all.
"""

from __future__ import annotations

import argparse
import collections
import re
from collections.abc import Iterable

#: The parts, by the file of the innermost frame: the first that matches.
PARTS = (
    ("socket send and receive (kernel)", r"selector_events\.py|socket|streams\.py"),
    ("the asyncio loop", r"base_events\.py|events\.py|asyncio/"),
    ("HTTP framing and rqlite protocol (transports/rqlite/)", r"transports/rqlite/"),
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
    parser.add_argument("--steps", type=int, required=True, help="steps of the profiled run")
    parser.add_argument("--rate", type=int, default=500, help="py-spy's samples per second")
    args = parser.parse_args()
    per_sample = 1e6 / args.rate / args.steps  # us per step
    for path in args.profiles:
        with open(path) as lines:
            counts = parts(lines)
        total = sum(counts.values())
        print(f"{path}: {total * per_sample:.0f} us of the worker's CPU per step")
        for name, count in counts.most_common():
            print(f"  {name:56s} {count * per_sample:5.0f} us  {100 * count / total:5.1f}%")


if __name__ == "__main__":
    main()
