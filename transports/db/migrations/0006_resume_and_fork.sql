-- Migration 6: engine.resume() and engine.fork() -- run a failed or cancelled execution
-- again from its last recorded step, or start a new one from another's first n steps.
--
-- Rolling upgrade: expand only (two views and their triggers).

-- name: resumes.view
CREATE VIEW execution_resumes AS SELECT
  NULL AS id, NULL AS event, NULL AS now, NULL AS commit_id;

-- name: resumes.trigger
-- A failed or cancelled execution is queued again: its status back to pending, its outcome
-- and cancel cleared, and the record that failed it removed (the failing step at the end
-- of its history, and any call left waiting) so that the step runs again, on the code
-- deployed now. Other executions are left as they are.
CREATE TRIGGER execution_resume INSTEAD OF INSERT ON execution_resumes
WHEN EXISTS (SELECT 1 FROM executions WHERE id = NEW.id AND status IN ('failed', 'cancelled'))
BEGIN
  DELETE FROM steps WHERE execution_id = NEW.id AND status IN ('waiting', 'retrying');
  DELETE FROM steps WHERE execution_id = NEW.id AND status = 'failed'
    AND idx = (SELECT MAX(idx) FROM steps WHERE execution_id = NEW.id);
  UPDATE executions SET status = 'pending', output = NULL, error = NULL,
                        completed_at = NULL, cancel_reason = NULL, updated_at = NEW.now,
                        commit_id = NEW.commit_id
    WHERE id = NEW.id;
  INSERT INTO messages (group_id, event, priority, published_at)
    SELECT id, NEW.event, priority, NEW.now FROM executions WHERE id = NEW.id;
END;

-- name: forks.view
CREATE VIEW execution_forks AS SELECT
  NULL AS id, NULL AS source, NULL AS from_step, NULL AS event, NULL AS now,
  NULL AS commit_id;

-- name: forks.trigger
-- A new execution of the same workflow and input whose first from_step calls are the
-- source's records (their functions are not called again), then runs from there on the
-- code deployed now. Idempotent: an id that exists is left alone.
CREATE TRIGGER execution_fork INSTEAD OF INSERT ON execution_forks
WHEN NOT EXISTS (SELECT 1 FROM executions WHERE id = NEW.id)
BEGIN
  SELECT RAISE(ABORT, 'raftflow: no such execution') WHERE NOT EXISTS (
    SELECT 1 FROM executions WHERE id = NEW.source);
  INSERT INTO executions (id, workflow, status, input, priority, created_at, updated_at,
                          commit_id, deadline)
    SELECT NEW.id, workflow, 'pending', input, priority, NEW.now, NEW.now, NEW.commit_id,
           NULL
    FROM executions WHERE id = NEW.source;
  INSERT INTO steps (execution_id, idx, name, status, output, error, started_at, ended_at,
                     worker_id, kind, attempts, wake_at, history)
    SELECT NEW.id, idx, name, status, output, error, started_at, ended_at, worker_id, kind,
           attempts, wake_at, history
    FROM steps WHERE execution_id = NEW.source AND idx < NEW.from_step
      AND status IN ('succeeded', 'failed');
  INSERT INTO messages (group_id, event, priority, published_at)
    SELECT NEW.id, NEW.event, priority, NEW.now FROM executions WHERE id = NEW.source;
END;
