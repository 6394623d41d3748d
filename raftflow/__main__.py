"""``python -m raftflow``: the ``raftflow`` command."""

import sys

from raftflow.engine.cli import main

sys.exit(main())
