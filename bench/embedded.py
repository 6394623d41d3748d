"""The latency phase's embedded-SQLite row: the C-client pattern on a local SQLite file.

``python -m bench.embedded --clients 32 --executions 128`` points ``bench.app``'s engine at
a fresh SQLite file (in a process of its own, so the benchmark's engine stays on its
cluster), runs C client threads that each ``start()`` a 5-step workflow and wait for its
``result()``, on an in-process worker of concurrency C, and prints one JSON object: steps/s
and the step-to-step summary (``bench.turnaround``'s figures, the same code).
``--synchronous normal`` opens the file with the opt-out of durable commits
(``sqlite:///...?synchronous=normal``), to measure what durability costs.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--executions", type=int, default=128)
    parser.add_argument("--synchronous", choices=("full", "normal"), default="full")
    args = parser.parse_args()
    from bench import app
    from bench.turnaround import clients_run

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "embedded.db"
        app.engine.connect(f"sqlite:///{path}?synchronous={args.synchronous}")
        try:
            with app.engine.running_worker(concurrency=args.clients):
                out = clients_run(app.engine, app.chain, args.clients, args.executions)
        finally:
            app.engine.close()
    print(json.dumps({**out, "synchronous": args.synchronous}))


if __name__ == "__main__":
    main()
