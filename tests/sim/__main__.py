"""``python -m tests.sim``: run seeds; see docs/reliability.md."""

from tests.sim.cli import main

raise SystemExit(main())
