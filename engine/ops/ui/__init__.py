"""The dashboard (``raftflow ui``; ``pip install 'raftflow[ui]'``): :mod:`.server` (the
pages and actions), :mod:`.guard` (the middleware), :mod:`.hosts` (the Host allow-list),
:mod:`.auth` (who may see and act, CSRF), :mod:`.signin`, :mod:`.sessions`,
:mod:`.users` (password hashes), :mod:`.timeline`."""
