"""``python -m raftflow.engine.ops.cli``: the ``raftflow`` command."""

import sys

from raftflow.engine.ops.cli.main import main

sys.exit(main())
