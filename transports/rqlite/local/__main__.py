"""``python -m raftflow.transports.rqlite.local``: a local rqlite cluster until Ctrl-C."""

from raftflow.transports.rqlite.local.cli import main

raise SystemExit(main())
