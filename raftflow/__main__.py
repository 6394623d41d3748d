"""``python -m raftflow``: the ``raftflow`` command."""

import sys

from raftflow.engine.ops.cli import main

sys.exit(main())
