-- Migration 10: the group of an execution that waits for a slot is gated by the statement
-- that queues it (a start, a fork, a resume), not by a trigger of `groups`.
--
-- Why: rqlite 8.26 prepares every statement anew on every node, and preparing a statement
-- compiles every trigger program it may fire. Every INSERT into `messages` fires
-- `messages_after_insert`, which inserts into `groups`, which compiled migration 9's
-- `group_gated` and what it fires in turn (`limit_opens`, `limit_open`, the admission
-- triggers): 300 of the 500 VDBE ops of a start's event insert, 300 of the 2,000 of a
-- batch of full commits, on every node, for every request -- while it does something
-- only for the few executions that have a limit. Measured (docs/performance.md,
-- "Latency"): see there.
--
-- The gate is unchanged: when an execution that is not admitted gets its first event, its
-- group is made unclaimable (until its workflow's timeout, if it has one) and its key's
-- oldest waiters are admitted while slots are free. Only three statements ever queue an
-- unadmitted execution, each a view's trigger that inserts its first event; each now
-- ends with the gate, an insert into `limit_gates`. (A signal or a child's completion for
-- a waiting execution finds its group there already: its first event waits in it.) A
-- resumed execution is now gated even if a message was left in its group; before,
-- `group_gated` fired only when the group was created.
--
-- Rolling upgrade: workers of version 9 keep running beside version 10. They queue
-- executions only through these views, whose triggers give their writes the same effect
-- (CONTRIBUTING.md, rule 3); no statement of theirs relied on `group_gated` otherwise.

-- name: gate.drop_group_trigger
DROP TRIGGER group_gated;

-- name: gate.view
-- Inserting an execution's id here gates its group if it waits for a slot (not admitted):
-- unclaimable until its workflow's timeout, if it has one (then a worker claims it only to
-- cancel it); then its key's oldest waiters are admitted while slots are free (this one,
-- if nobody waits before it). Migration 9's `group_gated`, called by name.
CREATE VIEW limit_gates AS SELECT NULL AS id;

-- name: gate.trigger
CREATE TRIGGER limit_gate INSTEAD OF INSERT ON limit_gates
WHEN EXISTS (SELECT 1 FROM executions WHERE id = NEW.id AND admitted = 0)
BEGIN
  UPDATE groups SET ready_at = COALESCE(
      (SELECT deadline FROM executions WHERE id = NEW.id), 1e18)
    WHERE group_id = NEW.id;
  INSERT INTO limit_opens (key, max)
    SELECT limit_key, limit_max FROM executions WHERE id = NEW.id;
END;

-- name: gate.drop_start_trigger
DROP TRIGGER execution_start;

-- name: gate.start_trigger
-- Migration 9's, then the gate.
CREATE TRIGGER execution_start INSTEAD OF INSERT ON execution_starts BEGIN
  UPDATE executions SET input = NEW.input, updated_at = NEW.now
    WHERE NEW.debounce_until IS NOT NULL AND id = NEW.id AND workflow = NEW.workflow
      AND status = 'pending'
      AND EXISTS (SELECT 1 FROM messages WHERE group_id = NEW.id AND locked_by = '__parked__');
  UPDATE messages SET lock_expiry = NEW.debounce_until
    WHERE NEW.debounce_until IS NOT NULL AND group_id = NEW.id AND locked_by = '__parked__'
      AND EXISTS (SELECT 1 FROM executions WHERE id = NEW.id AND workflow = NEW.workflow
                    AND status = 'pending');
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

-- name: gate.drop_fork_trigger
DROP TRIGGER execution_fork;

-- name: gate.fork_trigger
-- Migration 9's, then the gate.
CREATE TRIGGER execution_fork INSTEAD OF INSERT ON execution_forks
WHEN NOT EXISTS (SELECT 1 FROM executions WHERE id = NEW.id)
BEGIN
  SELECT RAISE(ABORT, 'raftflow: no such execution') WHERE NOT EXISTS (
    SELECT 1 FROM executions WHERE id = NEW.source);
  INSERT INTO executions (id, workflow, status, input, priority, created_at, updated_at,
                          commit_id, deadline, limit_key, limit_max, admitted)
    SELECT NEW.id, workflow, 'pending', input, priority, NEW.now, NEW.now, NEW.commit_id,
           NULL, limit_key, limit_max, limit_key IS NULL
    FROM executions WHERE id = NEW.source;
  INSERT INTO steps (execution_id, idx, name, status, output, error, started_at, ended_at,
                     worker_id, kind, attempts, wake_at, history)
    SELECT NEW.id, idx, name, status, output, error, started_at, ended_at, worker_id, kind,
           attempts, wake_at, history
    FROM steps WHERE execution_id = NEW.source AND idx < NEW.from_step
      AND status IN ('succeeded', 'failed');
  INSERT INTO messages (group_id, event, priority, published_at)
    SELECT NEW.id, NEW.event, priority, NEW.now FROM executions WHERE id = NEW.source;
  INSERT INTO limit_gates (id) VALUES (NEW.id);
END;

-- name: gate.drop_resume_trigger
DROP TRIGGER execution_resume;

-- name: gate.resume_trigger
-- Migration 6's (its status update makes a limited execution unadmitted again: migration
-- 9's `execution_limit_resumed`), then the gate.
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
  INSERT INTO limit_gates (id) VALUES (NEW.id);
END;
