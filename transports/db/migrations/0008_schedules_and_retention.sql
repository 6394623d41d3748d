-- Migration 8: cron schedules
-- and retention.
--
-- Cron schedules: a schedule is one message in its own queue group ("raftflow:schedule:
-- <workflow>"), parked until its next fire time. The worker that claims it when it is due
-- inserts one row into `schedule_fires`: the trigger checks the lease, starts the
-- execution of each due time (id "<workflow>@<ISO time>", idempotent like every start)
-- and parks the message again until the next time -- one statement, one Raft entry.
--
-- Retention: finished executions are deleted in small batches by one worker at a time;
-- the index lets a batch find a finished execution's signals without a scan.
--
-- Rolling upgrade: expand only (a view, its trigger, two indexes). A worker of the
-- previous release that claims a schedule's message finds no execution of that id and
-- acks it; the new workers make it again within 10 s (their check of the schedules'
-- messages), parked for the next time: a fire time can be missed while both releases run.

-- name: schedule_fires.view
CREATE VIEW schedule_fires AS SELECT
  NULL AS seq, NULL AS token, NULL AS starts, NULL AS next_event, NULL AS next_at,
  NULL AS now;

-- name: schedule_fires.trigger
-- :starts is a JSON array of {id, workflow, input, event, deadline}: the due times.
CREATE TRIGGER schedule_fire INSTEAD OF INSERT ON schedule_fires BEGIN
  SELECT RAISE(IGNORE) WHERE NOT EXISTS (
    SELECT 1 FROM messages WHERE seq = NEW.seq AND locked_by = NEW.token);
  INSERT INTO execution_starts (id, workflow, input, priority, event, now, commit_id,
                                parent_id, deadline, lease_token, lease_expiry)
    SELECT json_extract(s.value, '$.id'), json_extract(s.value, '$.workflow'),
           json_extract(s.value, '$.input'), 0, json_extract(s.value, '$.event'), NEW.now,
           json_extract(s.value, '$.commit_id'), NULL, json_extract(s.value, '$.deadline'),
           NULL, NULL
    FROM json_each(NEW.starts) AS s;
  UPDATE messages SET event = NEW.next_event, locked_by = '__parked__',
                      lock_expiry = NEW.next_at
    WHERE seq = NEW.seq;
END;

-- name: executions.finished
-- Retention walks finished executions oldest first.
CREATE INDEX executions_finished ON executions (completed_at) WHERE completed_at IS NOT NULL;

-- name: signals.by_execution
CREATE INDEX signals_by_execution ON signals (execution_id);
