"""Plain SQL on the rqlite cluster for the chaos suite's observers (the checker, the monitor).

Deliberately not raftflow's own client: what checks the engine should not share its code.
Nodes are tried in turn until one answers; ``level="strong"`` reads go through the Raft
log, so they see every write acknowledged before them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx


class DbError(RuntimeError):
    pass


class Db:
    def __init__(self, urls: Sequence[str], *, timeout: float = 2.0) -> None:
        self.urls = list(urls)
        self.timeout = timeout
        self._client = httpx.Client()
        self._current = 0

    def query(
        self, sql: str, *params: Any, level: str = "strong", budget: float = 30.0
    ) -> list[dict[str, Any]]:
        """Rows of one read, from whichever node answers first within ``budget`` seconds."""
        deadline = time.monotonic() + budget
        last = "no attempt"
        while True:
            url = self.urls[self._current % len(self.urls)]
            try:
                return self.node_query(url, sql, *params, level=level)
            except (httpx.HTTPError, DbError) as exc:
                last = f"{url}: {exc}"
                self._current += 1
            if time.monotonic() >= deadline:
                raise DbError(f"no node answered {sql!r} within {budget}s (last: {last})")
            if self._current % len(self.urls) == 0:
                time.sleep(0.05)

    def node_query(
        self, url: str, sql: str, *params: Any, level: str = "none"
    ) -> list[dict[str, Any]]:
        """One read on one node, no retry (``level="none"``: that node's own data)."""
        response = self._client.post(
            f"{url}/db/query",
            params={"level": level},
            json=[[sql, *params]],
            timeout=self.timeout,
        )
        if response.status_code != 200:
            raise DbError(f"HTTP {response.status_code}: {response.text[:200]}")
        payload = response.json()
        if payload.get("error"):
            raise DbError(str(payload["error"]))
        result = payload["results"][0]
        if result.get("error"):
            raise DbError(str(result["error"]))
        columns = result.get("columns") or []
        return [dict(zip(columns, row)) for row in result.get("values") or []]

    def scalar(self, sql: str, *params: Any, level: str = "strong") -> Any:
        rows = self.query(sql, *params, level=level)
        return next(iter(rows[0].values())) if rows else None

    def close(self) -> None:
        self._client.close()
