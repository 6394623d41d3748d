-- Migration 12: lanes -- a worker claims only what it can run.
--
-- Why: several apps on one cluster (each worker registering its own workflows) leased
-- each other's executions; a worker that could not run one parked it ("not registered
-- here"), and it waited a minute per miss. A queue group now has a lane, set by its first
-- message like its priority: for an execution "<queue>/<workflow>" (engine/workflow/
-- lanes.py), kept on the execution so every later event of it (a resume's, a fork's)
-- finds it; for a schedule's group the lane of its workflow. A worker's claim names the
-- lanes it serves (`claim_served`, transports/queue.sql): one indexed range per lane and
-- priority, so its cost follows what the worker serves, not what else waits.
--
-- Rolling upgrade: workers of version 11 keep running beside version 12. They claim with
-- the claim of every lane, as before, and start executions and schedules without a lane:
-- those get the lane '', which every version-12 worker serves too (it served everything
-- before). Groups queued before the upgrade keep the lane '' for the same reason: no
-- backfill, the migration stays one small request.

-- name: lanes.groups
ALTER TABLE groups ADD COLUMN lane TEXT NOT NULL DEFAULT '';

-- name: lanes.messages
-- The lane a publish names (the group's, if it is the group's first message); NULL:
-- the lane of the execution of that id, if any, else ''.
ALTER TABLE messages ADD COLUMN lane TEXT;

-- name: lanes.executions
ALTER TABLE executions ADD COLUMN lane TEXT;

-- name: lanes.workers
-- The lanes a worker serves (a JSON array; NULL: every lane), for `raftflow queue`.
ALTER TABLE workers ADD COLUMN lanes TEXT;

-- name: lanes.groups_served
CREATE INDEX groups_served ON groups (lane, priority, ready_at);

-- name: lanes.drop_insert_trigger
DROP TRIGGER messages_after_insert;

-- name: lanes.insert_trigger
-- Migration 10's, and a new group takes its lane.
CREATE TRIGGER messages_after_insert AFTER INSERT ON messages BEGIN
  INSERT OR IGNORE INTO groups (group_id, priority, lane)
    VALUES (NEW.group_id, NEW.priority,
            COALESCE(NEW.lane, (SELECT lane FROM executions WHERE id = NEW.group_id), ''));
  INSERT OR IGNORE INTO message_keys (key, published_at)
    SELECT NEW.dedup_key, NEW.published_at WHERE NEW.dedup_key IS NOT NULL;
  UPDATE groups SET ready_at = NEW.lock_expiry
    WHERE group_id = NEW.group_id AND NEW.locked_by IS NOT NULL
      AND NEW.seq = (SELECT MIN(seq) FROM messages WHERE group_id = NEW.group_id);
END;

-- name: lanes.drop_start_trigger
DROP TRIGGER execution_start;

-- name: lanes.drop_starts_view
DROP VIEW execution_starts;

-- name: lanes.starts_view
-- Migration 9's view, and the lane.
CREATE VIEW execution_starts AS SELECT
  NULL AS id, NULL AS workflow, NULL AS input, NULL AS priority, NULL AS event,
  NULL AS now, NULL AS commit_id, NULL AS parent_id, NULL AS deadline,
  NULL AS lease_token, NULL AS lease_expiry,
  NULL AS limit_key, NULL AS limit_max, NULL AS debounce_until, NULL AS lane;

-- name: lanes.start_trigger
-- Migration 11's, and the execution keeps its lane.
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
                          commit_id, parent_id, deadline, limit_key, limit_max, admitted,
                          lane)
    VALUES (NEW.id, NEW.workflow,
            CASE WHEN NEW.lease_token IS NULL THEN 'pending' ELSE 'running' END,
            NEW.input, NEW.priority, NEW.now, NEW.now,
            NEW.commit_id, NEW.parent_id, NEW.deadline,
            NEW.limit_key, NEW.limit_max, NEW.limit_key IS NULL, NEW.lane);
  INSERT INTO messages (group_id, event, priority, published_at, locked_by, lock_expiry,
                        attempts)
    VALUES (NEW.id, NEW.event, NEW.priority, NEW.now,
            CASE WHEN NEW.lease_token IS NOT NULL THEN NEW.lease_token
                 WHEN NEW.debounce_until IS NOT NULL THEN '__parked__' END,
            COALESCE(NEW.lease_expiry, NEW.debounce_until),
            NEW.lease_token IS NOT NULL);
  INSERT INTO limit_gates (id) VALUES (NEW.id);
END;

-- name: lanes.drop_fork_trigger
DROP TRIGGER execution_fork;

-- name: lanes.fork_trigger
-- Migration 10's, and a fork takes its source's lane.
CREATE TRIGGER execution_fork INSTEAD OF INSERT ON execution_forks
WHEN NOT EXISTS (SELECT 1 FROM executions WHERE id = NEW.id)
BEGIN
  SELECT RAISE(ABORT, 'raftflow: no such execution') WHERE NOT EXISTS (
    SELECT 1 FROM executions WHERE id = NEW.source);
  INSERT INTO executions (id, workflow, status, input, priority, created_at, updated_at,
                          commit_id, deadline, limit_key, limit_max, admitted, lane)
    SELECT NEW.id, workflow, 'pending', input, priority, NEW.now, NEW.now, NEW.commit_id,
           NULL, limit_key, limit_max, limit_key IS NULL, lane
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

-- name: lanes.drop_fire_trigger
DROP TRIGGER schedule_fire;

-- name: lanes.fire_trigger
-- Migration 8's, and each start carries its lane (the schedule's workflow's).
CREATE TRIGGER schedule_fire INSTEAD OF INSERT ON schedule_fires BEGIN
  SELECT RAISE(IGNORE) WHERE NOT EXISTS (
    SELECT 1 FROM messages WHERE seq = NEW.seq AND locked_by = NEW.token);
  INSERT INTO execution_starts (id, workflow, input, priority, event, now, commit_id,
                                parent_id, deadline, lease_token, lease_expiry, lane)
    SELECT json_extract(s.value, '$.id'), json_extract(s.value, '$.workflow'),
           json_extract(s.value, '$.input'), 0, json_extract(s.value, '$.event'), NEW.now,
           json_extract(s.value, '$.commit_id'), NULL, json_extract(s.value, '$.deadline'),
           NULL, NULL, json_extract(s.value, '$.lane')
    FROM json_each(NEW.starts) AS s;
  UPDATE messages SET event = NEW.next_event, locked_by = '__parked__',
                      lock_expiry = NEW.next_at
    WHERE seq = NEW.seq;
END;
