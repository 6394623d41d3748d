"""Which seeds catch each mutation: the tables of docs/reliability.md, made by a command.

``python -m tests.sim --mutation-table --jobs 2`` runs every mutation (tests/sim/mutations.py:
the planted bugs, every fence removed, the clauses that allow nothing alone) and the code as
it is over the CI budget -- the seeds ``make test`` runs, 0..1,999 -- and prints, per
mutation, how many seeds caught it *as the violation it allows* (tests/sim/verdicts.py), the
first one, and what it saw there; ``--write`` records that in tests/sim/caught_by.json and
in docs/reliability.md (between its markers).

``python -m tests.sim --mutation-check`` is what ``make test`` runs (tests/sim/test_fences.py):
each recorded mutation's first seed first (a fast failure if it no longer catches it), then
every seed before it (none may catch it: the record would be stale). A planted bug or a
fence missing from the record, or recorded as never caught, fails too.
"""

from __future__ import annotations

import json
import multiprocessing
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.sim.fences import EQUIVALENT, FENCES
from tests.sim.mutations import MUTATIONS, PLANTED
from tests.sim.sim import run_seed
from tests.sim.verdicts import catching

#: The CI budget: the seeds ``make test`` runs (tests/sim/test_sim.py's default).
BUDGET = 2000
RECORD = Path(__file__).with_name("caught_by.json")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
BEGIN = "<!-- mutation-table: begin (python -m tests.sim --mutation-table --write) -->"
END = "<!-- mutation-table: end -->"
#: The row of the code as it is (no mutation): any violation counts.
NONE = ""


@dataclass
class Row:
    seeds: int
    caught: int = 0
    first: int | None = None
    violation: str | None = None  # what caught it at its first seed


Record = dict[str, Row]


@dataclass(frozen=True)
class Verdict:
    mutation: str
    seed: int
    caught: str | None  # the violation that caught it
    violations: int


def verdict(job: tuple[str, int]) -> Verdict:
    name, seed = job
    result = run_seed(seed, mutation=name or None, until_caught=bool(name))
    mutation = MUTATIONS[name] if name else None
    return Verdict(name, seed, catching(mutation, result.violations), len(result.violations))


def _run(jobs: Iterable[tuple[str, int]], processes: int) -> Iterator[Verdict]:
    if processes <= 1:
        yield from map(verdict, jobs)
        return
    with multiprocessing.Pool(processes) as pool:
        yield from pool.imap(verdict, jobs, chunksize=4)


def measure(names: list[str], seeds: int, processes: int) -> Record:
    """Each mutation (and :data:`NONE`) over seeds 0..seeds-1."""
    record = {name: Row(seeds) for name in names}
    for v in _run([(name, seed) for name in names for seed in range(seeds)], processes):
        row = record[v.mutation]
        if v.caught is not None:
            row.caught += 1
            if row.first is None or v.seed < row.first:
                row.first, row.violation = v.seed, v.caught
    return record


def required() -> list[str]:
    """What must be caught within the budget: the planted bugs and every fence."""
    return [*PLANTED, *FENCES]


def check(record: Record, processes: int) -> list[str]:
    """What is wrong with the record: a first seed that no longer catches its mutation, an
    earlier seed that now does, a mutation not caught within the budget."""
    problems = []
    firsts: dict[str, int] = {}
    for name in required():
        first = record[name].first if name in record else None
        if first is None:
            problems.append(f"{name}: not caught within the budget (or not recorded)")
        else:
            firsts[name] = first
    for v in _run(list(firsts.items()), processes):  # the known first seeds first
        if v.caught is None:
            problems.append(
                f"{v.mutation}: its first seed {v.seed} no longer catches it ({v.violations} "
                f"violation(s) of other kinds); replay: .venv/bin/python -m tests.sim --seed "
                f"{v.seed} --trace --mutation {v.mutation}"
            )
            firsts.pop(v.mutation)
    earlier = [(name, seed) for name, first in firsts.items() for seed in range(first)]
    for v in _run(earlier, processes):
        if v.caught is not None:
            problems.append(
                f"{v.mutation}: seed {v.seed} catches it, before its recorded first seed "
                f"{firsts[v.mutation]}: {v.caught}"
            )
    return problems


def render(record: Record) -> str:
    """The tables of docs/reliability.md."""
    budget = f"{max((row.seeds for row in record.values()), default=0):,}"
    head = [
        f"| mutation | what it removes | seeds that caught it (of {budget}) | first seed "
        "| violation seen at the first seed |",
        "|---|---|---:|---:|---|",
    ]
    out = ["Planted bugs (caught by any violation):", "", *head]
    out += [_row(name, record) for name in PLANTED]
    out += ["", "Every fence removed (caught only as the violation it allows):", "", *head]
    out += [_row(name, record) for name in FENCES]
    out += ["", "Removed alone, each allows nothing (another clause fences the same write):"]
    out += ["", "| mutation | what it removes | why nothing can go wrong | seeds that caught it |"]
    out += ["|---|---|---|---:|"]
    for name, (mutation, why) in EQUIVALENT.items():
        caught = record[name].caught if name in record else "not run"
        out.append(f"| `{name}` | {_cell(mutation.clause)} | {_cell(why, 400)} | {caught} |")
    none = record[NONE].caught if NONE in record else "not run"
    out += ["", f"Without any mutation: {none} of {budget} seeds report a violation of any kind."]
    return "\n".join(out)


def _row(name: str, record: Record) -> str:
    row = record.get(name)
    if row is None:
        return f"| `{name}` | {_cell(MUTATIONS[name].clause)} | not run | - | - |"
    first = "-" if row.first is None else str(row.first)
    seen = _cell(row.violation or "never caught")
    return f"| `{name}` | {_cell(MUTATIONS[name].clause)} | {row.caught} | {first} | {seen} |"


def _cell(text: str, most: int = 170) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= most else text[: most - 3] + "..."


def load() -> Record:
    if not RECORD.exists():
        return {}
    return {name: Row(**row) for name, row in json.loads(RECORD.read_text()).items()}


def write(record: Record) -> None:
    data = {name: asdict(row) for name, row in record.items()}
    RECORD.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    docs = DOCS.read_text()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(docs):
        raise SystemExit(f"{DOCS}: its markers are gone ({BEGIN!r} ... {END!r})")
    DOCS.write_text(pattern.sub(lambda _: f"{BEGIN}\n{render(record)}\n{END}", docs))


def documented() -> str | None:
    """The tables docs/reliability.md holds now (None: its markers are gone)."""
    found = re.search(re.escape(BEGIN) + "\n(.*?)\n" + re.escape(END), DOCS.read_text(), re.DOTALL)
    return found.group(1) if found else None


def table_main(processes: int, seeds: int, save: bool) -> int:
    started = time.perf_counter()
    names = [NONE, *PLANTED, *FENCES, *EQUIVALENT]
    record = measure(names, seeds, processes)
    print(render(record))
    print(f"\n{len(names)} runs of {seeds} seeds in {time.perf_counter() - started:.0f}s")
    if save:
        write(record)
    missed = [name for name in required() if record[name].first is None]
    return 1 if missed or record[NONE].caught else 0


def check_main(processes: int) -> int:
    started = time.perf_counter()
    record = load()
    problems = check(record, processes)
    for problem in problems:
        print(problem)
    firsts = [record[n].first for n in required() if n in record]
    ran = sum(first + 1 for first in firsts if first is not None)
    print(
        f"{len(required())} mutations checked ({ran} seeds) in "
        f"{time.perf_counter() - started:.1f}s: {len(problems)} problem(s)"
    )
    return 1 if problems else 0
