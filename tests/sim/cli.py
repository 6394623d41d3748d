"""The simulator's command line.

python -m tests.sim --seeds 2000                 # seeds 0..1999, a summary
python -m tests.sim --seeds 2000 --first 50000   # seeds 50000..51999
python -m tests.sim --seed 1234 --trace          # replay one seed, its whole trace
python -m tests.sim --seeds 500 --mutation no-fence   # a planted bug: which seeds catch it
python -m tests.sim --mutation-table --jobs 2 --write  # every mutation: docs/reliability.md
python -m tests.sim --mutation-check --jobs 2    # each recorded first seed is still the first
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from functools import partial

from tests import background
from tests.sim.mutations import MUTATIONS
from tests.sim.sim import Result, run_seed


def replay_command(seed: int, mutation: str | None = None) -> str:
    extra = f" --mutation {mutation}" if mutation else ""
    return f".venv/bin/python -m tests.sim --seed {seed} --trace{extra}"


def describe(result: Result, mutation: str | None = None) -> str:
    lines = [f"seed {result.seed}: {len(result.violations)} violation(s)"]
    lines += [f"  - {v}" for v in result.violations[:10]]
    lines.append(f"  replay: {replay_command(result.seed, mutation)}")
    return "\n".join(lines)


def _light_run(seed: int, **options: object) -> Result:
    """A seed's result without its trace (what crosses processes stays small)."""
    result = run_seed(seed, **options)  # type: ignore[arg-type]
    return Result(result.seed, result.violations, [], result.stats)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__)
    parser.add_argument(
        "--seeds", type=int, help="how many seeds to run (200; --mutation-table: 2,000)"
    )
    parser.add_argument("--first", type=int, default=0, help="the first seed")
    parser.add_argument("--seed", type=int, help="run this one seed")
    parser.add_argument("--trace", action="store_true", help="print the run's trace")
    parser.add_argument("--mutation", choices=sorted(MUTATIONS), help="plant a bug")
    parser.add_argument("--size", type=int, default=6, help="executions per seed")
    parser.add_argument("--stop", action="store_true", help="stop at the first failing seed")
    parser.add_argument("--jobs", type=int, default=1, help="processes running seeds at once")
    parser.add_argument(
        "--idle", action="store_true", help="run only on CPU no other process wants"
    )
    parser.add_argument(
        "--mutation-table",
        action="store_true",
        help="every mutation over the CI budget (--seeds, default 2000): the docs' tables",
    )
    parser.add_argument(
        "--write", action="store_true", help="with --mutation-table: record it, and in the docs"
    )
    parser.add_argument(
        "--mutation-check",
        action="store_true",
        help="each mutation's recorded first seed still catches it, and no seed before it",
    )
    args = parser.parse_args(argv)
    if args.idle:
        background.lowest_priority()
    if args.mutation_table or args.mutation_check:
        from tests.sim import table

        if args.mutation_check:
            return table.check_main(args.jobs)
        return table.table_main(args.jobs, args.seeds or table.BUDGET, args.write)
    args.seeds = 200 if args.seeds is None else args.seeds
    if args.seed is not None:
        result = run_seed(args.seed, size=args.size, mutation=args.mutation, verbose=args.trace)
        print(f"stats: {result.stats}")
        print(f"trace sha256: {result.digest}")
        if result.violations:
            print(describe(result, args.mutation))
            return 1
        print(f"seed {args.seed}: ok")
        return 0
    started = time.perf_counter()
    failed: list[Result] = []
    faults: dict[str, int] = {}
    requests = executions = 0
    seeds = range(args.first, args.first + args.seeds)
    job = partial(_light_run, size=args.size, mutation=args.mutation)
    pool = multiprocessing.Pool(args.jobs) if args.jobs > 1 else None
    results = pool.imap(job, seeds, chunksize=8) if pool is not None else map(job, seeds)
    for result in results:
        requests += result.stats["requests"]
        executions += result.stats["executions"]
        for name, count in result.stats["faults"].items():
            faults[name] = faults.get(name, 0) + count
        if result.violations:
            failed.append(result)
            print(describe(result, args.mutation), flush=True)
            if args.stop:
                break
    if pool is not None:
        pool.terminate()
    elapsed = time.perf_counter() - started
    ran = (failed[-1].seed - args.first + 1) if (args.stop and failed) else args.seeds
    injected = sum(v for k, v in faults.items() if k not in ("ok", "takeover-after-clock-jump"))
    print(
        f"{ran} seeds in {elapsed:.1f}s ({ran / elapsed:.1f} seeds/s): {executions} executions, "
        f"{requests} requests, {injected} faults injected {dict(sorted(faults.items()))}; "
        f"{len(failed)} failing seed(s)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
