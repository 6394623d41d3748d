"""The dashboard (``raftflow ui``; ``pip install 'raftflow[ui]'``): :mod:`.server` (the
pages and actions), :mod:`.auth` (who may see and act, CSRF), :mod:`.timeline`."""
