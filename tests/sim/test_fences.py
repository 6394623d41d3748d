"""Every fence removed on purpose is caught as the violation it allows (tests/sim/fences.py,
docs/reliability.md "Every fence, removed"), and the machinery that says so can fail.

- ``test_every_mutation_is_caught_first_by_its_recorded_seed``: ``python -m tests.sim
  --mutation-check`` (started with the session on idle CPU, tests/background.py): each
  mutation's recorded first seed still catches it as its violation, no earlier seed does;
- the docs' tables are the record (``python -m tests.sim --mutation-table --write``);
- a mutation whose clause is gone fails loudly, never runs as a no-op;
- the write audit blames a write under a lease its token does not hold, and only that.
"""

from __future__ import annotations

import pytest
from raftflow.engine.workflow.transaction import create_tables_request
from raftflow.transports.db.flow import Request, Statement
from raftflow.transports.queue import QUERIES as QUEUE

from tests import background
from tests.sim import table, workload
from tests.sim.audit import WriteAudit
from tests.sim.cluster import _fresh_databases
from tests.sim.fences import HELD, FenceGone, StatementFence, TriggerFence
from tests.sim.mutations import MUTATIONS, PLANTED
from tests.sim.verdicts import kind


@pytest.mark.timeout(1200)
def test_every_mutation_is_caught_first_by_its_recorded_seed(
    request: pytest.FixtureRequest,
) -> None:
    code, output, summary = background.outcome("mutations", "mutations", request)
    assert code == 0 and "0 problem(s)" in summary, output[-10000:]


def test_the_docs_tables_are_the_record() -> None:
    assert table.documented() == table.render(table.load()), (
        "docs/reliability.md's tables are not tests/sim/caught_by.json's: "
        "python -m tests.sim --mutation-table --jobs 2 --write"
    )


def test_each_recorded_catch_is_the_violation_its_mutation_allows() -> None:
    for name, row in table.load().items():
        if name == table.NONE or row.violation is None:
            continue
        expects = MUTATIONS[name].expects
        assert name in PLANTED or expects is not None, name  # a fence names its violation
        if expects is not None:
            assert kind(row.violation) in expects, (name, row.violation)


def _fresh() -> object:
    class Cluster:  # what TriggerFence.schema reads of a SimCluster
        main, stale = _fresh_databases(create_tables_request(workload.metadata))

    return Cluster


def test_a_fence_whose_clause_is_gone_fails_loudly() -> None:
    with pytest.raises(FenceGone, match="no longer matches"):
        StatementFence("x", None, "", QUEUE, ("ack",), r"AND locked_by = :nobody")
    with pytest.raises(FenceGone, match="no such statement"):
        StatementFence("x", None, "", QUEUE, ("no_such_statement",), HELD)
    cluster = _fresh()
    with (
        pytest.raises(FenceGone, match="no such trigger"),
        TriggerFence("x", trigger="no_such_trigger", pattern=HELD).schema(cluster),
    ):
        pass
    with (
        pytest.raises(FenceGone, match="no longer matches"),
        TriggerFence("x", trigger="execution_commit_fenced", pattern="NOTHING").schema(cluster),
    ):
        pass


def test_a_trigger_fence_holds_for_its_run_only() -> None:
    cluster = _fresh()
    db = cluster.main._db  # type: ignore[attr-defined]
    sql = "SELECT sql FROM sqlite_master WHERE name = 'execution_commit_fenced'"
    (original,) = db.execute(sql).fetchone()
    fence = MUTATIONS["commit-trigger-lease"]
    with fence.schema(cluster):
        (during,) = db.execute(sql).fetchone()
        (stale,) = cluster.stale._db.execute(sql).fetchone()  # type: ignore[attr-defined]
    assert during == stale != original
    assert "locked_by = NEW.lease_token" in original
    assert "locked_by = NEW.lease_token" not in during
    assert db.execute(sql).fetchone()[0] == original


def test_the_audit_blames_a_write_its_token_does_not_hold() -> None:
    cluster = _fresh()
    db = cluster.main._db  # type: ignore[attr-defined]
    db.execute(
        "INSERT INTO messages (group_id, event, locked_by, lock_expiry) "
        "VALUES ('e1', '{}', 'w2:new', 1e12)"
    )
    (seq,) = db.execute("SELECT seq FROM messages").fetchone()
    audit = WriteAudit(db)
    unfenced = "UPDATE messages SET lock_expiry = :expiry WHERE seq = :seq"

    def extend(token: str, expiry: float) -> list[str]:
        params = {"seq": seq, "token": token, "expiry": expiry}
        request = Request((Statement("queue.extend", unfenced, params),), False)
        suspects = audit.before(request)
        db.execute(unfenced, params)
        return audit.after(suspects)

    assert extend("w2:new", 2e12) == []  # its holder's
    (problem,) = extend("w1:old", 3e12)  # a stale worker's, applied: blamed
    assert problem.startswith("stale write: queue.extend of w1:old under message")
    assert "(leased to w2:new) changed e1's messages" in problem
    assert kind(problem) == "stale-write"
    fenced = QUEUE("extend", {"seq": seq, "token": "w1:old", "expiry": 4e12})
    suspects = audit.before(Request((fenced,), False))
    db.execute(fenced.sql, fenced.params)  # the real statement: its fence holds
    assert suspects and audit.after(suspects) == []


def test_the_record_covers_every_mutation() -> None:
    assert sorted(table.load()) == sorted([table.NONE, *MUTATIONS])
