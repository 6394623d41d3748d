-- Migration 3: a step's checkpoint in the middle of a worker's turn is one plain INSERT.
--
-- While a worker keeps an execution for its turn, a step's commit needs only to record the
-- step, fenced by the lease: its event stays where it is (leased to the worker), the
-- execution's row does not change. `engine/backend.py` sends such commits as
-- `INSERT OR IGNORE INTO steps ... WHERE <the lease holds and no cancel is pending>`,
-- without the view and its triggers (which rqlite compiles on every node for every
-- request); `commit_id` tells an ambiguous retry that its first attempt applied.
-- `executions.steps_done` is no longer kept up to date (only full commits still add to
-- it, for workers of version 2): the reads count the steps. Read it through the store.
--
-- Rolling upgrade: expand only (a new nullable column). Workers of version 2 keep working.

-- name: steps.commit_id
ALTER TABLE steps ADD COLUMN commit_id TEXT;
