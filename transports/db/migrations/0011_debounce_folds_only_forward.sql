-- Migration 11: a debounced start folds into its execution only if it is no older than
-- the last start that did.
--
-- Why: a client's rqlite request that times out is sent again; the first copy may still
-- arrive later (a slow network: it is applied when it arrives). A debounced start's late
-- copy then folded its older input back in after a later start had folded in, and set the
-- first event's wait to its own old end, already past: the execution ran at once with an
-- input that was not the last one (found by the simulator, tests/sim: a start delayed past
-- the next one). A fold now applies only when its `now` is no earlier than the
-- execution's `updated_at` -- which only folds set while it waits, parked, to run -- so a
-- late copy of an older start changes nothing. (Not "later": a client's clock reads the
-- same time twice while it holds still after a new leader whose clock is behind, and
-- two starts then tie; the copy of a start that ties with the last fold re-applies it.)
--
-- Rolling upgrade: workers of version 10 keep running beside version 11. They start
-- executions through the same view; the trigger gives their starts the same effect,
-- except that an older start no longer undoes a newer one (CONTRIBUTING.md, rule 3).

-- name: fold.drop_start_trigger
DROP TRIGGER execution_start;

-- name: fold.start_trigger
-- Migration 10's, with the folds fenced by `updated_at <= NEW.now` (the message first:
-- the execution's update moves `updated_at`).
CREATE TRIGGER execution_start INSTEAD OF INSERT ON execution_starts BEGIN
  UPDATE messages SET lock_expiry = NEW.debounce_until
    WHERE NEW.debounce_until IS NOT NULL AND group_id = NEW.id AND locked_by = '__parked__'
      AND EXISTS (SELECT 1 FROM executions WHERE id = NEW.id AND workflow = NEW.workflow
                    AND status = 'pending' AND updated_at <= NEW.now);
  UPDATE executions SET input = NEW.input, updated_at = NEW.now
    WHERE NEW.debounce_until IS NOT NULL AND id = NEW.id AND workflow = NEW.workflow
      AND status = 'pending' AND updated_at <= NEW.now
      AND EXISTS (SELECT 1 FROM messages WHERE group_id = NEW.id AND locked_by = '__parked__');
  SELECT RAISE(IGNORE) WHERE EXISTS (SELECT 1 FROM executions WHERE id = NEW.id);
  INSERT INTO executions (id, workflow, status, input, priority, created_at, updated_at,
                          commit_id, parent_id, deadline, limit_key, limit_max, admitted)
    VALUES (NEW.id, NEW.workflow,
            CASE WHEN NEW.lease_token IS NULL THEN 'pending' ELSE 'running' END,
            NEW.input, NEW.priority, NEW.now, NEW.now,
            NEW.commit_id, NEW.parent_id, NEW.deadline,
            NEW.limit_key, NEW.limit_max, NEW.limit_key IS NULL);
  INSERT INTO messages (group_id, event, priority, published_at, locked_by, lock_expiry,
                        attempts)
    VALUES (NEW.id, NEW.event, NEW.priority, NEW.now,
            CASE WHEN NEW.lease_token IS NOT NULL THEN NEW.lease_token
                 WHEN NEW.debounce_until IS NOT NULL THEN '__parked__' END,
            COALESCE(NEW.lease_expiry, NEW.debounce_until),
            NEW.lease_token IS NOT NULL);
  INSERT INTO limit_gates (id) VALUES (NEW.id);
END;
