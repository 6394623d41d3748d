"""The database's schema: the queue's tables and the store's, created together.

The queue (``transports/queue.sql``) stands alone: a bare
:class:`~raftflow.transports.transport.SqlTransport` creates only its own tables. The store
(``stores/store.sql``) does not: an execution's start publishes its first event and a
commit checkpoints a step, acks its event and publishes the next one in one statement, so
its triggers write the queue's tables. Whoever uses the store -- the engine, ``RqliteStore``
-- creates both, in one transaction (one Raft entry).
"""

from __future__ import annotations

from raftflow.stores.flows import QUERIES as STORE_QUERIES
from raftflow.transports.flow import Flow, Request, Statement
from raftflow.transports.queue import QUERIES as QUEUE_QUERIES


def schema_statements() -> tuple[Statement, ...]:
    """Every ``CREATE ... IF NOT EXISTS`` of the queue, then of the store."""
    return QUEUE_QUERIES.schema() + STORE_QUERIES.schema()


def create_schema() -> Flow[None]:
    """Create whatever is missing of the whole schema: one transactional request."""
    response = yield Request(schema_statements(), transaction=True)
    response.raise_for_errors()
