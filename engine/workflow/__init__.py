"""The workflow core: what runs inside a workflow, free of the worker and of I/O.

The registry of workflows and steps, the replay of an execution's recorded calls
(:mod:`.activation`), a step call as an I/O-free flow (:mod:`.steppath`) and the durable
primitives built the same way (:mod:`.primitives`), driven by :mod:`.drivers` in a sync
workflow's thread or on the worker's loop. It never imports the worker runtime.
"""
