"""Integrations with other libraries, each behind an extra (``raftflow[ai]``: pydantic-ai)."""
