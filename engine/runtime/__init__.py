"""The worker runtime: claim events, run their workflows, commit, keep leases alive.

:class:`~raftflow.engine.runtime.worker.Worker` is the handle; a run of it claims from the
transport, dispatches each event, batches commits to the store (:mod:`.committer`), keeps
leases alive, keeps suspended runs for their next turn, and runs the host duties (presence,
retention, schedules) behind one small interface.
"""
