"""Where workflow code and a recorded history part ways: the one check of a call against
its record, made by every run that replays (:meth:`Activation.next_call
<raftflow.engine.workflow.activation.Activation.next_call>`: a worker's, which fails the
execution with :class:`~raftflow.errors.NonDeterminismError`) and by ``engine.replay``,
which reports it (:mod:`raftflow.engine.client.replay`).
"""

from __future__ import annotations

from dataclasses import dataclass

from raftflow.stores.records import StepRecord


@dataclass(frozen=True, slots=True)
class Call:
    """A call of a workflow as its history records it: ``kind`` (step, sleep, recv, send,
    child, wait, event, patch) and ``name`` (the step's, the topic, the child's...)."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name!r}"


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first call at which the code no longer makes the recorded calls.

    ``recorded``: the call the history has at ``index`` (None: the history ends before
    it). ``called``: the call the code makes there now (None: the code ended there --
    returned, raised or continued as new). ``reason``: the whole story, in one sentence.
    """

    index: int
    recorded: Call | None
    called: Call | None
    reason: str

    def __str__(self) -> str:
        return self.reason


def check_call(index: int, record: StepRecord | None, kind: str, name: str) -> Divergence | None:
    """The divergence of the code's call ``kind name`` at ``index`` from its ``record``
    (None when it has none: the call is new, or when it is the recorded call)."""
    if record is None or (record.kind, record.name) == (kind, name):
        return None
    recorded, called = Call(record.kind, record.name), Call(kind, name)
    reason = f"call {index} is recorded as {recorded} but the workflow now calls {called}"
    return Divergence(index, recorded, called, reason)
