-- Migration 5: engine.continue_as_new() -- a run ends and the next one starts, under the
-- same execution id, with an empty history; the run that ended stays inspectable.
--
-- A run that continues is archived as its own finished execution row, id "<id>#<run>",
-- status 'continued', its output the next run's input, and its step records moved there;
-- the execution itself keeps its id, its queue group, its signals and events, and goes
-- on with the new input and `run` + 1. One fenced statement, like a commit.
--
-- Rolling upgrade: expand only. Workers of version 4 keep running beside version 5 (they
-- never continue a run; `run` has a default).

-- name: executions.run
ALTER TABLE executions ADD COLUMN run INTEGER NOT NULL DEFAULT 1;

-- name: continues.view
CREATE VIEW execution_continues AS SELECT
  NULL AS execution_id, NULL AS lease_seq, NULL AS lease_token, NULL AS commit_id,
  NULL AS now, NULL AS input, NULL AS next_event;

-- name: continues.trigger
-- Fenced: only the holder of the live lease continues the run.
CREATE TRIGGER execution_continue INSTEAD OF INSERT ON execution_continues BEGIN
  SELECT RAISE(ABORT, 'raftflow: lease lost') WHERE NOT EXISTS (
    SELECT 1 FROM messages WHERE seq = NEW.lease_seq AND locked_by = NEW.lease_token);
  INSERT INTO executions (id, workflow, status, input, output, priority, created_at,
                          updated_at, completed_at, commit_id, deadline, run)
    SELECT id || '#' || run, workflow, 'continued', input, NEW.input, priority, created_at,
           NEW.now, NEW.now, NEW.commit_id, deadline, run
    FROM executions WHERE id = NEW.execution_id;
  UPDATE steps SET execution_id = NEW.execution_id || '#' || (
      SELECT run FROM executions WHERE id = NEW.execution_id)
    WHERE execution_id = NEW.execution_id;
  UPDATE executions SET input = NEW.input, run = run + 1, status = 'running',
                        updated_at = NEW.now, commit_id = NEW.commit_id
    WHERE id = NEW.execution_id;
  -- The next run's first event, before the current one goes (the group row survives).
  INSERT INTO messages (group_id, event, priority, published_at)
    SELECT id, NEW.next_event, priority, NEW.now FROM executions WHERE id = NEW.execution_id;
  DELETE FROM messages WHERE seq = NEW.lease_seq;
END;
