"""``python -m raftflow.engine.cli``: the ``raftflow`` command."""

import sys

from raftflow.engine.cli.main import main

sys.exit(main())
