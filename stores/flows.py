"""Every store operation as an I/O-free flow, shared by rqlite and SQLite, sync and async.

Reads are cheap first, exact when it matters. A ``weak`` read is answered by the leader
from its own state without a Raft round (no log entry, no wait for a quorum), which is
what status polling needs. But it can be stale: while a deposed leader has not noticed,
and -- seen by the chaos suite -- for seconds after a whole-cluster restart, when the new
leader answers before it has re-applied its log (even "no such table"). So an answer that
would be wrong to act on when stale -- "no such execution", an error -- is read again at
``strong`` (through the Raft log) before it is believed, and the step records, read
rarely, are always read strong. A weak "still running" is merely polled again. The worker
never relies on any of this: it reads what it replays in the same Raft entry as its claim.
"""

from __future__ import annotations

import builtins
import uuid
from typing import Any

from raftflow.stores.placement import PartitionOf, fence, refuse_moved
from raftflow.stores.records import ExecutionRecord, StartOutcome, Status, StepRecord
from raftflow.stores.rows import (
    STARTED_COLUMNS,
    cancelled_error,
    execution_from_row,
    read,
    start_params,
    step_from_row,
)
from raftflow.transports.db.catalogue import load
from raftflow.transports.db.clock import Clock, surely_after
from raftflow.transports.db.flow import Flow, Request, Statement
from raftflow.transports.lanes import check_lane
from raftflow.transports.payload import (
    MAX_PAYLOAD_BYTES,
    check_id,
    check_priority,
    check_topic,
    from_json,
    to_json,
)

from raftflow.errors import (
    ConfigurationError,
    ExecutionFinishedError,
    ExecutionNotFoundError,
    InvalidArgumentError,
)

QUERIES = load("raftflow.stores", "store.sql", "store")

#: Upper bound of ``list(limit=...)``.
MAX_LIST_LIMIT = 10_000


class StoreFlows:
    """The store's logic; :class:`~raftflow.stores.store.SqlStore` and its async twin drive it."""

    def __init__(self, clock: Clock, *, max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> None:
        self.clock = clock
        self.max_payload_bytes = max_payload_bytes
        #: Sharded: an id's partition, which each start carries (stores/placement.py).
        self.partition_of: PartitionOf = None
        #: The transport is on another database (stores/split.py): no concurrency limits.
        self.split = False

    def start(
        self,
        execution_id: str,
        workflow: str,
        input: Any,
        priority: int,
        event: Any,
        *,
        parent_id: str | None = None,
        timeout: float | None = None,
        lease_token: str | None = None,
        visibility: float = 30.0,
        trace_context: str | None = None,
        limit: tuple[str, int] | None = None,
        debounce: float | None = None,
        lane: str | None = None,
    ) -> Flow[StartOutcome]:
        """Create the execution and its first event (one request: two plain inserts, or
        the start view and a read for a limited or debounced start), or find it there.

        ``limit`` (key, slots): the execution waits, gated, for a slot of its key
        (migration 9). ``debounce``: its first event is parked that long, and a start of
        the same id while it still is folds into it (the new input, a new deadline).
        ``lane``: the lane of its events (transports/lanes.py; None: ``""``, any worker's)."""
        check_id(execution_id, what="execution_id")
        check_id(workflow, what="workflow name")
        if lane is not None:
            check_lane(lane)
        check_priority(priority)
        if limit is not None and self.split:
            raise ConfigurationError(
                "a concurrency limit needs the queue and the store on one database "
                "(its slots are counted where the queue admits the executions)"
            )
        input_text = to_json(input, what="workflow input", limit=self.max_payload_bytes)
        event_text = to_json(event, what="event", limit=self.max_payload_bytes)
        now = yield from self.clock.now()
        commit_id = uuid.uuid4().hex
        parked_until = None if debounce is None else surely_after(self.clock, now, debounce)
        params = start_params(
            execution_id,
            workflow,
            input_text,
            priority,
            event_text,
            now,
            commit_id,
            parent_id=parent_id,
            deadline=None if timeout is None else surely_after(self.clock, now, timeout),
            lease_token=lease_token,
            lease_expiry=None if lease_token is None else now + visibility,
            limit_key=None if limit is None else check_id(limit[0], what="concurrency key"),
            limit_max=None if limit is None else int(limit[1]),
            debounce_until=parked_until,
            lane=lane,
        )
        if limit is None and debounce is None:
            return (yield from self._start_direct(params, trace_context))
        # The trace context, when there is one, in the same transaction (an operator
        # feature: the start's one statement and the schema's start trigger stay as they are).
        traced = {"id": execution_id, "commit_id": commit_id, "trace_context": trace_context}
        read = {"id": execution_id, "commit_id": commit_id, "lease_token": lease_token}
        statements = (
            *fence(self.partition_of, execution_id),
            QUERIES("start", params),
            *(() if trace_context is None else (QUERIES("set_trace_context", traced),)),
            QUERIES("start_outcome", read),
        )
        response = yield Request(statements, transaction=True)
        refuse_moved(response, execution_id)
        response.raise_for_errors()
        return _started(execution_id, response.result_of("store.start_outcome").first())

    def _start_direct(
        self, params: dict[str, Any], trace_context: str | None
    ) -> Flow[StartOutcome]:
        """A start without a limit or a debounce, without a read (``start_direct``): the
        statements' results say whether this start created the execution, and the seq of
        its event (leased to ``lease_token``, if any)."""
        params = {**params, "trace_context": trace_context}
        fenced = fence(self.partition_of, params["id"])
        direct = (QUERIES("start_direct", params), QUERIES("start_direct_event", params))
        response = yield Request((*fenced, *direct), transaction=True)
        refuse_moved(response, params["id"])
        response.raise_for_errors()
        created, event = response[len(fenced)], response[len(fenced) + 1]
        if created.rows_affected == 1 and event.rows_affected == 1 and event.last_insert_id:
            leased = params["lease_token"] is not None
            row = {
                **{name: params[name] for name in STARTED_COLUMNS},
                "status": (Status.RUNNING if leased else Status.PENDING).value,
                "output": None,
                "error": None,
                "created_at": params["now"],
                "updated_at": params["now"],
                "completed_at": None,
                "steps_done": 0,
                "cancel_reason": None,
                "run": 1,
            }
            return StartOutcome(
                execution_from_row(row),
                created=True,
                lease_seq=int(event.last_insert_id) if leased else None,
                lease_expiry=float(params["lease_expiry"]) if leased else None,
            )
        # The id was there: another start's, or this one's from an earlier attempt of the
        # same request (a retry after an ambiguous failure) -- its commit id tells.
        read = {k: params[k] for k in ("id", "commit_id", "lease_token")}
        response = yield Request((QUERIES("start_outcome", read),), level="strong")
        return _started(params["id"], response.raise_for_errors()[0].first())

    def get(self, execution_id: str) -> Flow[ExecutionRecord | None]:
        check_id(execution_id, what="execution_id")
        rows = yield from read(QUERIES("get", {"id": execution_id}), strong_if_empty=True)
        return execution_from_row(rows[0]) if rows else None

    def list(self, status: Status | None, limit: int) -> Flow[builtins.list[ExecutionRecord]]:
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_LIST_LIMIT
        ):
            raise InvalidArgumentError(f"limit must be an int from 1 to {MAX_LIST_LIMIT}")
        if status is None:
            statement = QUERIES("list_all", {"limit": limit})
        else:
            statement = QUERIES("list_by_status", {"status": Status(status).value, "limit": limit})
        rows = yield from read(statement)
        return [execution_from_row(row) for row in rows]

    def steps(self, execution_id: str) -> Flow[builtins.list[StepRecord]]:
        check_id(execution_id, what="execution_id")
        response = yield Request((QUERIES("steps", {"id": execution_id}),), level="strong")
        return [step_from_row(row) for row in response.raise_for_errors()[0].dicts()]

    def counts(self) -> Flow[dict[Status, int]]:
        rows = yield from read(QUERIES("counts"))
        return {Status(row["status"]): int(row["n"]) for row in rows}

    def runs(self, execution_id: str) -> Flow[builtins.list[ExecutionRecord]]:
        check_id(execution_id, what="execution_id")
        response = yield Request((QUERIES("runs", {"id": execution_id}),), level="strong")
        return [execution_from_row(row) for row in response.raise_for_errors()[0].dicts()]

    def children(self, execution_id: str) -> Flow[builtins.list[ExecutionRecord]]:
        check_id(execution_id, what="execution_id")
        response = yield Request((QUERIES("children", {"id": execution_id}),), level="strong")
        return [execution_from_row(row) for row in response.raise_for_errors()[0].dicts()]

    def send(
        self, execution_id: str, message: Any, topic: str | None, key: str | None
    ) -> Flow[None]:
        """Store a signal for the execution and wake it if it waits: one statement.
        Idempotent by ``key`` (one is generated when omitted, so a retry is safe)."""
        check_id(execution_id, what="execution_id")
        params: dict[str, Any] = {
            "execution_id": execution_id,
            "topic": check_topic(topic),
            "payload": to_json(message, what="message", limit=self.max_payload_bytes),
            "key": uuid.uuid4().hex if key is None else check_id(key, what="key"),
        }
        params["now"] = yield from self.clock.now()
        response = yield Request((QUERIES("send", params),))
        error = response[0].error
        if error is not None and "raftflow: no such execution" in error:
            raise ExecutionNotFoundError(f"no execution has id {execution_id!r}")
        if error is not None and "raftflow: the execution is finished" in error:
            raise ExecutionFinishedError(
                f"execution {execution_id!r} is finished: nothing will receive the message"
            )
        response.raise_for_errors()

    def cancel(self, execution_id: str, reason: str = "cancelled") -> Flow[Status]:
        """Cancel an execution (one transactional request) and return its status before:
        a finished one keeps its status; one that no worker has started (pending, its
        event not leased) is cancelled at once and its events removed; another is
        cancelled by the next worker to handle it, at its next step boundary."""
        check_id(execution_id, what="execution_id")
        now = yield from self.clock.now()
        params = {"id": execution_id, "reason": reason, "now": now}
        unstarted = {**params, "error": cancelled_error(reason), "commit_id": uuid.uuid4().hex}
        response = yield Request(
            (
                QUERIES("status", {"id": execution_id}),
                QUERIES("cancel_unstarted", unstarted),
                QUERIES("cancel_unstarted_events", unstarted),
                QUERIES("cancel", params),
            ),
            transaction=True,
        )
        row = response.raise_for_errors()[0].first()
        if row is None:
            raise ExecutionNotFoundError(f"no execution has id {execution_id!r}")
        return Status(row["status"])

    def resume(self, execution_id: str, event: Any, lane: str | None = None) -> Flow[bool]:
        """Queue a failed or cancelled execution again (one transactional request); False
        for any other status, which is left as it is. The step it runs again keeps its
        failed attempts in its history. ``lane``: move it there (another version's)."""
        check_id(execution_id, what="execution_id")
        commit_id = uuid.uuid4().hex
        params = {
            "id": execution_id,
            "event": to_json(event, what="event"),
            "now": (yield from self.clock.now()),
            "commit_id": commit_id,
        }
        check = {"id": execution_id, "commit_id": commit_id}
        kept = {"id": execution_id, "now": params["now"]}
        response = yield Request(
            (
                QUERIES("resume_set_aside", kept),
                QUERIES("resume", params),
                QUERIES("resume_kept", kept),
                *_moved(execution_id, commit_id, lane),
                QUERIES("resumed", check),
            ),
            transaction=True,
        )
        row = response.raise_for_errors().result_of("store.resumed").first()
        if row is None:
            raise ExecutionNotFoundError(f"no execution has id {execution_id!r}")
        return bool(row["resumed"])

    def fork(
        self,
        source: str,
        from_step: int,
        execution_id: str,
        event: Any,
        lane: str | None = None,
    ) -> Flow[ExecutionRecord]:
        """A new execution reusing ``source``'s first ``from_step`` records (one
        transactional request; idempotent by ``execution_id``), in ``source``'s lane or in
        ``lane``. :class:`InvalidArgumentError` for a ``from_step`` past the source's
        recorded calls (nothing is written)."""
        check_id(source, what="execution_id")
        check_id(execution_id, what="execution_id")
        if isinstance(from_step, bool) or not isinstance(from_step, int) or from_step < 0:
            raise InvalidArgumentError(f"from_step must be an int >= 0, not {from_step!r}")
        commit_id = uuid.uuid4().hex
        params = {
            "id": execution_id,
            "source": source,
            "from_step": from_step,
            "event": to_json(event, what="event"),
            "now": (yield from self.clock.now()),
            "commit_id": commit_id,
        }
        response = yield Request(
            (
                QUERIES("fork_range", params),
                QUERIES("fork", params),
                *_moved(execution_id, commit_id, lane),
                QUERIES("get", {"id": execution_id}),
            ),
            transaction=True,
        )
        error = response[1].error
        range_ = response[0].first() or {}
        if (error is not None and "raftflow: no such execution" in error) or (
            error is None and not range_.get("found")
        ):
            raise ExecutionNotFoundError(f"no execution has id {source!r}")
        results = response.raise_for_errors()
        calls = int(range_.get("calls") or 0)
        if from_step > calls:
            raise InvalidArgumentError(
                f"execution {source!r} recorded {calls} call(s): from_step must be "
                f"0..{calls}, not {from_step}"
            )
        row = results.result_of("store.get").first()
        if row is None:
            raise ExecutionNotFoundError(f"execution {execution_id!r} could not be forked")
        return execution_from_row(row)

    def set_event(self, execution_id: str, key: str, value: Any) -> Flow[None]:
        check_id(execution_id, what="execution_id")
        params: dict[str, Any] = {
            "execution_id": execution_id,
            "key": check_topic(key, what="event key"),
            "value": to_json(value, what="event value", limit=self.max_payload_bytes),
        }
        params["now"] = yield from self.clock.now()
        (yield Request((QUERIES("set_event", params),))).raise_for_errors()

    def reserve_rate(self, key: str, token: str, limit: int, per: float) -> Flow[float]:
        """Reserve a start time under a rate limit (one request): the earliest that keeps
        at most ``limit`` starts of ``key`` in any ``per`` seconds, after every earlier
        reservation. Idempotent by ``token``: asking again returns the same time."""
        check_id(key, what="rate limit key")
        # The replay after a park asks again: a weak read (no Raft entry) finds its time. A
        # stale miss only sends the idempotent write below.
        mine = {"key": key, "token": token}
        found = yield Request((QUERIES("rate_reserved", mine),), level="weak")
        row = found[0].first() if found[0].error is None else None
        if row is not None:
            return float(row["at"])
        now = yield from self.clock.now()
        params = {"key": key, "token": token, "limit": limit, "per": per, "now": now}
        response = yield Request(
            (
                QUERIES("rate_forget", params),
                QUERIES("rate_reserve", params),
                QUERIES("rate_reserved", params),
            ),
            transaction=True,
        )
        row = response.raise_for_errors()[2].first()
        if row is None:
            raise InvalidArgumentError(f"no start time could be reserved for {key!r}")
        return float(row["at"])

    def get_event(self, execution_id: str, key: str) -> Flow[tuple[bool, Any]]:
        """(found, value) of an execution's event ``key`` (a weak read; a miss is read again
        at ``strong`` before it is believed)."""
        check_id(execution_id, what="execution_id")
        params = {"execution_id": execution_id, "key": check_topic(key, what="event key")}
        rows = yield from read(QUERIES("get_event", params), strong_if_empty=True)
        return (True, from_json(rows[0]["value"])) if rows else (False, None)


def _moved(execution_id: str, commit_id: str, lane: str | None) -> tuple[Statement, ...]:
    """The statements that move the execution a resume or fork wrote to ``lane``."""
    if lane is None:
        return ()
    params = {"id": execution_id, "commit_id": commit_id, "lane": check_lane(lane)}
    return QUERIES("move_execution", params), QUERIES("move_group", params)


def _started(execution_id: str, row: dict[str, Any] | None) -> StartOutcome:
    """The outcome a ``start_outcome`` row tells (the lease's columns are NULL without a
    lease token: no message is locked by NULL)."""
    if row is None:
        raise InvalidArgumentError(f"execution {execution_id!r} could not be started")
    leased = row["lease_seq"] is not None
    return StartOutcome(
        execution_from_row(row),
        created=bool(row["created"]),
        lease_seq=int(row["lease_seq"]) if leased else None,
        lease_expiry=float(row["lease_expiry"]) if leased else None,
    )
