"""A simulated rqlite cluster: the real SQL on SQLite, behind a network that misbehaves.

Every HTTP call of the real rqlite client flow (:func:`raftflow.transports.rqlite.protocol.
exchange`: the same encoding, retries across nodes, ambiguity tracking) is answered here,
on simulated time, with a fault the seeded RNG picks for that call:

==============  =============================================================================
``ok``          applied (or read) and answered after a small random latency
``refused``     connection refused: nothing sent, nothing applied
``no-leader``   HTTP 503 (an election): nothing applied
``lost``        applied, then the connection resets before the answer (ambiguous)
``leadership``  applied, then "leadership lost while committing" (ambiguous)
``slow``        a long delay on the way in or out; past the client's timeout it is a
                timeout -- and a write that arrives late is still applied (ambiguous)
``stale``       a ``weak`` read served from a snapshot some writes behind
``election``    a leader change: 503 for a while, and the new leader's clock may be off
==============  =============================================================================

Statements run through :class:`~raftflow.transports.sqlite.connection.SqliteConnection`,
which reproduces rqlite's request semantics (a transaction stops at the first error; a
non-transactional request applies statement by statement). The clock query (``SELECT
julianday('now')...``) is answered with the simulated leader's clock. After every write the
cluster checks the queue's own invariant: no group has two live leases.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import random
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from raftflow.transports.db.flow import Request, Response, Result, Statement, run_flow
from raftflow.transports.db.schema import ensure
from raftflow.transports.queue import QUERIES
from raftflow.transports.rqlite.client import _advance
from raftflow.transports.rqlite.protocol import (
    HttpCall,
    HttpReply,
    NetworkFailure,
    NodeRing,
    RqliteConfig,
    Sleep,
    exchange,
)
from raftflow.transports.sqlite.connection import SqliteConnection

from tests.sim.audit import WriteAudit
from tests.sim.threads import Lockstep

#: The simulated epoch: time 0.0 of the loop is this wall-clock time.
EPOCH = 1_800_000_000.0
NODES = ("http://n1:4001", "http://n2:4001", "http://n3:4001")
CLOCK_SQL = QUERIES("clock").sql.strip()
#: The claims, by name (a mutation may change their text): the transport's claim of every
#: lane and a worker's of the lanes it serves.
CLAIM_NAMES = frozenset({QUERIES("claim").name, QUERIES("claim_served").name})

LIMITS_SQL = """
SELECT e.limit_key, MAX(e.limit_max), COUNT(DISTINCT e.id), COUNT(DISTINCT m.group_id)
FROM executions AS e
LEFT JOIN messages AS m ON m.group_id = e.id AND m.locked_by IS NOT NULL
  AND m.locked_by != '__parked__' AND m.lock_expiry >= :now
WHERE e.limit_key IS NOT NULL AND e.admitted = 1
  AND e.status NOT IN ('succeeded', 'failed', 'cancelled')
GROUP BY e.limit_key
HAVING COUNT(DISTINCT e.id) > MAX(e.limit_max) OR COUNT(DISTINCT m.group_id) > MAX(e.limit_max)
"""

#: Executions that wait for a slot of their limit (not admitted) and yet hold a live lease:
#: only a cancel (asked, or the workflow's timeout passed) may claim a waiter, to end it.
WAITERS_LEASED_SQL = """
SELECT e.limit_key, e.id, m.locked_by FROM executions AS e
JOIN messages AS m ON m.group_id = e.id AND m.locked_by IS NOT NULL
  AND m.locked_by != '__parked__' AND m.lock_expiry >= :now
WHERE e.limit_key IS NOT NULL AND e.admitted = 0 AND e.cancel_reason IS NULL
  AND (e.deadline IS NULL OR e.deadline > :now)
  AND e.status NOT IN ('succeeded', 'failed', 'cancelled')
"""

#: The simulated process a task belongs to (inherited by every task a worker creates).
PROCESS: contextvars.ContextVar[str] = contextvars.ContextVar("sim_process", default="client")


@dataclass
class Faults:
    """Per-call probabilities of each fault (drawn per seed: some seeds are calm, some not)."""

    refused: float = 0.02
    no_leader: float = 0.02
    lost: float = 0.02
    leadership: float = 0.01
    slow: float = 0.02
    stale: float = 0.1
    election: float = 0.003
    clock_jump: float = 0.0  # at an election: the new leader's clock is off by up to this

    @classmethod
    def draw(cls, rng: random.Random) -> Faults:
        level = rng.choice((0.0, 0.5, 1.0, 1.0, 2.0, 4.0))
        return cls(
            refused=0.02 * level,
            no_leader=0.02 * level,
            lost=0.02 * level,
            leadership=0.01 * level,
            slow=0.02 * level,
            stale=rng.choice((0.0, 0.1, 0.3)),
            election=0.003 * level,
        )


@dataclass
class Process:
    """A simulated process's fate: alive, paused (SIGSTOP) until a time, or dead (kill -9)."""

    name: str
    paused_until: float = 0.0
    died_at: float | None = None
    #: Its tasks waiting for the pause to end (:meth:`SimCluster.resume` ends it early).
    sleepers: list[asyncio.Future[None]] = field(default_factory=list)


@dataclass
class Counters:
    requests: int = 0
    mutated: int = 0  # statements a mutation changed (tests/sim/fences.py)
    faults: dict[str, int] = field(default_factory=dict)

    def count(self, fault: str) -> None:
        self.faults[fault] = self.faults.get(fault, 0) + 1


class SimCluster:
    """The cluster: one SQLite database (the Raft log applied), a stale copy, a leader clock."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        tables: Request,
        rng: random.Random,
        faults: Faults,
        trace: Callable[[str], None],
        rewrite: Callable[[str], str] | None = None,
        on_violation: Callable[[str], None] | None = None,
        index: int = 0,
    ) -> None:
        self.loop = loop
        self.rng = rng
        self.faults = faults
        self.trace = trace
        self.rewrite = rewrite
        self.on_violation = on_violation or (lambda message: None)
        #: Which of the process's clusters (a sharded seed has several: tests/sim/shards.py).
        self.index = index
        self.main, self.stale = _fresh_databases(tables, index)
        _NOW[0] = loop.time  # the triggers' sim_now() (registered once: see _NOW)
        self.audit = WriteAudit(self.main._db)  # every write under a lease, vs its holder
        #: How long a process stops before it sends a request (tests/sim/pressure.py).
        self.stall: Callable[[str, Request], float] | None = None
        self.on_claim: Callable[[], None] | None = None  # after each claim applied
        # The writes the stale copy has not applied yet; the first ``snapshot`` of them are
        # what it should show (it catches up lazily, at its next read).
        self.behind: list[Request] = []
        self.snapshot = 0
        self.writes = 0
        self.stale_at = 0
        self.leader_offset = 0.0
        self.clock_moved = 0.0  # how far the leader clock jumped in all, at elections
        #: Every clock query's answer: its value -> (when, the leader's offset then).
        self.clock_answers: dict[float, tuple[float, float]] = {}
        self.election_until = 0.0
        self.calm = False  # the workload is over: no more faults (so everything can finish)
        self.processes: dict[str, Process] = {}
        self.dead: list[asyncio.Future[None]] = []
        self.counters = Counters()
        self.watch = os.environ.get("SIM_WATCH")  # an execution whose rows the trace shows

    # -- time ---------------------------------------------------------------------------------

    def leader_time(self) -> float:
        return EPOCH + self.loop.time() + self.leader_offset

    # -- processes ----------------------------------------------------------------------------

    def process(self, name: str) -> Process:
        return self.processes.setdefault(name, Process(name))

    async def gate(self, name: str) -> None:
        """Where a process's code stands still: forever if it was killed, until it is
        continued if it was stopped."""
        process = self.process(name)
        while True:
            if process.died_at is not None:
                # Never: a dead process does nothing more. The future is kept, and with it
                # the task waiting on it: unreachable, the garbage collector would close
                # that coroutine (running its finally blocks) at a moment that depends on
                # the process's allocations, not on the seed.
                forever = self.loop.create_future()
                self.dead.append(forever)
                await forever
            wait = process.paused_until - self.loop.time()
            if wait <= 0:
                return
            # asyncio.sleep(wait), which resume() can end early.
            asleep = self.loop.create_future()
            timer = self.loop.call_later(wait, _wake, asleep)
            process.sleepers.append(asleep)
            try:
                await asleep
            finally:
                timer.cancel()
                process.sleepers.remove(asleep)

    def resume(self, name: str, at: float) -> None:
        """A stopped process continues at ``at`` (before the end of its pause)."""
        process = self.process(name)
        if process.died_at is not None or process.paused_until <= at:
            return
        process.paused_until = at
        for asleep in list(process.sleepers):
            self.loop.call_at(at, _wake, asleep)

    # -- one HTTP call ------------------------------------------------------------------------

    async def call(
        self, who: str, call: HttpCall, request: Request | None = None
    ) -> HttpReply | NetworkFailure:
        """Answer ``call``; ``request`` is what its body encodes, when the caller has it (the
        statements are then taken from it, not parsed back from the JSON body: the same
        SQL and the same values, as JSON carries them)."""
        await self.gate(who)
        if self.stall is not None and request is not None and not self.calm:
            await self._stall(who, request)
        rng, faults = self.rng, self.faults
        self.counters.requests += 1
        if request is not None:
            statements = request.statements
        else:
            statements = tuple(_statement(item) for item in json.loads(call.body or b"[]"))
        read_only = call.path == "/db/query"
        level = call.params.get("level", "weak")
        names = _names(statements)
        now = self.loop.time()
        fault = "ok"
        if not self.calm:
            roll = rng.random()
            for name, p in (
                ("refused", faults.refused),
                ("no-leader", faults.no_leader),
                ("lost", faults.lost),
                ("leadership", faults.leadership),
                ("slow", faults.slow),
                ("election", faults.election),
            ):
                if roll < p:
                    fault = name
                    break
                roll -= p
            if (
                fault == "ok"
                and read_only
                and level == "weak"
                and CLOCK_SQL not in {s.sql.strip() for s in statements}
                and rng.random() < faults.stale
            ):
                fault = "stale"
        if fault == "election":
            self.election_until = now + rng.uniform(0.5, 3.0)
            if faults.clock_jump:
                jump = rng.uniform(-faults.clock_jump, faults.clock_jump)
                self.leader_offset += jump
                self.clock_moved += abs(jump)
                self.trace(f"the new leader's clock is {self.leader_offset:+.3f}s off")
        if now < self.election_until and fault not in ("refused",):
            fault = "no-leader" if fault != "election" else fault
        self.counters.count(fault)
        inbound = rng.uniform(0.0005, 0.003)
        outbound = rng.uniform(0.0005, 0.003)
        if fault == "slow":
            if rng.random() < 0.5:
                inbound += rng.uniform(0.5, 2.0) * call.timeout
            else:
                outbound += rng.uniform(0.5, 2.0) * call.timeout
        if fault == "refused":
            await asyncio.sleep(inbound)
            self.trace(f"{who} {names} -> refused")
            return NetworkFailure(sent=False, detail="ConnectError: connection refused")
        if fault in ("no-leader", "election"):
            await asyncio.sleep(inbound + outbound)
            self.trace(f"{who} {names} -> {fault} (503)")
            return HttpReply(503, b"leader not found")
        answer: dict[str, Any] = {}

        def apply() -> None:
            # At the leader, when the request arrives (perhaps after the client gave up).
            if self.process(who).died_at is not None and fault == "slow":
                pass  # in flight when its sender died: it still arrives
            request = Request(statements, transaction="transaction" in call.params, level=level)
            answer["results"] = self._apply(request, stale=fault == "stale")

        if inbound >= call.timeout:
            self.loop.call_later(inbound, apply)
            await asyncio.sleep(call.timeout)
            self.trace(f"{who} {names} -> slow: timed out, arrives later")
            return NetworkFailure(sent=True, detail="ReadTimeout: timed out")
        await asyncio.sleep(inbound)
        apply()
        if fault == "lost":
            self.trace(f"{who} {names} -> applied, reply lost")
            return NetworkFailure(sent=True, detail="RemoteProtocolError: connection reset")
        if fault == "leadership":
            self.trace(f"{who} {names} -> applied, leadership lost")
            return HttpReply(200, b'{"error":"leadership lost while committing log"}')
        if inbound + outbound >= call.timeout:
            await asyncio.sleep(call.timeout - inbound)
            self.trace(f"{who} {names} -> slow: applied, answer timed out")
            return NetworkFailure(sent=True, detail="ReadTimeout: timed out")
        await asyncio.sleep(outbound)
        await self.gate(who)
        self.trace(f"{who} {names} -> {fault} {_summary(answer['results'])}")
        return HttpReply(200, json.dumps({"results": answer["results"]}).encode())

    async def _stall(self, who: str, request: Request) -> None:
        """``who`` stops right before it sends ``request`` (tests/sim/pressure.py), if it must."""
        assert self.stall is not None
        pause = self.stall(who, request)
        if pause:
            process = self.process(who)
            process.paused_until = max(process.paused_until, self.loop.time() + pause)
            self.trace(f"{who} stops for {pause:.2f}s before {_names(request.statements)}")
            await self.gate(who)

    # -- the database -------------------------------------------------------------------------

    def _apply(self, request: Request, *, stale: bool) -> list[dict[str, Any]]:
        if len(request.statements) == 1 and request.statements[0].sql.strip() == CLOCK_SQL:
            now = self.leader_time()
            self.clock_answers[now] = (self.loop.time(), self.leader_offset)
            return [{"columns": ["now"], "values": [[now]]}]
        if self.rewrite is not None:
            sent = request.statements
            request = Request(
                tuple(Statement(s.name, self.rewrite(s.sql), s.params) for s in sent),
                request.transaction,
                request.level,
            )
            self.counters.mutated += sum(a.sql != b.sql for a, b in zip(sent, request.statements))
        if stale:
            self._catch_up()
        connection = self.stale if stale else self.main
        claim = not stale and any(s.name in CLAIM_NAMES for s in request.statements)
        before = self._live_leases() if claim else {}
        suspects = self.audit.before(request) if not (stale or request.is_read_only) else []
        response = connection.send(request)
        for message in self.audit.after(suspects) if suspects else ():
            self.on_violation(message)
        if claim:
            self._check_takeovers(before)
            if self.on_claim is not None:
                self.on_claim()
        if not request.is_read_only:
            self.writes += 1
            self.behind.append(request)
            if self.watch:
                rows = self.main._db.execute(
                    "SELECT seq, locked_by, lock_expiry, event FROM messages WHERE group_id = ?",
                    (self.watch,),
                ).fetchall()
                steps = self.main._db.execute(
                    "SELECT idx, status, output FROM steps WHERE execution_id = ?", (self.watch,)
                ).fetchall()
                self.trace(f"  {self.watch} at {self.leader_time() - EPOCH:.4f}: {rows} {steps}")
            self._check_leases()
            if self.writes >= self.stale_at:  # the stale copy lags 1-20 writes behind
                self.snapshot = len(self.behind)
                self.stale_at = self.writes + self.rng.randint(1, 20)
        return [_encode(result) for result in response.results]

    def _catch_up(self) -> None:
        """The stale copy applies the writes of its snapshot, as a follower applies the log
        (the statements are deterministic: every time is a parameter). Done at a stale read
        only: a seed without one never runs a write twice."""
        for request in self.behind[: self.snapshot]:
            self.stale.send(request)
        del self.behind[: self.snapshot]
        self.snapshot = 0

    def _live_leases(self) -> dict[int, tuple[str, float]]:
        rows = self.main._db.execute(
            "SELECT seq, locked_by, lock_expiry FROM messages WHERE locked_by IS NOT NULL "
            "AND locked_by != '__parked__' AND lock_expiry >= ?",
            (self.leader_time(),),
        ).fetchall()
        return {seq: (token, expiry) for seq, token, expiry in rows}

    def _check_takeovers(self, before: dict[int, tuple[str, float]]) -> None:
        """A claim takes over a lease only once it lapsed on the leader's clock (give or take
        how far the leader's clock itself jumped at elections)."""
        if not before:
            return
        now = self.leader_time()
        marks = ",".join("?" * len(before))
        rows = self.main._db.execute(
            f"SELECT seq, group_id, locked_by FROM messages WHERE seq IN ({marks})", tuple(before)
        ).fetchall()
        for seq, group_id, token in rows:
            old, expiry = before[seq]
            if token != old and token not in (None, "__parked__"):
                early = expiry - now
                if 1e-6 < early <= self.clock_moved + 1e-6:
                    # The leader's clock jumped at an election: on the new reference the
                    # lease lapsed early. Allowed (the old holder's commits are fenced), and
                    # counted: docs/reliability.md, "clock faults".
                    self.counters.count("takeover-after-clock-jump")
                    self.trace(f"takeover of {group_id} {early:.3f}s early: the clock jumped")
                elif early > self.clock_moved + 1e-6:
                    self.on_violation(
                        f"{token.split(':')[0]} took over the lease of {group_id} (message "
                        f"{seq}) from {old.split(':')[0]} {early:.3f}s before it lapsed"
                    )

    def _check_leases(self) -> None:
        rows = self.main._db.execute(
            "SELECT group_id, COUNT(*) FROM messages WHERE locked_by IS NOT NULL "
            "AND locked_by != '__parked__' AND lock_expiry >= ? GROUP BY group_id "
            "HAVING COUNT(*) > 1",
            (self.leader_time(),),
        ).fetchall()
        for group_id, count in rows:
            self.on_violation(f"group {group_id} has {count} live leases at once")
        # Concurrency limits: per key, the executions holding a slot (admitted, not final)
        # and those with a live lease never outnumber the key's slots.
        rows = self.main._db.execute(LIMITS_SQL, {"now": self.leader_time()}).fetchall()
        for key, slots, admitted, leased in rows:
            self.on_violation(
                f"limit {key}: {admitted} executions hold its {slots} slots, {leased} leased"
            )
        for key, execution_id, token in self.main._db.execute(
            WAITERS_LEASED_SQL, {"now": self.leader_time()}
        ).fetchall():
            self.on_violation(
                f"limit {key}: {execution_id} leased to {token.split(':')[0]} while it waits "
                "for a slot"
            )

    def query(self, sql: str, params: Any = ()) -> list[dict[str, Any]]:
        """A read of the true state (for the checker; no fault, no trace)."""
        cursor = self.main._db.execute(sql, params)
        columns = [d[0] for d in cursor.description]
        return [dict(zip(columns, row)) for row in cursor.fetchall()]


#: Each cluster's databases (by its index: a sharded seed has several), and their process.
_DATABASES: dict[int, tuple[SqliteConnection, SqliteConnection, int]] = {}
#: What the function ``sim_now`` of the databases reads: the running seed's loop clock.
#: Registered once per connection, not per seed: registering a function expires every
#: prepared statement of the connection, and preparing them again doubled a seed's SQL time.
_NOW: list[Callable[[], float]] = [lambda: 0.0]

#: For the checker: every execution's status as it changes, when it is applied (simulated
#: time, from the function ``sim_now`` each seed registers): a start, a timeout's cancel.
TRANSITIONS = """
CREATE TABLE sim_transitions (seq INTEGER PRIMARY KEY, id TEXT, status TEXT, at REAL);
CREATE TRIGGER sim_started AFTER INSERT ON executions BEGIN
  INSERT INTO sim_transitions (id, status, at) VALUES (NEW.id, NEW.status, sim_now());
END;
CREATE TRIGGER sim_transition AFTER UPDATE OF status ON executions
WHEN NEW.status IS NOT OLD.status BEGIN
  INSERT INTO sim_transitions (id, status, at) VALUES (NEW.id, NEW.status, sim_now());
END;
"""


def _fresh_databases(tables: Request, index: int = 0) -> tuple[SqliteConnection, SqliteConnection]:
    """This process's two in-memory databases of cluster ``index`` (the cluster's state and
    its stale copy), both emptied back to the migrated schema and the workload's ``tables``.

    They are made once per process and emptied for each seed rather than made anew: a new
    connection parses the schema and prepares every statement again (1-9 ms each, two
    thirds of a seed's SQL time), while an emptied one keeps its prepared statements. An
    emptied database answers as a new one would (rowids and AUTOINCREMENT restart; only
    the free pages differ). One simulation at a time per process.
    """
    if _DATABASES and next(iter(_DATABASES.values()))[2] != os.getpid():
        _DATABASES.clear()  # a forked child: its parent's connections are not its own
    if index not in _DATABASES:
        main = SqliteConnection(":memory:")
        run_flow(main, ensure(True))
        for result in main.send(tables).results:
            assert result.error is None, result.error
        main._db.create_function("sim_now", 0, lambda: _NOW[0]())
        main._db.executescript(TRANSITIONS)
        stale = SqliteConnection(":memory:")
        stale._db.create_function("sim_now", 0, lambda: _NOW[0]())
        main._db.backup(stale._db)
        _DATABASES[index] = (main, stale, os.getpid())
    main, stale, _ = _DATABASES[index]
    for connection in (main, stale):
        _empty(connection._db)
    return main, stale


def _empty(db: sqlite3.Connection) -> None:
    """Delete every row but the schema's own record (sqlite_sequence too), again until a pass
    changes nothing (triggers of a delete may write to a table already emptied)."""
    tables = [
        name
        for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'raftflow_schema'"
        )
    ]
    while True:
        before = db.total_changes
        for table in tables:
            db.execute(f'DELETE FROM "{table}"')
        if db.total_changes == before:
            return


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _statement(item: list[Any]) -> Statement:
    sql, *rest = item
    if len(rest) == 1 and isinstance(rest[0], dict):
        return Statement("sim", sql, rest[0])
    return Statement("sim", sql, tuple(rest))


def _encode(result: Result) -> dict[str, Any]:
    if result.error is not None:
        return {"error": result.error}
    out: dict[str, Any] = {"rows_affected": result.rows_affected}
    if result.columns:
        out["columns"] = list(result.columns)
        out["values"] = [list(row) for row in result.rows]
    if result.last_insert_id is not None:
        out["last_insert_id"] = result.last_insert_id
    return out


def _catalogue_names() -> dict[str, str]:
    from raftflow.engine.runtime.presence import __name__ as _presence  # noqa: F401 (its SQL)
    from raftflow.stores.flows import QUERIES as STORE
    from raftflow.stores.inspect import OPS

    names: dict[str, str] = {}
    for catalogue in (QUERIES, STORE, OPS):
        for name, sql in catalogue.queries.items():
            names.setdefault(sql.strip(), name)
    return names


_NAMES: dict[str, str] = {}


def _names(statements: tuple[Statement, ...]) -> str:
    if not _NAMES:
        _NAMES.update(_catalogue_names())
    heads = []
    for s in statements:
        name = _NAMES.get(s.sql.strip())
        if name is None:
            name = " ".join(s.sql.split()[:3])[:20]
        heads.append(name)
    return "[" + " ".join(heads) + "]"


def _summary(results: list[dict[str, Any]]) -> str:
    parts = []
    for r in results:
        if "error" in r:
            parts.append("err")
        elif "values" in r:
            parts.append(f"{len(r['values'])}r")
        else:
            parts.append(f"{r.get('rows_affected', 0)}w")
    return ",".join(sorted(parts))


class SimConnection:
    """The async rqlite connection of one simulated process: the real exchange flow, its
    HTTP calls answered by the :class:`SimCluster`, its sleeps on simulated time."""

    def __init__(self, cluster: SimCluster, who: str, config: RqliteConfig) -> None:
        self.cluster = cluster
        self.who = who
        self.config = config
        self.ring = NodeRing(config.nodes)
        self.round_trips = 0

    @property
    def identity(self) -> str:
        return self.config.identity

    async def send(self, request: Request) -> Response:
        loop = asyncio.get_running_loop()
        flow = exchange(self.config, self.ring, request, loop.time)
        reply: HttpReply | NetworkFailure | None = None
        while not isinstance(step := _advance(flow, reply), Response):
            reply = None
            if isinstance(step, Sleep):
                await asyncio.sleep(step.seconds)
            else:
                self.round_trips += 1
                reply = await self.cluster.call(self.who, step, request)
        return step

    async def close(self) -> None:
        return None


class SyncSimConnection:
    """What a :class:`~raftflow.transports.db.database.Database` holds: its async twin, and
    blocking requests from the simulation's threads (``Engine.start`` in a worker's
    process), sent on the loop while the thread waits (tests/sim/threads.py)."""

    def __init__(self, connection: SimConnection, lockstep: Lockstep) -> None:
        self.connection = connection
        self.lockstep = lockstep

    @property
    def identity(self) -> str:
        return self.connection.identity

    def send(self, request: Request) -> Response:
        response: Response = self.lockstep.run(self.connection.send(request))
        return response

    def to_async(self) -> SimConnection:
        return self.connection

    def close(self) -> None:
        return None
